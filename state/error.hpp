#pragma once
// Errors shared by every layer: a Result for expected failures, and a typed exception for
// failures that end a command. The exception's kind maps to the exit codes of SPEC §2.

#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace streamctl {

enum class ErrorKind {
  Usage,     // bad flags or a bad pipeline file: exit 2, nothing started
  Snapshot,  // a snapshot is missing, corrupt or incompatible: exit 3
  JobFailed, // the job failed: exit 1
  Internal,  // a bug or an environment failure (cannot fork, cannot bind): exit 1
  OutputClosed, // the reader of stdout went away (`| head`): exit 141, as a SIGPIPE death
};

inline int exit_code_for(ErrorKind kind) {
  switch (kind) {
  case ErrorKind::Usage: return 2;
  case ErrorKind::Snapshot: return 3;
  case ErrorKind::JobFailed:
  case ErrorKind::Internal: return 1;
  case ErrorKind::OutputClosed: return 128 + 13;
  }
  return 1;
}

class Error : public std::runtime_error {
public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

private:
  ErrorKind kind_;
};

// A failure reason carried as a value (a malformed record, a type error in an expression).
struct Failure {
  std::string message;
};

// Shaped like std::expected<T, Failure>, which C++20 lacks.
template <typename T> class Result {
public:
  Result(T value) : v_(std::move(value)) {}
  Result(Failure failure) : v_(std::move(failure)) {}
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const std::string& error() const { return std::get<1>(v_).message; }

private:
  std::variant<T, Failure> v_;
};

template <> class Result<void> {
public:
  Result() = default;
  Result(Failure failure) : failure_(std::move(failure)), ok_(false) {}
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const std::string& error() const { return failure_.message; }

private:
  Failure failure_;
  bool ok_ = true;
};

inline Failure fail(std::string message) { return Failure{std::move(message)}; }

} // namespace streamctl
