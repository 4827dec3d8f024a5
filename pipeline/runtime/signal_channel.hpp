#pragma once
// SIGINT, SIGTERM and SIGCHLD as a file descriptor the coordinator polls with its sockets.

#include <csignal>
#include <cstring>
#include <string>
#include <sys/signalfd.h>
#include <unistd.h>

#include "state/error.hpp"

namespace streamctl::runtime {

// Blocks SIGINT, SIGTERM and SIGCHLD for the life of the object and reads them from a
// signalfd, so the coordinator's one poll loop sees signals, control messages and child exits
// in order, with no async handler.
class SignalChannel {
public:
  SignalChannel() {
    sigemptyset(&mask_);
    sigaddset(&mask_, SIGINT);
    sigaddset(&mask_, SIGTERM);
    sigaddset(&mask_, SIGCHLD);
    ::sigprocmask(SIG_BLOCK, &mask_, &previous_);
    fd_ = ::signalfd(-1, &mask_, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd_ < 0) throw Error(ErrorKind::Internal, std::string("signalfd: ") + std::strerror(errno));
  }
  ~SignalChannel() {
    ::close(fd_);
    ::sigprocmask(SIG_SETMASK, &previous_, nullptr);
  }
  int fd() const { return fd_; }
  // The next pending signal number, or 0.
  int next() {
    signalfd_siginfo info{};
    if (::read(fd_, &info, sizeof info) != sizeof info) return 0;
    return static_cast<int>(info.ssi_signo);
  }

private:
  sigset_t mask_{}, previous_{};
  int fd_ = -1;
};

} // namespace streamctl::runtime
