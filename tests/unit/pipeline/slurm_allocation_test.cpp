// The allocation `run` makes under [cluster] launcher = "slurm" outside one (issue 8): salloc's
// line read, its failures told in its own words, and the allocation released (scancel, salloc
// reaped). salloc and scancel are stand-in scripts here; tests/hosts/slurm_allocate.sh runs the
// real ones.
#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

#include "pipeline/runtime/slurm_allocation.hpp"
#include "state/error.hpp"
#include "unit/temp_dir.hpp"

using namespace streamctl;
using namespace streamctl::runtime;

namespace {

void write_script(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << "#!/bin/sh\n" << text;
  ::chmod(path.c_str(), 0755);
}

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// salloc: records its options, then runs its command as the real one does once granted.
struct FakeSlurm {
  testing::TempDir dir;
  SlurmAllocationRequest request;
  std::vector<std::string> notes;

  explicit FakeSlurm(const std::string& salloc_body) {
    write_script(dir.path / "salloc",
                 "echo \"$@\" >'" + (dir.path / "salloc.args").string() + "'\n" + salloc_body);
    write_script(dir.path / "scancel",
                 "echo \"$@\" >>'" + (dir.path / "scancel.log").string() + "'\n");
    request.salloc_program = (dir.path / "salloc").string();
    request.scancel_program = (dir.path / "scancel").string();
    request.note = [this](const std::string& s) { notes.push_back(s); };
  }
};

const char* kGranting = R"sh(echo "salloc: Granted job allocation 5" >&2
while [ "$1" != -- ]; do shift; done; shift
SLURM_JOB_ID=5 SLURM_JOB_NODELIST='h[1-2]' SLURM_JOB_CPUS_PER_NODE='2(x2)' "$@"
echo "salloc: Relinquishing job allocation 5" >&2
)sh";

} // namespace

TEST_CASE("salloc's line gives the job id, node list and CPUs per node", "[slurm_allocation]") {
  auto line = parse_allocation_line("42 h[1-3],gpu7 2(x3),4\n");
  REQUIRE(line);
  CHECK(line->job_id == "42");
  CHECK(line->nodelist == "h[1-3],gpu7");
  CHECK(line->cpus_per_node == "2(x3),4");
  line = parse_allocation_line("7 node1 ");
  REQUIRE(line);
  CHECK(line->nodelist == "node1");
  CHECK(line->cpus_per_node.empty());

  CHECK_THAT(parse_allocation_line("").error(), Catch::Contains("not 'JOB_ID NODELIST"));
  CHECK_THAT(parse_allocation_line("  h[1-2]").error(), Catch::Contains("not 'JOB_ID NODELIST"));
  CHECK_THAT(parse_allocation_line("x12 h1").error(),
             Catch::Contains("whose job id 'x12' is not a number"));
  CHECK_FALSE(parse_allocation_line("1 h1 2 extra"));
}

TEST_CASE("salloc asks for the nodes, or the tasks, then the user's options",
          "[slurm_allocation]") {
  SlurmAllocationRequest r;
  r.ntasks = 7;
  r.options = {"--partition=debug"};
  auto argv = salloc_command(r);
  REQUIRE(argv.size() == 7);
  CHECK(argv[0] == "salloc");
  CHECK(argv[1] == "--ntasks=7");
  CHECK(argv[2] == "--partition=debug");
  CHECK(argv[3] == "--");
  CHECK(argv[4] == "/bin/sh");
  CHECK_THAT(argv[6], Catch::Contains("exec cat >/dev/null"));
  r.nodes = 3;
  CHECK(salloc_command(r)[1] == "--nodes=3");
}

TEST_CASE("an allocation is held until released, then cancelled and salloc reaped",
          "[slurm_allocation]") {
  FakeSlurm slurm(kGranting);
  slurm.request.ntasks = 4;
  slurm.request.options = {"--partition=x"};
  pid_t pid = -1;
  {
    SlurmAllocation allocation(slurm.request);
    CHECK(allocation.allocation().job_id == "5");
    CHECK(allocation.allocation().nodelist == "h[1-2]");
    CHECK(allocation.allocation().cpus_per_node == "2(x2)");
    pid = allocation.salloc_pid();
    CHECK(::kill(pid, 0) == 0); // held: salloc waits for its command
    CHECK_THAT(read(slurm.dir.path / "salloc.args"),
               Catch::StartsWith("--ntasks=4 --partition=x -- /bin/sh -c"));
    REQUIRE(!slurm.notes.empty());
    CHECK_THAT(slurm.notes[0], Catch::StartsWith("slurm: allocated job 5 on nodes h[1-2]"));
  }
  CHECK(::kill(pid, 0) != 0); // reaped
  CHECK(read(slurm.dir.path / "scancel.log") == "5\n");
  CHECK_THAT(slurm.notes.back(), Catch::Contains("slurm: released job 5"));
  CHECK_THAT(slurm.notes.back(), Catch::Contains("Relinquishing job allocation 5"));
}

TEST_CASE("salloc's failure is told in its own words", "[slurm_allocation]") {
  FakeSlurm slurm(
      "echo 'salloc: error: invalid partition specified: nope' >&2\n"
      "echo 'salloc: error: Job submit/allocate failed: Invalid partition name specified' >&2\n"
      "exit 1\n");
  slurm.request.options = {"--partition=nope"};
  try {
    SlurmAllocation allocation(slurm.request);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Usage);
    CHECK_THAT(e.what(), Catch::Contains("cannot get a Slurm allocation with `"));
    CHECK_THAT(e.what(),
               Catch::Contains("--ntasks=1 --partition=nope`: salloc ended without an allocation"));
    CHECK_THAT(e.what(), Catch::Contains("invalid partition specified: nope; salloc: error: Job"));
  }
  CHECK_FALSE(std::filesystem::exists(slurm.dir.path / "scancel.log"));
}

TEST_CASE("a request not granted in time is withdrawn", "[slurm_allocation]") {
  FakeSlurm slurm("echo 'salloc: Pending job allocation 9' >&2\n"
                  "echo 'salloc: job 9 queued and waiting for resources' >&2\n"
                  "trap 'echo \"salloc: Job allocation 9 has been revoked.\" >&2; exit 1' TERM\n"
                  "while :; do sleep 0.05; done\n");
  slurm.request.timeout = std::chrono::seconds(1);
  try {
    SlurmAllocation allocation(slurm.request);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("salloc was granted no allocation within 1 s"));
    CHECK_THAT(e.what(), Catch::Contains("queued and waiting for resources"));
  }
  CHECK(read(slurm.dir.path / "scancel.log") == "9\n");
}

TEST_CASE("no salloc: how to get it", "[slurm_allocation]") {
  SlurmAllocationRequest r;
  r.salloc_program = "/nonexistent/salloc";
  try {
    SlurmAllocation allocation(r);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Usage);
    CHECK_THAT(e.what(), Catch::Contains("'/nonexistent/salloc', which cannot run: No such file"));
    CHECK_THAT(e.what(), Catch::Contains("apt install slurm-client"));
  }
}
