#include "operators/file_sink.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include "operators/fd_writer.hpp"
#include "operators/text_format.hpp"
#include "operators/text_format_schema.hpp"

namespace streamctl::operators {

namespace {

constexpr std::size_t kFlushBytes = 1 << 20;

class FileSink final : public Sink {
public:
  FileSink(const pipeline::NodeSpec& node, state::FieldNames& names, std::filesystem::path dir)
      : encoder_(node, names), dir_(std::move(dir)) {
    std::string format = node.config["format"].value_or(std::string("json"));
    extension_ = format == "lines" ? "txt" : format;
  }

  ~FileSink() override {
    if (fd_ >= 0) abort();
  }

  void open(OperatorContext& ctx) override {
    Sink::open(ctx);
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) {
      errno = ec.value();
      fail_io("cannot create directory", dir_);
    }
    std::string prefix = "part-" + std::to_string(ctx.subtask) + "-";
    int n = 0;
    while (std::filesystem::exists(dir_ / (prefix + std::to_string(n) + "." + extension_)) ||
           std::filesystem::exists(dir_ / ("." + prefix + std::to_string(n) + "." + extension_)))
      ++n;
    final_path_ = dir_ / (prefix + std::to_string(n) + "." + extension_);
    temp_path_ = dir_ / ("." + prefix + std::to_string(n) + "." + extension_);
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0) fail_io("cannot create", temp_path_);
  }

  void write(const state::Batch& in) override {
    encoder_.encode(in, buffer_);
    if (buffer_.size() >= kFlushBytes) flush();
  }

  void finish() override {
    flush();
    if (::fsync(fd_) != 0) fail_io("cannot fsync", temp_path_);
    ::close(fd_);
    fd_ = -1;
    if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0) fail_io("cannot rename", temp_path_);
    int dir_fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0) {
      ::fsync(dir_fd);
      ::close(dir_fd);
    }
  }

  void abort() override {
    if (fd_ < 0) return;
    ::close(fd_);
    fd_ = -1;
    ::unlink(temp_path_.c_str());
  }

private:
  void flush() {
    auto written = write_all(fd_, buffer_);
    if (!written) fail_io("cannot write", temp_path_);
    buffer_.clear();
  }

  [[noreturn]] void fail_io(const char* what, const std::filesystem::path& path) {
    throw Error(ErrorKind::JobFailed, "sink '" + ctx_.node->name + "': " + what + " '" + path.string() +
                                          "': " + std::strerror(errno));
  }

  LineEncoder encoder_;
  std::filesystem::path dir_;
  std::string extension_;
  std::filesystem::path final_path_, temp_path_;
  int fd_ = -1;
  std::string buffer_;
};

} // namespace

pipeline::NodeTypeSchema file_sink_schema() {
  pipeline::NodeTypeSchema schema{"file", text_format_keys()};
  schema.keys.insert(schema.keys.begin(),
                     pipeline::KeySchema{"path", pipeline::KeyType::String, true, {}, {},
                                         "directory of part files, relative to the pipeline file"});
  return schema;
}

std::unique_ptr<Sink> make_file_sink(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                                     state::FieldNames& names) {
  std::filesystem::path dir = node.config["path"].value_or(std::string());
  if (dir.is_relative()) dir = spec.base_dir / dir;
  dir = dir.lexically_normal();
  // Check without creating anything (`validate` must have no side effects): the directory, or
  // its nearest existing ancestor, must be a writable directory.
  std::filesystem::path existing = dir;
  while (!existing.empty() && !std::filesystem::exists(existing) && existing != existing.parent_path())
    existing = existing.parent_path();
  auto where = pipeline::position_of(spec, node, "path") + ": sink '" + node.name + "': ";
  if (!std::filesystem::is_directory(existing))
    throw Error(ErrorKind::Usage, where + "cannot create directory '" + dir.string() + "': '" +
                                      existing.string() + "' is not a directory");
  if (::access(existing.c_str(), W_OK) != 0)
    throw Error(ErrorKind::Usage, where + "cannot write to '" + existing.string() + "': " + std::strerror(errno));
  return std::make_unique<FileSink>(node, names, std::move(dir));
}

} // namespace streamctl::operators
