#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <sys/wait.h>

#include "pipeline/runtime/slurm_launcher.hpp"
#include "pipeline/runtime/worker_bootstrap.hpp"
#include "state/error.hpp"
#include "transport/protocol.hpp"
#include "unit/temp_dir.hpp"

using namespace streamctl;
using namespace streamctl::runtime;

namespace {

void write_script(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << "#!/bin/sh\n" << text;
  ::chmod(path.c_str(), 0755);
}

// Stand-ins for Slurm's clients (the real ones need daemons: tests/hosts/slurm_*.sh use
// those): scontrol prints two nodes; srun runs the command after "--" here, with the
// variable the real step has, and fails on node h2 as srun does for a node that is down.
struct FakeSlurm {
  testing::TempDir dir;
  SlurmLauncherConfig config;

  FakeSlurm() {
    write_script(dir.path / "scontrol", "[ \"$1 $2 $3\" = 'show hostnames h[1-2]' ] || exit 9\n"
                                        "echo h1; echo h2\n");
    write_script(dir.path / "srun",
                 "node=\nwhile [ \"$1\" != -- ]; do case $1 in --nodelist=*) node=${1#--nodelist=};; "
                 "esac; shift; done; shift\n"
                 "[ \"$node\" = h2 ] && { echo 'srun: error: Unable to create step: Node down' >&2; "
                 "exit 1; }\n"
                 "SLURM_LAUNCH_NODE_IPADDR=10.9.8.7 exec \"$@\"\n");
    write_script(dir.path / "streamctl", "echo version=" + std::string(streamctl_version()) +
                                             "; echo protocol=" +
                                             std::to_string(transport::kProtocolVersion) +
                                             "; echo cores=7; echo coordinator_address=1.1.1.1\n");
    config.job_id = "42";
    config.nodelist = "h[1-2]";
    config.binary = (dir.path / "streamctl").string();
    config.self_executable = config.binary;
    config.srun_program = (dir.path / "srun").string();
    config.scontrol_program = (dir.path / "scontrol").string();
  }
};

} // namespace

TEST_CASE("SLURM_JOB_CPUS_PER_NODE expands to one count per node", "[slurm_launcher]") {
  CHECK(*expand_cpus_per_node("2(x3)", 3) == std::vector<int>{2, 2, 2});
  CHECK(*expand_cpus_per_node("4,2(x2),8", 4) == std::vector<int>{4, 2, 2, 8});
  CHECK(*expand_cpus_per_node("16", 1) == std::vector<int>{16});
  CHECK_FALSE(expand_cpus_per_node("2(x3)", 2));
  CHECK_FALSE(expand_cpus_per_node("two", 1));
  CHECK_FALSE(expand_cpus_per_node("2(3)", 3));
  CHECK_FALSE(expand_cpus_per_node("0", 1));
  CHECK_FALSE(expand_cpus_per_node("", 1));
}

TEST_CASE("the allocation comes from the environment, when there is one", "[slurm_launcher]") {
  const char* saved = std::getenv("SLURM_JOB_ID");
  std::string restore = saved ? saved : "";
  ::unsetenv("SLURM_JOB_ID");
  CHECK_FALSE(slurm_config_from_environment());
  ::setenv("SLURM_JOB_ID", "77", 1);
  ::setenv("SLURM_JOB_NODELIST", "n[1-2]", 1);
  auto config = slurm_config_from_environment();
  REQUIRE(config);
  CHECK(config->job_id == "77");
  CHECK(config->nodelist == "n[1-2]");
  ::unsetenv("SLURM_JOB_NODELIST");
  if (saved) ::setenv("SLURM_JOB_ID", restore.c_str(), 1);
  else ::unsetenv("SLURM_JOB_ID");
}

TEST_CASE("a worker is one srun step on its node, its words passed as they are",
          "[slurm_launcher]") {
  FakeSlurm slurm;
  SlurmLauncher launcher(slurm.config);
  auto argv = launcher.worker_command("h2", {"--task", "3", "it's a 'word'"});
  std::vector<std::string> expected = {slurm.config.srun_program,
                                       "--jobid=42",
                                       "--nodes=1",
                                       "--ntasks=1",
                                       "--nodelist=h2",
                                       "--overlap",
                                       "--quiet",
                                       "--mpi=none",
                                       "--input=0",
                                       "--",
                                       slurm.config.binary,
                                       "worker",
                                       "--task",
                                       "3",
                                       "it's a 'word'",
                                       "--bootstrap-fd",
                                       "0"};
  CHECK(argv == expected);
}

TEST_CASE("prepare probes every node of the allocation and names the ones that fail",
          "[slurm_launcher]") {
  FakeSlurm slurm;
  slurm.config.cpus_per_node = "3(x2)";
  SlurmLauncher launcher(slurm.config);
  HostCheck check = launcher.check_hosts();
  REQUIRE(check.usable.size() == 1);
  CHECK(check.usable[0].name == "h1");
  CHECK(check.usable[0].slots == 3); // the allocation's CPUs, not the probe's cores
  // The address srun was reached on, never the probe's (an SSH_CONNECTION srun passed on).
  CHECK(check.usable[0].coordinator_address == "10.9.8.7");
  REQUIRE(check.problems.size() == 1);
  CHECK_THAT(check.problems[0], Catch::Contains("node 'h2'") && Catch::Contains("Node down"));
  try {
    launcher.prepare();
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Usage);
    CHECK_THAT(e.what(), Catch::Contains("allocation 42") && Catch::Contains("node 'h2'"));
  }
}

TEST_CASE("without SLURM_JOB_CPUS_PER_NODE a node's slots are its cores", "[slurm_launcher]") {
  FakeSlurm slurm;
  SlurmLauncher launcher(slurm.config);
  HostCheck check = launcher.check_hosts();
  REQUIRE(check.usable.size() == 1);
  CHECK(check.usable[0].slots == 7);
}

TEST_CASE("a worker's bootstrap reaches it through srun's stdin", "[slurm_launcher]") {
  FakeSlurm slurm;
  std::string got = (slurm.dir.path / "got").string();
  // The "worker" copies its stdin until EOF, which comes when the coordinator closes it.
  write_script(slurm.dir.path / "streamctl", "cat > '" + got + "'\n");
  SlurmLauncher launcher(slurm.config);
  WorkerLaunch launch;
  launch.host = "h1";
  launch.label = "in[0]";
  launch.bootstrap = "the job and its keys";
  auto child = launcher.start(launch);
  child->close_bootstrap();
  int status = 0;
  REQUIRE(::waitpid(child->pid(), &status, 0) == child->pid());
  child->reaped(status);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  std::ifstream in(got);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK_THAT(text, Catch::Contains("the job and its keys"));
}
