#include "pipeline/runtime/snapshot_server.hpp"

#include <algorithm>
#include <fstream>
#include <system_error>

#include "pipeline/runtime/checkpoint_metadata.hpp"

namespace streamctl::runtime {

namespace fs = std::filesystem;

void SnapshotServer::begin_attempt(int attempt, const fs::path& dir) {
  attempt_ = attempt;
  dir_ = dir.empty() ? fs::path() : checkpoint_dir_of(dir);
  listed_.reset();
}

std::optional<std::string> SnapshotServer::why_refused(const std::string& identity,
                                                       const transport::ControlMessage& fetch) {
  const std::string& name = fetch.get("name");
  auto task = fetch.get_int("task", -1);
  auto attempt = fetch.get_int("attempt", -1);
  if (attempt != attempt_)
    return "attempt " + std::to_string(attempt) + " is not the running attempt (" +
           std::to_string(attempt_) + ")";
  if (task < 0 || identity != fetch_identity(static_cast<int>(task), static_cast<int>(attempt)))
    return "'" + identity + "' is not the restore link of task " + std::to_string(task);
  if (dir_.empty()) return "the running attempt restores from no snapshot";
  if (name.empty() || name.find('/') != std::string::npos || name.front() == '.')
    return "'" + name + "' is not a file name of a snapshot";
  if (fetch.get_int("offset", -1) < 0)
    return "offset '" + fetch.get("offset") + "' is not a byte offset";
  if (name == kMetadataFile) return std::nullopt;
  if (!listed_) {
    auto metadata = read_metadata(dir_);
    if (!metadata) return metadata.error();
    listed_.emplace();
    for (const auto& t : metadata->tasks)
      listed_->insert(t.file);
  }
  if (!listed_->contains(name))
    return "'" + name + "' is not listed in " + (dir_ / kMetadataFile).string();
  return std::nullopt;
}

transport::ControlMessage SnapshotServer::answer(const std::string& identity,
                                                 const transport::ControlMessage& fetch) {
  const std::string& name = fetch.get("name");
  auto refuse = [&](const std::string& why) {
    return transport::ControlMessage{"ERROR", {}}.set("name", name).set("message", why);
  };
  if (auto why = why_refused(identity, fetch)) return refuse(*why);
  fs::path file = dir_ / name;
  std::error_code ec;
  auto total = fs::file_size(file, ec);
  if (ec) return refuse(file.string() + ": " + ec.message());
  auto offset = static_cast<std::uint64_t>(fetch.get_int("offset", 0));
  auto asked = static_cast<std::uint64_t>(std::max<std::int64_t>(fetch.get_int("length", 0), 0));
  std::uint64_t length = offset >= total ? 0 : std::min({asked, kMaxFetchPart, total - offset});
  std::string data(length, '\0');
  if (length > 0) {
    std::ifstream in(file, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(data.data(), static_cast<std::streamsize>(length));
    if (!in || in.gcount() != static_cast<std::streamsize>(length))
      return refuse(file.string() + ": cannot read " + std::to_string(length) + " bytes at " +
                    std::to_string(offset));
  }
  return transport::ControlMessage{"FETCHED", {}}
      .set("name", name)
      .set("offset", std::to_string(offset))
      .set("total", std::to_string(total))
      .set("data", std::move(data));
}

} // namespace streamctl::runtime
