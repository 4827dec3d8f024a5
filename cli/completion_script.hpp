#pragma once
// Shell completion scripts for bash, zsh and fish, written from the CLI11 app itself: the same
// command definitions as `--help`, walked at run time, so that a command or option added later
// completes without touching this file. Candidates that depend on the machine (job ids, node
// names) come from hidden `streamctl completion --list-*` calls the scripts make.

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace streamctl::cli {

// What the word after an option, or a positional, completes to.
enum class ValueKind {
  None,     // free text (a number, KEY=VALUE): nothing offered
  File,     // any file or directory
  Dir,      // directories
  Pipeline, // *.toml files and directories
  Job,      // job ids and names of the state dir
  Node,     // node names of the pipeline (of the job, or of the FILE, given before)
  Command,  // command names (`help COMMAND`)
  Choice,   // one of `choices`
};

struct CompletionValue {
  ValueKind kind = ValueKind::None;
  std::vector<std::string> choices;
};

struct CompletionOption {
  std::vector<std::string> names; // "--state-dir", "-p"
  bool takes_value = false;
  CompletionValue value;
  std::string help;
};

struct CompletionPositional {
  std::string name; // "FILE"
  bool repeats = false;
  CompletionValue value;
};

// One command: "" for streamctl itself, "snapshot inspect" for a nested one.
struct CompletionCommand {
  std::string path;
  std::string help;
  std::vector<std::string> subcommands; // names, visible ones only
  std::vector<CompletionOption> options;
  std::vector<CompletionPositional> positionals;
};

// Every visible command of `app`, streamctl itself first; hidden commands and options (an
// empty group, as `worker`) are left out.
std::vector<CompletionCommand> completion_model(const CLI::App& app);

std::string bash_completion_script(const std::vector<CompletionCommand>& commands);
std::string zsh_completion_script(const std::vector<CompletionCommand>& commands);
std::string fish_completion_script(const std::vector<CompletionCommand>& commands);

} // namespace streamctl::cli
