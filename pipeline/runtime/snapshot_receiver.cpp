#include "pipeline/runtime/snapshot_receiver.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include <xxhash.h>

#include "pipeline/runtime/checkpoint_metadata.hpp"
#include "pipeline/runtime/snapshot_upload_protocol.hpp"
#include "state/durable_file.hpp"
#include "state/hex.hpp"

namespace streamctl::runtime {

namespace {

std::string system_error(const std::string& what, const std::filesystem::path& path) {
  return "cannot " + what + " '" + path.string() + "': " + std::strerror(errno);
}

} // namespace

void SnapshotReceiver::HashStateFree::operator()(XXH64_state_s* state) const {
  XXH64_freeState(state);
}

SnapshotReceiver::~SnapshotReceiver() {
  for (auto& [identity, upload] : uploads_) discard(upload);
}

void SnapshotReceiver::discard(Upload& upload) {
  if (upload.fd >= 0) ::close(upload.fd);
  upload.fd = -1;
  std::error_code ec;
  std::filesystem::remove(upload.part, ec);
}

void SnapshotReceiver::drop_stale(const std::optional<Accepting>& accepting) {
  for (auto it = uploads_.begin(); it != uploads_.end();) {
    bool current = accepting && it->second.attempt == accepting->attempt &&
                   it->second.checkpoint == accepting->checkpoint;
    if (current) {
      ++it;
      continue;
    }
    log_.debug("upload {} of {} given up: checkpoint {} is no longer being taken", it->first,
               it->second.file, it->second.checkpoint);
    discard(it->second);
    it = uploads_.erase(it);
  }
}

transport::ControlMessage SnapshotReceiver::refuse(const std::string& identity, const std::string& why) {
  if (auto it = uploads_.find(identity); it != uploads_.end()) {
    discard(it->second);
    uploads_.erase(it);
  }
  log_.debug("snapshot upload {} refused: {}", identity, why);
  return transport::ControlMessage{"SNAPSHOT_ERROR", {}}.set("message", why);
}

SnapshotReceiver::Upload* SnapshotReceiver::upload_for(const std::string& identity,
                                                       const transport::ControlMessage& m,
                                                       const Accepting& accepting, std::string& error) {
  if (auto it = uploads_.find(identity); it != uploads_.end()) {
    if (it->second.file != m.get("file")) {
      error = "one upload carries one file, and this one is '" + it->second.file + "', not '" +
              m.get("file") + "'";
      return nullptr;
    }
    return &it->second;
  }
  Upload upload;
  upload.attempt = accepting.attempt;
  upload.checkpoint = accepting.checkpoint;
  upload.file = m.get("file");
  upload.part = accepting.dir / (upload.file + ".part");
  upload.fd = ::open(upload.part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (upload.fd < 0) {
    // The directory is gone when the checkpoint was given up meanwhile.
    error = system_error("create", upload.part);
    return nullptr;
  }
  upload.hash.reset(XXH64_createState());
  XXH64_reset(upload.hash.get(), 0);
  return &uploads_.emplace(identity, std::move(upload)).first->second;
}

std::optional<std::string> SnapshotReceiver::store(Upload& upload, const transport::ControlMessage& m) {
  auto size = static_cast<std::uint64_t>(m.get_int("size", -1));
  if (size != upload.written)
    return "the worker sent " + std::to_string(upload.written) + " bytes of a file of " + m.get("size");
  std::string digest = state::hex64(XXH64_digest(upload.hash.get()));
  if (digest != m.get("xxh64"))
    return "the file's XXH64 is " + digest + " as received, " + m.get("xxh64") + " as sent";
  if (::fsync(upload.fd) != 0) return system_error("fsync", upload.part);
  int fd = std::exchange(upload.fd, -1);
  if (::close(fd) != 0) return system_error("close", upload.part);
  std::filesystem::path final_path = upload.part.parent_path() / upload.file;
  std::error_code ec;
  std::filesystem::rename(upload.part, final_path, ec);
  if (ec) return "cannot rename '" + upload.part.string() + "': " + ec.message();
  if (auto ok = state::sync_directory(final_path.parent_path()); !ok) return ok.error();
  return std::nullopt;
}

transport::ControlMessage SnapshotReceiver::handle(const std::string& identity,
                                                   const transport::ControlMessage& m,
                                                   std::string_view payload,
                                                   const std::optional<Accepting>& accepting) {
  drop_stale(accepting);
  const std::string& file = m.get("file");
  // A worker names a file, never a path: nothing it sends may land outside the checkpoint.
  if (!is_task_snapshot_file(file))
    return refuse(identity, "'" + file + "' is not the name of a task's snapshot file");
  auto checkpoint = static_cast<std::uint64_t>(m.get_int("checkpoint", 0));
  auto attempt = m.get_int("attempt", -1);
  if (!accepting || checkpoint != accepting->checkpoint || attempt != accepting->attempt)
    return refuse(identity, "checkpoint " + std::to_string(checkpoint) + " of attempt " +
                                std::to_string(attempt) +
                                " is not being taken (given up, over, or of an earlier attempt)");
  std::string error;
  Upload* upload = upload_for(identity, m, *accepting, error);
  if (!upload) return refuse(identity, error);

  if (m.type == "SNAPSHOT_PART") {
    auto offset = m.get_int("offset", -1);
    if (offset != static_cast<std::int64_t>(upload->written))
      return refuse(identity, "part at offset " + m.get("offset") + " of '" + file + "' where " +
                                  std::to_string(upload->written) + " was due");
    if (payload.size() > kUploadPartBytes)
      return refuse(identity, "a part of " + std::to_string(payload.size()) + " bytes, more than " +
                                  std::to_string(kUploadPartBytes));
    for (std::string_view rest = payload; !rest.empty();) {
      ssize_t n = ::write(upload->fd, rest.data(), rest.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return refuse(identity, system_error("write", upload->part));
      rest.remove_prefix(static_cast<std::size_t>(n));
    }
    XXH64_update(upload->hash.get(), payload.data(), payload.size());
    upload->written += payload.size();
    return transport::ControlMessage{"SNAPSHOT_PART_OK", {}}.set("offset", m.get("offset"));
  }
  if (m.type != "SNAPSHOT_END") return refuse(identity, "unexpected message " + m.type);
  if (auto why = store(*upload, m)) return refuse(identity, "'" + file + "' refused: " + *why);
  log_.debug("checkpoint {}: {} stored ({} bytes)", checkpoint, file, upload->written);
  uploads_.erase(identity);
  return transport::ControlMessage{"SNAPSHOT_STORED", {}};
}

} // namespace streamctl::runtime
