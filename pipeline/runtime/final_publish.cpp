#include "pipeline/runtime/final_publish.hpp"

#include <fstream>
#include <string>

#include "state/durable_file.hpp"

namespace streamctl::runtime {

namespace fs = std::filesystem;

namespace {
constexpr const char* kFinishing = "finishing";
constexpr const char* kPublishedPrefix = "published-";
} // namespace

void clear_final_publish(const fs::path& job_dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(job_dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind(kPublishedPrefix, 0) == 0) fs::remove(entry.path(), ec);
  }
  fs::remove(job_dir / kFinishing, ec);
}

Result<void> mark_finishing(const fs::path& job_dir, std::size_t tasks) {
  return state::write_file_durably(job_dir / kFinishing, std::to_string(tasks) + "\n");
}

Result<void> mark_task_published(const fs::path& job_dir, std::size_t task) {
  return state::write_file_durably(job_dir / (kPublishedPrefix + std::to_string(task)), "1\n");
}

FinishState finish_state(const fs::path& job_dir) {
  FinishState out;
  std::error_code ec;
  if (!fs::exists(job_dir / kFinishing, ec)) return out;
  out.finishing = true;
  std::size_t tasks = 0;
  std::ifstream in(job_dir / kFinishing);
  if (!(in >> tasks) || tasks == 0) {
    out.unfinished.push_back(0); // unreadable: nothing can be said to be complete
    return out;
  }
  for (std::size_t t = 0; t < tasks; ++t)
    if (!fs::exists(job_dir / (kPublishedPrefix + std::to_string(t)), ec))
      out.unfinished.push_back(t);
  return out;
}

} // namespace streamctl::runtime
