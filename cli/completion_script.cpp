#include "cli/completion_script.hpp"

#include <CLI/CLI.hpp>
#include <sstream>

namespace streamctl::cli {

namespace {

// The type name as the command gave it ("FILE", "text|json"), without the validator
// descriptions CLI11 appends after a ':'.
std::string plain_type_name(const CLI::Option& opt) {
  std::string name = opt.get_type_name();
  return name.substr(0, name.find(':'));
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, sep);)
    if (!part.empty()) parts.push_back(part);
  return parts;
}

// What a value completes to, from the names the commands already show in --help: an option's
// type name, a positional's name.
CompletionValue value_of(const std::string& type_name, bool positional) {
  if (type_name.find('|') != std::string::npos) return {ValueKind::Choice, split(type_name, '|')};
  if (type_name == "DIR") return {ValueKind::Dir, {}};
  if (type_name == "PATH") return {ValueKind::File, {}};
  if (type_name == "FILE") return {positional ? ValueKind::Pipeline : ValueKind::File, {}};
  if (type_name == "JOB") return {ValueKind::Job, {}};
  if (type_name == "NODE") return {ValueKind::Node, {}};
  if (type_name == "COMMAND") return {ValueKind::Command, {}};
  return {};
}

void walk(const CLI::App& app, const std::string& path, std::vector<CompletionCommand>& out) {
  CompletionCommand cmd;
  cmd.path = path;
  cmd.help = app.get_description();
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_group().empty()) continue; // hidden
    if (opt->get_positional()) {
      std::string name = opt->get_name(true);
      cmd.positionals.push_back({name, opt->get_expected_max() > 1, value_of(name, true)});
      continue;
    }
    CompletionOption o;
    for (const auto& s : opt->get_snames())
      o.names.push_back("-" + s);
    for (const auto& l : opt->get_lnames())
      o.names.push_back("--" + l);
    if (o.names.empty()) continue;
    o.takes_value = opt->get_expected_max() != 0; // flags expect no value, whatever their type
    if (o.takes_value) o.value = value_of(plain_type_name(*opt), false);
    o.help = opt->get_description();
    cmd.options.push_back(std::move(o));
  }
  std::vector<const CLI::App*> subs = app.get_subcommands([](const CLI::App*) { return true; });
  for (const CLI::App* sub : subs)
    if (!sub->get_group().empty()) cmd.subcommands.push_back(sub->get_name());
  out.push_back(std::move(cmd));
  for (const CLI::App* sub : subs)
    if (!sub->get_group().empty())
      walk(*sub, path.empty() ? sub->get_name() : path + " " + sub->get_name(), out);
}

std::string join(const std::vector<std::string>& words, const char* sep = " ") {
  std::string out;
  for (const auto& w : words)
    out += (out.empty() ? "" : sep) + w;
  return out;
}

// Single-quoted for bash, zsh and fish alike (no ' inside, and fish takes '\'' too).
std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string kind_word(const CompletionValue& v) {
  switch (v.kind) {
  case ValueKind::None: return "none";
  case ValueKind::File: return "file";
  case ValueKind::Dir: return "dir";
  case ValueKind::Pipeline: return "pipeline";
  case ValueKind::Job: return "job";
  case ValueKind::Node: return "node";
  case ValueKind::Command: return "command";
  case ValueKind::Choice: return "choice " + join(v.choices);
  }
  return "none";
}

// The key of a command in the bash tables: "streamctl", "streamctl snapshot inspect" (zsh's
// emulation takes no empty key).
std::string bash_key(const std::string& path) {
  return path.empty() ? "streamctl" : "streamctl " + path;
}

// The bash function, named `function_name`, and the tables it reads. Plain bash 4 (associative
// arrays), without the bash-completion package.
std::string bash_body(const std::vector<CompletionCommand>& commands,
                      const std::string& function_name) {
  std::ostringstream s;
  s << "# streamctl completion, written by `streamctl completion bash` from the same command\n"
       "# definitions as --help. Job ids and node names come from `streamctl completion "
       "--list-*`.\n";
  s << "declare -gA _streamctl_subs=(";
  for (const auto& c : commands)
    if (!c.subcommands.empty())
      s << " [" << quoted(bash_key(c.path)) << "]=" << quoted(join(c.subcommands));
  s << " )\ndeclare -gA _streamctl_opts=(";
  for (const auto& c : commands) {
    std::vector<std::string> names;
    for (const auto& o : c.options)
      names.insert(names.end(), o.names.begin(), o.names.end());
    s << " [" << quoted(bash_key(c.path)) << "]=" << quoted(join(names));
  }
  s << " )\n# Options that take a value: COMMAND|OPTION -> what the value completes to.\n"
       "declare -gA _streamctl_vals=(";
  for (const auto& c : commands)
    for (const auto& o : c.options)
      if (o.takes_value)
        for (const auto& n : o.names)
          s << " [" << quoted(bash_key(c.path) + "|" + n) << "]=" << quoted(kind_word(o.value));
  s << " )\n# Positionals in order; '...' after the last when it repeats.\ndeclare -gA "
       "_streamctl_pos=(";
  for (const auto& c : commands) {
    std::vector<std::string> kinds;
    for (const auto& p : c.positionals)
      kinds.push_back(kind_word(p.value) + (p.repeats ? "..." : ""));
    s << " [" << quoted(bash_key(c.path)) << "]=" << quoted(join(kinds));
  }
  s << " )\n";
  s << R"BASH(
# _streamctl_kind CMD OPTION: prints what OPTION's value completes to; fails for a flag. The
# options of a command's parents are accepted after it too (global options).
_streamctl_kind() {
  local cmd=$1
  while :; do
    if [[ -n ${_streamctl_vals["$cmd|$2"]+set} ]]; then
      printf '%s\n' "${_streamctl_vals["$cmd|$2"]}"
      return 0
    fi
    [[ $cmd == *" "* ]] || return 1
    cmd=${cmd% *}
  done
}

# _streamctl_values KIND...: COMPREPLY for the word being completed.
_streamctl_values() {
  local kind=$1 line
  shift
  case $kind in
    file) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")) ;;
    dir) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "$cur")) ;;
    pipeline)
      compopt -o filenames 2>/dev/null
      COMPREPLY=($(compgen -d -- "$cur") $(compgen -f -X '!*.toml' -- "$cur")) ;;
    job) COMPREPLY=($(compgen -W "$("$bin" "${global[@]}" completion --list-jobs 2>/dev/null)" -- "$cur")) ;;
    node)
      # The job or the pipeline file named before the node says which nodes there are.
      local i k=0 words=""
      for ((i = 0; i < ${#args[@]}; i++)); do
        k=${kinds[i]%...}
        if [[ $k == job ]]; then
          words=$("$bin" "${global[@]}" completion --list-job-nodes "${args[i]}" 2>/dev/null)
        elif [[ $k == pipeline ]]; then
          words=$("$bin" "${global[@]}" completion --list-nodes "${args[i]}" 2>/dev/null)
        fi
      done
      COMPREPLY=($(compgen -W "$words" -- "$cur")) ;;
    command) COMPREPLY=($(compgen -W "${_streamctl_subs[streamctl]}" -- "$cur")) ;;
    choice) COMPREPLY=($(compgen -W "$*" -- "$cur")) ;;
    *) COMPREPLY=() ;;
  esac
}

)BASH";
  s << function_name << "() {\n";
  s << R"BASH(  local bin=${COMP_WORDS[0]} cur=${COMP_WORDS[COMP_CWORD]} cmd=streamctl w i kind
  local -a args=() global=() kinds=()
  COMPREPLY=()
  # Walk the words before the cursor: commands, options (and their values), positionals.
  for ((i = 1; i < COMP_CWORD; i++)); do
    w=${COMP_WORDS[i]}
    if [[ $w == -?* ]]; then
      [[ $w == *=* ]] && continue
      if _streamctl_kind "$cmd" "$w" >/dev/null; then
        ((i++))
        [[ ${COMP_WORDS[i]} == "=" ]] && ((i++))
        [[ $w == --state-dir ]] && global=(--state-dir "${COMP_WORDS[i]}")
      fi
      continue
    fi
    if ((${#args[@]} == 0)) && [[ " ${_streamctl_subs["$cmd"]} " == *" $w "* ]]; then
      cmd="$cmd $w"
      continue
    fi
    args+=("$w")
  done
  kinds=(${_streamctl_pos["$cmd"]})

  # The value of an option: "--opt VALUE", or "--opt=VALUE" (bash splits at '=').
  local prev=${COMP_WORDS[COMP_CWORD-1]}
  if [[ $cur == "=" ]]; then
    cur=""
  elif [[ $prev == "=" ]] && ((COMP_CWORD >= 2)); then
    prev=${COMP_WORDS[COMP_CWORD-2]}
  fi
  if [[ $prev == -?* ]] && kind=$(_streamctl_kind "$cmd" "$prev"); then
    _streamctl_values $kind
    return 0
  fi

  if [[ $cur == -* ]]; then
    local c=$cmd opts=""
    while :; do
      opts+=" ${_streamctl_opts["$c"]}"
      [[ $c == *" "* ]] || break
      c=${c% *}
    done
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    return 0
  fi

  if ((${#args[@]} == 0)) && [[ -n ${_streamctl_subs["$cmd"]} ]]; then
    COMPREPLY=($(compgen -W "${_streamctl_subs["$cmd"]}" -- "$cur"))
    return 0
  fi
  local n=${#args[@]} last=$((${#kinds[@]} - 1))
  if ((n < ${#kinds[@]})); then
    _streamctl_values "${kinds[n]%...}"
  elif ((last >= 0)) && [[ ${kinds[last]} == *... ]]; then
    _streamctl_values "${kinds[last]%...}"
  fi
  return 0
}
)BASH";
  return s.str();
}

} // namespace

std::vector<CompletionCommand> completion_model(const CLI::App& app) {
  std::vector<CompletionCommand> commands;
  walk(app, "", commands);
  return commands;
}

std::string bash_completion_script(const std::vector<CompletionCommand>& commands) {
  return bash_body(commands, "_streamctl") + "complete -F _streamctl streamctl\n";
}

// zsh runs the bash function through its bash emulation (bashcompinit), so that both shells
// complete from one walker; installed as _streamctl, this file's body runs on the first <Tab>.
std::string zsh_completion_script(const std::vector<CompletionCommand>& commands) {
  return "#compdef streamctl\n"
         "autoload -U +X bashcompinit && bashcompinit\n" +
         bash_body(commands, "_streamctl_bash") +
         "complete -F _streamctl_bash streamctl\n"
         "# The first <Tab>: complete now; later ones go straight to _streamctl_bash.\n"
         "[[ -n ${words-} ]] && _bash_complete -F _streamctl_bash \"$@\"\n";
}

std::string fish_completion_script(const std::vector<CompletionCommand>& commands) {
  std::ostringstream s;
  s << "# streamctl completion, written by `streamctl completion fish` from the same command\n"
       "# definitions as --help.\n"
       "complete -c streamctl -f\n";
  auto condition = [](const std::string& path) {
    if (path.empty()) return std::string("__fish_use_subcommand");
    auto words = split(path, ' ');
    std::string cond;
    for (const auto& w : words)
      cond += (cond.empty() ? "" : "; and ") + std::string("__fish_seen_subcommand_from ") + w;
    return cond;
  };
  auto fish_values = [](const CompletionValue& v, const std::string& path) -> std::string {
    switch (v.kind) {
    case ValueKind::File: return " -r -F";
    case ValueKind::Dir: return " -r -x -a '(__fish_complete_directories)'";
    case ValueKind::Pipeline: return " -r -x -a '(__fish_complete_suffix .toml)'";
    case ValueKind::Job: return " -r -x -a '(streamctl completion --list-jobs 2>/dev/null)'";
    case ValueKind::Node:
      // tap JOB NODE: the job is the word after the command.
      return " -r -x -a '(streamctl completion --list-job-nodes (commandline -opc)[" +
             std::to_string(split(path, ' ').size() + 2) + "] 2>/dev/null)'";
    case ValueKind::Command: return " -r -x -a " + quoted("");
    case ValueKind::Choice: return " -r -x -a " + quoted(join(v.choices));
    case ValueKind::None: return " -r -x";
    }
    return "";
  };
  for (const auto& c : commands) {
    // Options of a command apply from it on; those of streamctl itself everywhere.
    std::string opt_cond = c.path.empty() ? "" : " -n " + quoted(condition(c.path));
    for (const auto& sub : c.subcommands) {
      const CompletionCommand* target = nullptr;
      for (const auto& t : commands)
        if (t.path == (c.path.empty() ? sub : c.path + " " + sub)) target = &t;
      std::string cond =
          c.path.empty()
              ? "__fish_use_subcommand"
              : condition(c.path) + "; and not __fish_seen_subcommand_from " + join(c.subcommands);
      s << "complete -c streamctl -n " << quoted(cond) << " -a " << sub;
      if (target) s << " -d " << quoted(target->help.substr(0, target->help.find('\n')));
      s << "\n";
    }
    for (const auto& o : c.options) {
      s << "complete -c streamctl" << opt_cond;
      for (const auto& n : o.names)
        s << (n.rfind("--", 0) == 0 ? " -l " + n.substr(2) : " -s " + n.substr(1));
      if (o.takes_value) s << fish_values(o.value, c.path);
      s << " -d " << quoted(o.help.substr(0, o.help.find('\n'))) << "\n";
    }
    if (!c.path.empty() && !c.positionals.empty()) {
      const auto& first = c.positionals.front();
      std::string values = fish_values(first.value, c.path);
      if (first.value.kind == ValueKind::Command)
        values = " -r -x -a " + quoted(join(commands.front().subcommands));
      if (first.value.kind != ValueKind::None)
        s << "complete -c streamctl -n " << quoted(condition(c.path)) << values << "\n";
      if (c.positionals.size() > 1 && c.positionals[1].value.kind == ValueKind::Node)
        s << "complete -c streamctl -n "
          << quoted(condition(c.path) + "; and test (count (commandline -opc)) -ge 3")
          << fish_values(c.positionals[1].value, c.path) << "\n";
    }
  }
  return s.str();
}

} // namespace streamctl::cli
