#include "operators/file_source.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include "operators/line_source.hpp"
#include "operators/text_format_schema.hpp"
#include "state/error.hpp"

namespace streamctl::operators {

std::vector<std::string> expand_glob(const std::filesystem::path& base_dir, const std::string& pattern) {
  std::filesystem::path full = std::filesystem::path(pattern).is_absolute() ? std::filesystem::path(pattern)
                                                                           : base_dir / pattern;
  glob_t g{};
  std::vector<std::string> files;
  if (::glob(full.c_str(), 0, nullptr, &g) == 0) {
    for (std::size_t k = 0; k < g.gl_pathc; ++k) {
      struct stat st {};
      if (::stat(g.gl_pathv[k], &st) == 0 && S_ISREG(st.st_mode)) files.emplace_back(g.gl_pathv[k]);
    }
  }
  ::globfree(&g);
  std::sort(files.begin(), files.end());
  return files;
}

namespace {
class FileSource final : public LineSource {
public:
  FileSource(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node, state::FieldNames& names,
             std::vector<std::string> files)
      : LineSource(spec, node, names), files_(std::move(files)) {}

  void open(OperatorContext& ctx) override {
    LineSource::open(ctx);
    next_ = static_cast<std::size_t>(ctx.subtask);
  }

protected:
  int open_next_input() override {
    if (next_ >= files_.size()) return -1;
    const std::string& path = files_[next_];
    next_ += static_cast<std::size_t>(ctx_.parallelism);
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      throw Error(ErrorKind::JobFailed, "source '" + ctx_.node->name + "': cannot open '" + path +
                                            "': " + std::strerror(errno));
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return fd;
  }
  void close_input(int fd) override { ::close(fd); }
  bool blocking_reads() const override { return true; }

private:
  std::vector<std::string> files_;
  std::size_t next_ = 0;
};
} // namespace

pipeline::NodeTypeSchema file_source_schema() {
  pipeline::NodeTypeSchema schema{"file", text_format_keys()};
  schema.keys.insert(schema.keys.begin(),
                     pipeline::KeySchema{"path", pipeline::KeyType::String, true, {}, {},
                                         "file or glob, relative to the pipeline file"});
  return schema;
}

std::unique_ptr<Source> make_file_source(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                                         state::FieldNames& names) {
  std::string pattern = node.config["path"].value_or(std::string());
  auto files = expand_glob(spec.base_dir, pattern);
  if (files.empty())
    throw Error(ErrorKind::Usage, pipeline::position_of(spec, node, "path") + ": source '" + node.name +
                                      "': no file matches '" + pattern + "'");
  for (const auto& f : files)
    if (::access(f.c_str(), R_OK) != 0)
      throw Error(ErrorKind::Usage, pipeline::position_of(spec, node, "path") + ": source '" + node.name +
                                        "': cannot read '" + f + "': " + std::strerror(errno));
  return std::make_unique<FileSource>(spec, node, names, std::move(files));
}

} // namespace streamctl::operators
