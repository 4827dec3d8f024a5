#include "operators/record_error_policy.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <unistd.h>

#include "state/base64.hpp"
#include "state/error.hpp"
#include "state/json_writer.hpp"
#include "state/utf8.hpp"

namespace streamctl::operators {

void check_dead_letter_path(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node) {
  if (node.on_error != pipeline::OnError::DeadLetter) return;
  namespace fs = std::filesystem;
  const fs::path& file = node.dead_letter;
  auto where = pipeline::position_of(spec, node, "dead_letter") + ": node '" + node.name + "': ";
  std::error_code ec;
  if (fs::is_directory(file, ec))
    throw Error(ErrorKind::Usage, where + "dead-letter file '" + file.string() + "' is a directory");
  // Check without creating anything (`validate` has no side effects): the directory, or its
  // nearest existing ancestor, must be a writable directory; the worker creates the rest.
  fs::path existing = file.parent_path();
  while (!existing.empty() && !fs::exists(existing, ec) && existing != existing.parent_path())
    existing = existing.parent_path();
  if (!fs::is_directory(existing, ec))
    throw Error(ErrorKind::Usage, where + "cannot create dead-letter file '" + file.string() + "': '" +
                                      existing.string() + "' is not a directory");
  if (::access(existing.c_str(), W_OK) != 0)
    throw Error(ErrorKind::Usage, where + "cannot write dead-letter file '" + file.string() + "' in '" +
                                      existing.string() + "': " + std::strerror(errno));
}

RecordErrorPolicy::RecordErrorPolicy(const pipeline::NodeSpec& node, Warn warn)
    : node_name_(node.name), mode_(node.on_error), dead_letter_path_(node.dead_letter.string()),
      warn_(std::move(warn)) {
  if (mode_ == pipeline::OnError::DeadLetter) {
    // Created as file sinks create their directory. A failure here is the pipeline's (the
    // path), not the moment's: Usage, which the coordinator does not retry.
    std::error_code ec;
    std::filesystem::create_directories(node.dead_letter.parent_path(), ec);
    if (ec)
      throw Error(ErrorKind::Usage, "node '" + node_name_ + "': cannot create the directory of dead-letter file '" +
                                        dead_letter_path_ + "': " + ec.message());
    // O_APPEND: the subtasks of a node share one dead-letter file, and each line is written
    // with a single write() so lines never interleave.
    dead_letter_fd_ = ::open(dead_letter_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (dead_letter_fd_ < 0)
      throw Error(ErrorKind::Usage, "node '" + node_name_ + "': cannot open dead-letter file '" +
                                        dead_letter_path_ + "': " + std::strerror(errno));
  }
}

void RecordErrorPolicy::write_dead_letter() {
  // One write() per line, so that subtasks appending to the same file never interleave. A
  // short write (a full disk) does not set errno: the rest is written again, and that write
  // says why (ENOSPC), rather than a stale errno.
  std::string_view rest(scratch_);
  while (!rest.empty()) {
    ssize_t n = ::write(dead_letter_fd_, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw Error(ErrorKind::JobFailed, "node '" + node_name_ + "': cannot write dead-letter file '" +
                                            dead_letter_path_ + "': " +
                                            (n < 0 ? std::strerror(errno) : "no bytes written"));
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
}

RecordErrorPolicy::~RecordErrorPolicy() {
  if (dead_letter_fd_ >= 0) ::close(dead_letter_fd_);
  if (unreported_ > 0 && warn_)
    warn_("node '" + node_name_ + "': dropped " + std::to_string(unreported_) + " more bad records");
}

void RecordErrorPolicy::bad_record(std::string_view raw, std::uint64_t line, std::string_view reason) {
  ++count_;
  switch (mode_) {
  case pipeline::OnError::Fail: {
    std::string where = line > 0 ? " at line " + std::to_string(line) : std::string();
    throw Error(ErrorKind::JobFailed,
                "node '" + node_name_ + "': bad record" + where + ": " + std::string(reason));
  }
  case pipeline::OnError::DeadLetter: {
    scratch_.clear();
    scratch_ += "{\"node\":";
    state::append_json_string(node_name_, scratch_);
    scratch_ += ",\"line\":";
    scratch_ += line > 0 ? std::to_string(line) : "null";
    scratch_ += ",\"input\":";
    // append_json_string writes bytes that are not UTF-8 as U+FFFD, which loses them: the
    // exact bytes then go in input_base64 too.
    state::append_json_string(raw, scratch_);
    if (!state::is_valid_utf8(raw)) {
      scratch_ += ",\"input_base64\":\"";
      state::append_base64(raw, scratch_);
      scratch_ += '"';
    }
    scratch_ += ",\"error\":";
    state::append_json_string(reason, scratch_);
    scratch_ += "}\n";
    write_dead_letter();
    return;
  }
  case pipeline::OnError::Drop: {
    ++unreported_;
    auto now = std::chrono::steady_clock::now();
    if (warn_ && now - last_warning_ >= std::chrono::seconds(1)) {
      std::string where = line > 0 ? " at line " + std::to_string(line) : std::string();
      std::string more = unreported_ > 1 ? " (" + std::to_string(unreported_) + " dropped since the last warning)" : "";
      warn_("node '" + node_name_ + "': dropped bad record" + where + ": " + std::string(reason) + more);
      last_warning_ = now;
      unreported_ = 0;
    }
    return;
  }
  }
}

} // namespace streamctl::operators
