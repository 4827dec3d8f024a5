#include "cli/detach.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <iostream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "state/error.hpp"

namespace streamctl::cli {

namespace {

// Points `fd` at `path` (created or truncated); false when it cannot be opened.
bool redirect(int fd, const std::filesystem::path& path, int flags) {
  int opened = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  if (opened < 0) return false;
  ::dup2(opened, fd);
  ::close(opened);
  return true;
}

void write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

} // namespace

int run_detached(const runtime::LoadedJob& job, runtime::RunOptions options, spdlog::logger& log) {
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0)
    throw Error(ErrorKind::Internal, std::string("pipe: ") + std::strerror(errno));
  std::cout.flush();
  std::cerr.flush();
  pid_t child = ::fork();
  if (child < 0) throw Error(ErrorKind::Internal, std::string("fork: ") + std::strerror(errno));

  if (child == 0) {
    ::close(ready[0]);
    ::setsid(); // no terminal: a Ctrl-C or a closed terminal does not reach the job
    redirect(STDIN_FILENO, "/dev/null", O_RDONLY);
    options.on_registered = [&](const std::string& id, const std::filesystem::path& dir) {
      redirect(STDOUT_FILENO, dir / "stdout", O_WRONLY | O_CREAT | O_TRUNC);
      redirect(STDERR_FILENO, dir / "log", O_WRONLY | O_CREAT | O_APPEND);
      write_all(ready[1], id + "\n");
      ::close(ready[1]);
      ready[1] = -1;
    };
    auto outcome = runtime::run_job(job, options, log);
    if (ready[1] >= 0) ::close(ready[1]);
    if ((outcome.exit_code == 1 || outcome.exit_code == 3) && !outcome.error.empty())
      log.error("job {} failed: {}", outcome.job_id, outcome.error);
    return outcome.exit_code;
  }

  ::close(ready[1]);
  std::string id;
  char c;
  while (true) {
    ssize_t n = ::read(ready[0], &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || c == '\n') break;
    id += c;
  }
  ::close(ready[0]);
  if (id.empty()) {
    // The child ended before the job was registered; it has said why on stderr.
    int status = 0;
    ::waitpid(child, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) != 0 ? WEXITSTATUS(status) : 1;
  }
  std::cout << id << "\n";
  return 0;
}

} // namespace streamctl::cli
