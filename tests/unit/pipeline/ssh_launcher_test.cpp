#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sys/wait.h>

#include "pipeline/runtime/parallel_commands.hpp"
#include "pipeline/runtime/ssh_launcher.hpp"
#include "state/error.hpp"
#include "unit/temp_dir.hpp"

using namespace std::chrono_literals;
using namespace streamctl;
using namespace streamctl::runtime;

namespace {

SshLauncherConfig config_with(std::vector<std::string> hosts) {
  SshLauncherConfig c;
  for (auto& h : hosts)
    c.hosts.push_back({h, 0});
  c.self_executable = "/opt/streamctl/bin/streamctl";
  c.ssh_program = "/bin/true"; // what start() would run; these tests run nothing through it
  return c;
}

} // namespace

// ssh joins the words after HOST with spaces and the remote shell parses the result: what
// comes out of that parse must be the argument, byte for byte, whatever it holds.
TEST_CASE("shell_quote gives back every string through /bin/sh, and nothing in it runs",
          "[ssh_launcher]") {
  testing::TempDir dir;
  std::string canary = (dir.path / "ran").string();
  std::vector<std::string> nasty = {"",
                                    " ",
                                    "a b",
                                    "it's",
                                    "'",
                                    "''",
                                    "'\\''",
                                    "$HOME",
                                    "${HOME}",
                                    "`touch " + canary + "`",
                                    "$(touch " + canary + ")",
                                    "; touch " + canary,
                                    "&& touch " + canary,
                                    "| touch " + canary,
                                    "\\",
                                    "\\'",
                                    "a\nb",
                                    "\n",
                                    "\t",
                                    "*",
                                    "?",
                                    "[a]",
                                    "~",
                                    "~/x",
                                    "!",
                                    "!!",
                                    "#",
                                    "--x",
                                    "-",
                                    "\"",
                                    "\"'\"",
                                    "é✓",
                                    "x=y",
                                    "%s%n",
                                    "\r"};
  std::string every_byte;
  for (int c = 1; c < 256; ++c)
    every_byte += static_cast<char>(c);
  nasty.push_back(every_byte);
  for (const auto& word : nasty) {
    // printf's format is its own word: a '%' in the argument is printed as it is.
    std::string command = "printf '%s' " + shell_quote(word);
    auto outcome = run_in_parallel({{{"/bin/sh", "-c", command}, ""}}, 10s);
    INFO("word: " << word);
    CHECK(outcome[0].exited_with(0));
    CHECK(outcome[0].out == word);
  }
  CHECK_FALSE(std::filesystem::exists(canary));
}

TEST_CASE(
    "the ssh command: no tty, batch mode, the user's options, then the host and the quoted command",
    "[ssh_launcher]") {
  auto config = config_with({"ops@h2"});
  config.ssh_options = {"-F", "/etc/my ssh config", "-o", "ConnectTimeout=3"};
  config.connect_timeout = 7s;
  SshLauncher launcher(config);
  CHECK(launcher.name() == "ssh");
  auto argv = launcher.ssh_command("ops@h2", "exec x");
  std::vector<std::string> expected = {"/bin/true", "-T",
                                       "-o",        "BatchMode=yes",
                                       "-F",        "/etc/my ssh config",
                                       "-o",        "ConnectTimeout=3",
                                       "-o",        "ConnectTimeout=7",
                                       "ops@h2",    "--",
                                       "exec x"};
  CHECK(argv == expected);
  CHECK(launcher.binary_on("ops@h2") == "/opt/streamctl/bin/streamctl");
  CHECK(launcher.worker_command("ops@h2", {"--task", "3", "--file-name", "my jobs/it's.toml"}) ==
        "exec '/opt/streamctl/bin/streamctl' worker '--task' '3' '--file-name' 'my "
        "jobs/it'\\''s.toml' --bootstrap-fd 0");
  CHECK_THROWS_AS(launcher.binary_on("h9"), Error);
}

TEST_CASE("a binary under ~/ is the remote user's home", "[ssh_launcher]") {
  auto config = config_with({"h1"});
  config.binary = "~/bin/stream ctl";
  SshLauncher launcher(config);
  CHECK(launcher.worker_command("h1", {}) ==
        "exec \"$HOME\"/'bin/stream ctl' worker --bootstrap-fd 0");
}

TEST_CASE("a host that ssh would take for an option, or no host at all, is a usage error",
          "[ssh_launcher]") {
  for (std::string bad : {"-oProxyCommand=touch /tmp/x", "", "h1 h2"}) {
    INFO(bad);
    try {
      SshLauncher launcher(config_with({bad}));
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Usage);
      CHECK_THAT(e.what(), Catch::Contains("is not a host name for ssh"));
    }
  }
  CHECK_THROWS_WITH(SshLauncher(config_with({})), Catch::Contains("has no hosts"));
  auto no_ssh = config_with({"h1"});
  no_ssh.ssh_program = "no-such-ssh-client";
  CHECK_THROWS_WITH(SshLauncher(no_ssh), Catch::Contains("'no-such-ssh-client' is not in PATH"));
}

TEST_CASE("commands run in parallel, with their output, status and stdin file", "[ssh_launcher]") {
  testing::TempDir dir;
  std::string input = (dir.path / "in").string();
  { std::ofstream(input) << "from the file\n"; }
  auto start = std::chrono::steady_clock::now();
  auto outcomes = run_in_parallel(
      {{{"sh", "-c", "sleep 0.5; echo out; echo err1 >&2; echo err2 >&2; exit 3"}, ""},
       {{"sh", "-c", "sleep 0.5; cat"}, input},
       {{"sh", "-c", "sleep 0.5; cat"}, ""},
       {{"/no/such/program"}, ""},
       {{"sleep", "30"}, ""}},
      2s);
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(took < 10s);
  CHECK(took >= 2s);
  CHECK(outcomes[0].exited_with(3));
  CHECK(outcomes[0].out == "out\n");
  CHECK(outcomes[0].last_error_line() == "err2");
  CHECK(outcomes[1].exited_with(0));
  CHECK(outcomes[1].out == "from the file\n");
  CHECK(outcomes[2].exited_with(0));
  CHECK(outcomes[2].out.empty());
  CHECK_THAT(outcomes[3].start_error, Catch::Contains("/no/such/program"));
  CHECK(outcomes[4].timed_out);
  CHECK(WIFSIGNALED(outcomes[4].status));
}
