#include "cli/help_formatter.hpp"

#include <CLI/CLI.hpp>

namespace streamctl::cli {

namespace {

class HelpFormatter final : public CLI::Formatter {
public:
  std::string make_footer(const CLI::App* app) const override {
    std::string globals;
    const CLI::App* root = app;
    while (root->get_parent() != nullptr)
      root = root->get_parent();
    if (root != app) {
      auto options = root->get_options([root](const CLI::Option* opt) {
        return opt->nonpositional() && opt != root->get_help_ptr() &&
               opt != root->get_help_all_ptr() && opt->get_name() != "--version";
      });
      // make_help already ends the groups before with a blank line.
      if (!options.empty()) globals = make_group("GLOBAL OPTIONS", false, options).substr(1);
    }
    std::string footer = CLI::Formatter::make_footer(app);
    if (globals.empty()) return footer;
    return footer.empty() ? globals : globals + "\n" + footer;
  }
};

} // namespace

std::shared_ptr<CLI::Formatter> make_help_formatter() {
  return std::make_shared<HelpFormatter>();
}

} // namespace streamctl::cli
