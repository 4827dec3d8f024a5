// The stdout sink: straight to fd 1 without checkpoints; with them (a checkpoint directory),
// exactly-once by two-phase commit (operator.hpp "Exactly-once output"): lines reach stdout only
// when the checkpoint covering them completes, or when the job ends, and a restore publishes
// what the restored checkpoint prepared, once, and drops what no checkpoint covers.
//
// Each test points fd 1 at a file for a while (StdoutCapture) to read what was published.

#include <catch2/catch.hpp>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <fstream>
#include <iostream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.hpp"
#include "unit/temp_dir.hpp"

using streamctl::Error;
using streamctl::ErrorKind;
using streamctl::operators::OperatorContext;
using streamctl::operators::Sink;
using streamctl::testing::Harness;
using streamctl::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const char* kPipeline = "name = \"t\"\n[sources.in]\ntype = \"stdin\"\n[sinks.out]\ntype = \"stdout\"\n"
                        "inputs = [\"in\"]\nformat = \"json\"\n";

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Points fd 1 at `file` until destroyed (or at `fd`, for the pipe tests).
class StdoutCapture {
public:
  explicit StdoutCapture(const fs::path& file) : path_(file) {
    int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    REQUIRE(fd >= 0);
    redirect(fd);
  }
  explicit StdoutCapture(int fd) { redirect(fd); }
  ~StdoutCapture() {
    std::cout.flush();
    std::fflush(stdout);
    ::dup2(saved_, STDOUT_FILENO);
    ::close(saved_);
  }
  StdoutCapture(const StdoutCapture&) = delete;
  StdoutCapture& operator=(const StdoutCapture&) = delete;

  std::string text() const { return read(path_); }

private:
  void redirect(int fd) {
    std::cout.flush();
    std::fflush(stdout);
    saved_ = ::dup(STDOUT_FILENO);
    REQUIRE(saved_ >= 0);
    REQUIRE(::dup2(fd, STDOUT_FILENO) == STDOUT_FILENO);
    ::close(fd);
  }

  fs::path path_;
  int saved_ = -1;
};

std::unique_ptr<Sink> open_sink(Harness& h, const fs::path& checkpoint_dir) {
  auto sink = h.registry().make_sink(h.job().spec, h.node("out"), h.names());
  OperatorContext ctx = h.context("out", 0, 1);
  ctx.checkpoint_dir = checkpoint_dir;
  sink->open(ctx);
  return sink;
}

void write(Harness& h, Sink& sink, const std::vector<std::string>& lines) {
  sink.write(h.parse(lines, 0, lines.size()));
}

std::string lines(const std::vector<std::string>& records) {
  std::string out;
  for (const auto& r : records) out += r + "\n";
  return out;
}

// Names in `dir`, sorted.
std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

bool is_pending(const std::string& name) {
  return name.rfind("stdout-out-", 0) == 0 && name.size() > 8 && name.substr(name.size() - 8) == ".pending";
}

streamctl::Result<void> restore(Sink& sink, const std::vector<std::string>& states) {
  std::vector<std::string_view> views(states.begin(), states.end());
  return sink.restore_pending(views);
}

// Ignores SIGPIPE while it lives, as streamctl's main does, so that a write to a pipe without a
// reader fails with EPIPE.
struct IgnoreSigpipe {
  IgnoreSigpipe() { old = std::signal(SIGPIPE, SIG_IGN); }
  ~IgnoreSigpipe() { std::signal(SIGPIPE, old); }
  void (*old)(int);
};

} // namespace

// A crash: the sink goes without its destructor, which would tidy up. Its memory is left
// for the test's life; LeakSanitizer is told so.
void abandon(std::unique_ptr<Sink> sink) {
  [[maybe_unused]] Sink* left = sink.release();
#if defined(__SANITIZE_ADDRESS__)
  __lsan_ignore_object(left);
#endif
}

TEST_CASE("without a checkpoint directory lines go straight to stdout", "[stdout_sink]") {
  TempDir out;
  Harness h(kPipeline);
  StdoutCapture capture(out.path / "stdout");
  auto sink = open_sink(h, {});
  write(h, *sink, {R"({"a":1})", R"({"a":2})"});
  CHECK(capture.text() == lines({R"({"a":1})", R"({"a":2})"}));
  std::string state;
  sink->pre_commit(1, state);
  CHECK(state.empty()); // nothing pending
  sink->commit(1);
  write(h, *sink, {R"({"a":3})"});
  CHECK(capture.text() == lines({R"({"a":1})", R"({"a":2})", R"({"a":3})"}));
  sink->finish();
  CHECK(capture.text() == lines({R"({"a":1})", R"({"a":2})", R"({"a":3})"}));
  CHECK(listing(out.path) == std::vector<std::string>{"stdout"});
  CHECK(restore(*open_sink(h, {}), {""}).ok());
}

TEST_CASE("with checkpoints a line reaches stdout only once its checkpoint commits", "[stdout_sink]") {
  TempDir out, dir;
  fs::path spool = dir.path / "spool"; // created by the sink
  Harness h(kPipeline);
  StdoutCapture capture(out.path / "stdout");
  auto sink = open_sink(h, spool);
  CHECK(fs::is_directory(spool));
  CHECK(listing(spool).empty()); // no file before the first write
  write(h, *sink, {R"({"a":1})"});
  CHECK(capture.text().empty());
  auto names = listing(spool);
  REQUIRE(names.size() == 1);
  CHECK(is_pending(names[0]));
  std::string s1, s2, s3;
  sink->pre_commit(1, s1);
  write(h, *sink, {R"({"a":2})", R"({"a":3})"});
  CHECK(capture.text().empty());
  CHECK(listing(spool).size() == 2);
  sink->commit(1);
  CHECK(capture.text() == lines({R"({"a":1})"}));
  CHECK(listing(spool).size() == 1);
  // A checkpoint with nothing new prepares no file; committing it publishes nothing new.
  sink->pre_commit(2, s2);
  sink->pre_commit(3, s3);
  CHECK(listing(spool).size() == 1);
  write(h, *sink, {R"({"a":4})"});
  sink->commit(2); // publishes checkpoint 2's file only
  CHECK(capture.text() == lines({R"({"a":1})", R"({"a":2})", R"({"a":3})"}));
  sink->commit(1); // a late, older commit changes nothing
  CHECK(capture.text() == lines({R"({"a":1})", R"({"a":2})", R"({"a":3})"}));
  CHECK(listing(spool).size() == 1); // the file in progress
  sink->finish();
  CHECK(capture.text() == lines({R"({"a":1})", R"({"a":2})", R"({"a":3})", R"({"a":4})"}));
  CHECK(listing(spool).empty());
}

TEST_CASE("finish publishes every prepared file and then the one in progress", "[stdout_sink]") {
  TempDir out, dir;
  Harness h(kPipeline);
  StdoutCapture capture(out.path / "stdout");
  auto sink = open_sink(h, dir.path);
  std::string s1, s2;
  write(h, *sink, {R"({"a":1})"});
  sink->pre_commit(1, s1);
  write(h, *sink, {R"({"a":2})"});
  sink->pre_commit(2, s2);
  write(h, *sink, {R"({"a":3})"});
  CHECK(capture.text().empty());
  sink->finish();
  CHECK(capture.text() == lines({R"({"a":1})", R"({"a":2})", R"({"a":3})"}));
  CHECK(listing(dir.path).empty());
  sink->commit(2); // the commit of the last checkpoint arriving after the end: nothing twice
  CHECK(capture.text() == lines({R"({"a":1})", R"({"a":2})", R"({"a":3})"}));
}

TEST_CASE("after a crash a restore publishes the checkpoint's files once and drops the rest", "[stdout_sink]") {
  TempDir out, dir;
  fs::path state_file = out.path / "state";
  StdoutCapture capture(out.path / "stdout");
  // The crash is real: a child process writes and dies without finishing or aborting. Its fd 1
  // is the capture file too.
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int code = 1;
    try {
      Harness h(kPipeline);
      auto sink = open_sink(h, dir.path);
      write(h, *sink, {R"({"a":1})"});
      std::string s1, s2, s3;
      sink->pre_commit(1, s1);
      write(h, *sink, {R"({"a":2})"});
      sink->pre_commit(2, s2);
      sink->commit(1);
      write(h, *sink, {R"({"a":3})"});
      sink->pre_commit(3, s3); // checkpoint 3 never completes
      write(h, *sink, {R"({"a":4})"});
      std::ofstream(state_file, std::ios::binary) << s2;
      sink.release(); // no destructor: nothing is cleaned up
      code = 0;
    } catch (...) {
    }
    ::_exit(code);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  std::vector<std::string> states{read(state_file)};
  CHECK(capture.text() == lines({R"({"a":1})"}));
  CHECK(listing(dir.path).size() == 3); // checkpoint 2's, checkpoint 3's, and the one in progress

  // Files that are not this sink's pending files stay.
  std::vector<std::string> others{"stdin-in-0123456789abcdef.spool", "stdout-other-0123456789abcdef.pending",
                                  "stdout-out-0123456789abcdef.pending.keep"};
  for (const auto& name : others) std::ofstream(dir.path / name) << "x";

  Harness h(kPipeline);
  for (int attempt = 0; attempt < 2; ++attempt) { // idempotent: a second restore is harmless
    auto sink = open_sink(h, dir.path);
    auto restored = restore(*sink, states);
    INFO(restored.error());
    REQUIRE(restored.ok());
    CHECK(capture.text() == lines({R"({"a":1})", R"({"a":2})"}));
    auto names = listing(dir.path);
    CHECK(std::none_of(names.begin(), names.end(), is_pending));
    CHECK(names.size() == others.size());
  }
  auto sink = open_sink(h, dir.path);
  REQUIRE(restore(*sink, states).ok());
  write(h, *sink, {R"({"a":5})"});
  std::string s4;
  sink->pre_commit(4, s4);
  sink->commit(4);
  write(h, *sink, {R"({"a":6})"});
  sink->finish();
  CHECK(capture.text() == lines({R"({"a":1})", R"({"a":2})", R"({"a":5})", R"({"a":6})"}));
}

TEST_CASE("a restore goes on copying a file where a crash interrupted it", "[stdout_sink]") {
  TempDir out, dir;
  Harness h(kPipeline);
  StdoutCapture capture(out.path / "stdout");
  std::string state;
  {
    auto sink = open_sink(h, dir.path);
    write(h, *sink, {R"({"a":1})", R"({"a":2})"});
    sink->pre_commit(1, state);
    abandon(std::move(sink)); // a crash
  }
  auto names = listing(dir.path);
  REQUIRE(names.size() == 1);
  // As if the crash came after the first line was copied to stdout and recorded in the
  // file's header (bytes 8-15, little-endian).
  std::string first = lines({R"({"a":1})"});
  {
    std::fstream f(dir.path / names[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);
    char progress[8] = {static_cast<char>(first.size()), 0, 0, 0, 0, 0, 0, 0};
    f.write(progress, sizeof progress);
  }
  auto sink = open_sink(h, dir.path);
  REQUIRE(restore(*sink, {state}).ok());
  CHECK(capture.text() == lines({R"({"a":2})"}));
  CHECK(listing(dir.path).empty());
}

TEST_CASE("abort keeps the prepared files and drops the one in progress", "[stdout_sink]") {
  TempDir out, dir;
  Harness h(kPipeline);
  StdoutCapture capture(out.path / "stdout");
  std::string s1;
  {
    auto sink = open_sink(h, dir.path);
    write(h, *sink, {R"({"a":1})"});
    sink->pre_commit(1, s1);
    write(h, *sink, {R"({"a":2})"});
    REQUIRE(listing(dir.path).size() == 2);
    sink->abort();
    CHECK(listing(dir.path).size() == 1);
  }
  CHECK(listing(dir.path).size() == 1); // the destructor after abort deletes nothing more
  CHECK(capture.text().empty());
  // Checkpoint 1 completed after all: the restore publishes it.
  auto sink = open_sink(h, dir.path);
  REQUIRE(restore(*sink, {s1}).ok());
  CHECK(capture.text() == lines({R"({"a":1})"}));
  CHECK(listing(dir.path).empty());
}

TEST_CASE("corrupt pending state of the stdout sink is refused and touches no file", "[stdout_sink]") {
  TempDir out, dir;
  Harness h(kPipeline);
  StdoutCapture capture(out.path / "stdout");
  std::string state;
  {
    auto sink = open_sink(h, dir.path);
    write(h, *sink, {R"({"a":1})"});
    sink->pre_commit(1, state);
    write(h, *sink, {R"({"a":2})"});
    state.clear();
    sink->pre_commit(2, state); // two files pending
    abandon(std::move(sink));
  }
  auto before = listing(dir.path);
  REQUIRE(before.size() == 2);
  for (std::size_t cut = 1; cut < state.size(); ++cut) {
    auto sink = open_sink(h, dir.path);
    INFO("truncated to " << cut);
    CHECK_FALSE(restore(*sink, {state.substr(0, cut)}).ok());
    CHECK(listing(dir.path) == before);
  }
  // A name that escapes the directory is refused.
  std::string evil = state;
  auto at = evil.find("stdout-out-");
  REQUIRE(at != std::string::npos);
  evil.replace(at, 11, "../../../x-");
  auto sink = open_sink(h, dir.path);
  CHECK_THAT(restore(*sink, {evil}).error(), Catch::Contains("bad pending file name"));
  CHECK(listing(dir.path) == before);
  CHECK(capture.text().empty());
  // Without a checkpoint directory, files to publish cannot be found.
  CHECK_THAT(restore(*open_sink(h, {}), {state}).error(), Catch::Contains("no checkpoint directory"));
  REQUIRE(restore(*sink, {state}).ok());
  CHECK(capture.text() == lines({R"({"a":1})", R"({"a":2})"}));
}

TEST_CASE("a stdout reader that has gone ends the job as OutputClosed", "[stdout_sink]") {
  IgnoreSigpipe ignore;
  for (bool checkpoints : {false, true}) {
    TempDir dir;
    Harness h(kPipeline);
    int pipe_fds[2];
    REQUIRE(::pipe(pipe_fds) == 0);
    ::close(pipe_fds[0]); // no reader
    StdoutCapture capture(pipe_fds[1]);
    auto sink = open_sink(h, checkpoints ? dir.path : fs::path());
    auto kind = ErrorKind::Internal;
    try {
      write(h, *sink, {R"({"a":1})"});
      std::string s1;
      sink->pre_commit(1, s1);
      sink->commit(1);
    } catch (const Error& e) {
      kind = e.kind();
    }
    INFO("checkpoints " << checkpoints);
    CHECK(kind == ErrorKind::OutputClosed);
  }
}

// A job with nothing more to write (a followed file that stays quiet) never wrote again after
// `| head` had gone, and so ran on; the worker now asks the sink about its output every second.
TEST_CASE("check_output ends the job once stdout's reader has gone, with nothing to write", "[stdout_sink]") {
  TempDir dir;
  Harness h(kPipeline);
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  {
    StdoutCapture capture(pipe_fds[1]);
    auto sink = open_sink(h, fs::path());
    CHECK_NOTHROW(sink->check_output()); // a reader is there
    ::close(pipe_fds[0]);
    auto kind = ErrorKind::Internal;
    try {
      sink->check_output();
    } catch (const Error& e) {
      kind = e.kind();
    }
    CHECK(kind == ErrorKind::OutputClosed);
  }
  ::close(pipe_fds[1]);
  // A file never reports its reader gone.
  StdoutCapture file(dir.path / "out");
  CHECK_NOTHROW(open_sink(h, fs::path())->check_output());
}
