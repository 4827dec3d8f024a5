// `streamctl help [COMMAND...]`: the --help of a command, as git and go have it.

#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/context.hpp"
#include "cli/error_output.hpp"
#include "cli/usage_errors.hpp"

namespace streamctl::cli {

void add_help_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("help", "Print the help of a command (of streamctl without one)");
  auto words = std::make_shared<std::vector<std::string>>();
  cmd->add_option("COMMAND", *words, "a command, as 'run' or 'snapshot inspect'")->type_name("");
  cmd->callback([&app, &ctx, cmd, words] {
    const CLI::App* target = &app;
    for (const auto& word : *words) {
      const CLI::App* next = nullptr;
      for (const CLI::App* sub : target->get_subcommands([](const CLI::App*) { return true; }))
        if (sub->get_name() == word) next = sub;
      if (next == nullptr) {
        print_error(json_requested(app, ctx), command_path(*cmd), unknown_command(*target, word));
        ctx.exit_code = 2; // usage (SPEC §2)
        return;
      }
      target = next;
    }
    // Not target->help(): the app's help follows the command parsed, which is `help` itself.
    std::cout << target->get_formatter()->make_help(target, command_path(*target),
                                                    CLI::AppFormatMode::Normal)
              << std::flush;
    ctx.exit_code = 0;
  });
}

} // namespace streamctl::cli
