#pragma once
// A terminal on stdin switched to read single keys without echo (`top`'s "q"), for the life of
// the object: the destructor puts back the settings it found, so every way out of `top` (a
// return, an exception, SIGINT read from a signalfd) leaves the shell as it was.

#include <termios.h>

namespace streamctl::cli {

class KeyboardMode {
public:
  // Does nothing when stdin is not a terminal (a pipe, /dev/null): active() says which.
  KeyboardMode();
  ~KeyboardMode();
  KeyboardMode(const KeyboardMode&) = delete;
  KeyboardMode& operator=(const KeyboardMode&) = delete;

  bool active() const { return active_; }

private:
  termios saved_{};
  bool active_ = false;
};

} // namespace streamctl::cli
