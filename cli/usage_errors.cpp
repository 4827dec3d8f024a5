#include "cli/usage_errors.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>

#include "pipeline/spec/did_you_mean.hpp"

namespace streamctl::cli {

namespace {

// The command the parse reached: the last one it found, at the deepest level.
const CLI::App& deepest_command(const CLI::App& root) {
  const CLI::App* app = &root;
  for (;;) {
    auto found = app->get_subcommands();
    if (found.empty()) return *app;
    app = found.back();
  }
}

// The commands a user may type under `parent`: not the hidden ones (an empty group).
std::vector<std::string> visible_commands(const CLI::App& parent) {
  std::vector<std::string> names;
  for (const CLI::App* sub :
       parent.get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); }))
    names.push_back(sub->get_name());
  return names;
}

// Every long and short option `app` accepts, its own and the global ones of its parents.
std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* a = &app; a != nullptr; a = a->get_parent()) {
    for (const CLI::Option* opt : a->get_options()) {
      for (const auto& l : opt->get_lnames())
        names.push_back("--" + l);
      for (const auto& s : opt->get_snames())
        names.push_back("-" + s);
    }
  }
  return names;
}

std::string with_hint(std::string message, const std::string& word,
                      const std::vector<std::string>& candidates) {
  std::string hint = pipeline::did_you_mean(word, candidates);
  return hint.empty() ? message : message + "; " + hint;
}

// An argument the parse could not place: an unknown option, an unknown command, or one
// argument too many.
std::string explain_leftover(const CLI::App& command, const std::string& arg) {
  if (arg.size() > 1 && arg[0] == '-') {
    std::string name = arg.substr(0, arg.find('='));
    // Compared without their dashes: "-z" is not one edit from "-p" in any useful sense.
    auto bare = [](const std::string& option) {
      return option.substr(option.find_first_not_of('-'));
    };
    std::string message = "unknown option '" + name + "'";
    if (name.find_first_not_of('-') == std::string::npos) return message;
    std::vector<std::string> options = option_names(command);
    std::vector<std::string> bare_options;
    for (const auto& option : options)
      bare_options.push_back(bare(option));
    auto closest = pipeline::closest_name(bare(name), bare_options);
    if (!closest) return message;
    auto at = std::find(bare_options.begin(), bare_options.end(), *closest) - bare_options.begin();
    return message + "; did you mean '" + options[static_cast<std::size_t>(at)] + "'?";
  }
  bool expects_command =
      command.get_require_subcommand_min() > 0 && command.get_subcommands().empty();
  if (expects_command) return unknown_command(command, arg);
  return "unexpected argument '" + arg + "'";
}

// "--parallelism: must be at least 1" (value_checks.hpp) reads "--parallelism must be ...";
// CLI11's own messages keep their colon.
std::string explain_validation(const std::string& what) {
  auto colon = what.find(": ");
  if (colon == std::string::npos) return what;
  std::string rest = what.substr(colon + 2);
  if (rest.rfind("must ", 0) == 0 || rest.rfind("is too ", 0) == 0)
    return what.substr(0, colon) + " " + rest;
  return what;
}

// "--set: 1 required TEXT missing" names the option before the colon.
std::string explain_missing_value(const CLI::App& command, const std::string& what) {
  std::string name = what.substr(0, what.find(':'));
  for (const CLI::App* a = &command; a != nullptr; a = a->get_parent())
    if (const CLI::Option* opt = a->get_option_no_throw(name)) {
      std::string type = opt->get_type_name();
      return "option '" + name + "' needs a value" + (type.empty() ? "" : " (" + type + ")");
    }
  return what;
}

} // namespace

std::string UsageError::text() const {
  return command + ": error: " + message;
}

std::string command_path(const CLI::App& app) {
  std::string path = app.get_name();
  for (const CLI::App* a = app.get_parent(); a != nullptr; a = a->get_parent())
    path = a->get_name() + " " + path;
  return path;
}

std::string unknown_command(const CLI::App& parent, const std::string& word) {
  return with_hint("unknown command '" + word + "'", word, visible_commands(parent));
}

UsageError explain_parse_error(const CLI::App& root, const CLI::ParseError& e) {
  const CLI::App& command = deepest_command(root);
  UsageError out{command_path(command), e.what()};
  // By type: get_name() of some CLI11 errors is the name of the app that threw them.
  const bool extras = dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr;
  const bool required = dynamic_cast<const CLI::RequiredError*>(&e) != nullptr;
  if (extras || required) {
    // A typo comes first: it may be why something required is missing ("rnu x.toml"). Of
    // several, an unknown option: CLI11 keeps them out of the order they were given in.
    auto leftovers = root.remaining(true);
    auto option = std::find_if(leftovers.begin(), leftovers.end(), [](const std::string& arg) {
      return arg.size() > 1 && arg[0] == '-';
    });
    if (option != leftovers.end()) {
      out.message = explain_leftover(command, *option);
    } else if (!leftovers.empty()) {
      out.message = explain_leftover(command, leftovers.front());
    } else if (command.get_require_subcommand_min() > 0 && command.get_subcommands().empty()) {
      // "see 'streamctl help snapshot'"
      std::string below = out.command.substr(root.get_name().size());
      out.message = "no command given; see '" + root.get_name() + " help" + below + "'";
    } else if (required) {
      // "FILE is required", "--job-dir is required"
      std::string what = e.what();
      auto at = what.rfind(" is required");
      if (at != std::string::npos) out.message = "missing " + what.substr(0, at);
    }
  } else if (dynamic_cast<const CLI::ValidationError*>(&e) != nullptr) {
    out.message = explain_validation(e.what());
    // A bad value of a global option is streamctl's, wherever it was given.
    std::string what = e.what();
    std::string name = what.substr(0, what.find(':'));
    for (const CLI::App* a = &command; a != nullptr; a = a->get_parent())
      if (a->get_option_no_throw(name) != nullptr) {
        out.command = command_path(*a);
        break;
      }
  } else if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {
    out.message = explain_missing_value(command, e.what());
  }
  return out;
}

} // namespace streamctl::cli
