#include "pipeline/runtime/spool_janitor.hpp"

#include <algorithm>
#include <set>

#include "operators/spool.hpp"
#include "pipeline/runtime/checkpoint_metadata.hpp"

namespace streamctl::runtime {

namespace fs = std::filesystem;

namespace {

void add_listed(const fs::path& snapshot, std::set<std::string>& out) {
  auto metadata = read_metadata(snapshot);
  if (!metadata) return;
  for (const auto& task : metadata->tasks) out.insert(task.spool_files.begin(), task.spool_files.end());
}

bool ends_with(const std::string& s, std::string_view end) {
  return s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
}

// PREFIX-<16 hex digits>.spool: a spool file of a release whose snapshots did not list them.
bool older_release_name(const std::string& name) {
  constexpr std::size_t kHex = 16;
  const std::string ext = ".spool";
  if (name.size() < ext.size() + kHex + 2 || name.compare(name.size() - ext.size(), ext.size(), ext) != 0) return false;
  std::size_t dash = name.size() - ext.size() - kHex - 1;
  if (name[dash] != '-' || name.find('.') != name.size() - ext.size()) return false;
  return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(dash + 1), name.end() - static_cast<std::ptrdiff_t>(ext.size()),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

} // namespace

SpoolJanitor::SpoolJanitor(fs::path root, std::string run_tag, spdlog::logger& log)
    : root_(std::move(root)), run_tag_(operators::Spool::safe_part(run_tag)), log_(log) {}

std::vector<std::string> SpoolJanitor::unneeded(Stage stage, const fs::path& restore_from) const {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(dir(), ec)) return out;
  std::set<std::string> listed;
  if (stage != Stage::Drained) {
    for (const auto& entry : fs::directory_iterator(root_, ec)) {
      std::string name = entry.path().filename().string();
      if (name.rfind("chk-", 0) == 0 || name.rfind("savepoint-", 0) == 0) add_listed(entry.path(), listed);
    }
    if (stage == Stage::Live && !restore_from.empty()) add_listed(restore_from, listed);
  }
  for (const auto& entry : fs::directory_iterator(dir(), ec)) {
    std::string name = entry.path().filename().string();
    // Only the stdin sources' files, while a sink may still publish its pending files; once
    // the job has drained, what a sink of a dead attempt left is garbage too.
    bool temporary = ends_with(name, ".spool.tmp");
    if (!temporary && !ends_with(name, ".spool") && stage != Stage::Drained) continue;
    bool keep = !temporary && stage != Stage::Drained &&
                (listed.count(name) > 0 || older_release_name(name) ||
                 (stage == Stage::Live && operators::Spool::run_of(name) == run_tag_));
    if (!keep) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void SpoolJanitor::remove(const std::vector<std::string>& names) {
  for (const auto& name : names) {
    std::error_code ec;
    fs::remove(dir() / name, ec);
    if (ec) log_.warn("cannot delete spool file {}: {}", (dir() / name).string(), ec.message());
    else log_.debug("deleted spool file {}: no retained checkpoint needs it", name);
  }
}

void SpoolJanitor::sweep_live(const fs::path& restore_from) { remove(unneeded(Stage::Live, restore_from)); }
void SpoolJanitor::sweep_ended() { remove(unneeded(Stage::Ended)); }
void SpoolJanitor::sweep_drained() { remove(unneeded(Stage::Drained)); }

std::string encode_spool_files(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : "\n") + name;
  return out;
}

std::vector<std::string> decode_spool_files(const std::string& text) {
  std::vector<std::string> out;
  for (std::size_t start = 0; start < text.size();) {
    auto end = std::min(text.find('\n', start), text.size());
    std::string name = text.substr(start, end - start);
    if (operators::Spool::valid_name(name)) out.push_back(std::move(name));
    start = end + 1;
  }
  return out;
}

} // namespace streamctl::runtime
