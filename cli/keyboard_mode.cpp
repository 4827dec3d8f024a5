#include "cli/keyboard_mode.hpp"

#include <unistd.h>

namespace streamctl::cli {

KeyboardMode::KeyboardMode() {
  if (!::isatty(STDIN_FILENO) || ::tcgetattr(STDIN_FILENO, &saved_) != 0) return;
  termios keys = saved_;
  // Keys arrive one at a time and are not echoed; ISIG stays, so ^C is still SIGINT.
  keys.c_lflag &= static_cast<tcflag_t>(~(ICANON | ECHO));
  keys.c_cc[VMIN] = 0;
  keys.c_cc[VTIME] = 0;
  active_ = ::tcsetattr(STDIN_FILENO, TCSANOW, &keys) == 0;
}

KeyboardMode::~KeyboardMode() {
  if (active_) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
}

} // namespace streamctl::cli
