#include "operators/file_source.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <glob.h>
#include <map>
#include <sys/stat.h>
#include <unistd.h>

#include "operators/line_source.hpp"
#include "operators/source_position.hpp"
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

// Position of a file source, version 1 (integers little-endian, str = u32 length + bytes):
//
//   u8  version = 1
//   u8  kind = 'F'
//   u32 files: how many entries follow (the files this subtask started or finished)
//   per file:
//     str name    the path as matched, relative to the pipeline file's directory when `path`
//                 is relative (so a savepoint survives moving the pipeline with its data)
//     u64 offset  bytes consumed: records of every line before it were emitted
//     u64 line    lines consumed (bad-record line numbers go on from it)
//     u8  done    1 when the file was read to its end
//     str header  the csv header line consumed, empty when none
constexpr std::uint8_t kFilePositionVersion = 1;

struct FileProgress {
  LineProgress at;
  bool done = false;
};

class FileSource final : public LineSource {
public:
  // `keys`: the names positions record, one per file of `files`.
  FileSource(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node, state::FieldNames& names,
             std::vector<std::string> files, std::vector<std::string> keys)
      : LineSource(spec, node, names), files_(std::move(files)), keys_(std::move(keys)),
        progress_(files_.size()) {}

  void open(OperatorContext& ctx) override {
    LineSource::open(ctx);
    next_ = static_cast<std::size_t>(ctx.subtask);
  }

  void snapshot_position(std::string& out) const override {
    auto live = current_progress();
    std::vector<std::size_t> listed;
    for (std::size_t k = static_cast<std::size_t>(ctx_.subtask); k < files_.size();
         k += static_cast<std::size_t>(ctx_.parallelism)) {
      bool reading = live.has_value() && k == current_;
      if (reading || progress_[k].done || progress_[k].at.offset > 0 || progress_[k].at.line > 0)
        listed.push_back(k);
    }
    PositionWriter w(out, kFilePositionVersion, 'F');
    w.u32(static_cast<std::uint32_t>(listed.size()));
    for (std::size_t k : listed) {
      const LineProgress& at = live.has_value() && k == current_ ? *live : progress_[k].at;
      w.str(keys_[k]);
      w.u64(at.offset);
      w.u64(at.line);
      w.u8(progress_[k].done ? 1 : 0);
      w.str(at.header);
    }
  }

  Result<void> restore_position(const std::vector<std::string_view>& old_subtasks) override {
    std::map<std::string, FileProgress> recorded;
    for (std::size_t s = 0; s < old_subtasks.size(); ++s) {
      if (old_subtasks[s].empty()) continue; // that subtask had started nothing
      PositionReader r(old_subtasks[s], "position of source '" + ctx_.node->name + "' subtask " + std::to_string(s));
      if (auto ok = r.header(kFilePositionVersion, 'F'); !ok) return ok;
      auto count = r.u32();
      if (!count) return Failure{count.error()};
      // Each entry takes at least 29 bytes: refuse a count the data cannot hold.
      if (*count > r.remaining() / 29) return r.failure("file count " + std::to_string(*count) + " exceeds the data");
      for (std::uint32_t k = 0; k < *count; ++k) {
        auto name = r.str(1 << 16);
        if (!name) return Failure{name.error()};
        auto offset = r.u64();
        if (!offset) return Failure{offset.error()};
        auto line = r.u64();
        if (!line) return Failure{line.error()};
        auto done = r.u8();
        if (!done) return Failure{done.error()};
        if (*done > 1) return r.failure("bad done flag");
        auto header = r.str();
        if (!header) return Failure{header.error()};
        if (*line > *offset) return r.failure("'" + *name + "': more lines than bytes");
        FileProgress p{LineProgress{*offset, *line, std::move(*header)}, *done == 1};
        if (!recorded.emplace(*name, std::move(p)).second)
          return r.failure("file '" + *name + "' recorded twice");
      }
      if (auto ok = r.end(); !ok) return ok;
    }
    for (std::size_t k = static_cast<std::size_t>(ctx_.subtask); k < files_.size();
         k += static_cast<std::size_t>(ctx_.parallelism)) {
      auto it = recorded.find(keys_[k]);
      if (it == recorded.end()) continue; // new since the snapshot: read it all
      struct stat st {};
      if (::stat(files_[k].c_str(), &st) != 0)
        return fail("source '" + ctx_.node->name + "': cannot stat '" + files_[k] + "': " + std::strerror(errno));
      if (static_cast<std::uint64_t>(st.st_size) < it->second.at.offset)
        return fail("source '" + ctx_.node->name + "': '" + files_[k] + "' has " + std::to_string(st.st_size) +
                    " bytes, fewer than the " + std::to_string(it->second.at.offset) +
                    " already read: it was truncated or replaced since the snapshot");
      progress_[k] = std::move(it->second);
    }
    // Files that no longer match the glob are gone: nothing more to read from them.
    return {};
  }

protected:
  std::optional<Input> open_next_input() override {
    for (; next_ < files_.size(); next_ += static_cast<std::size_t>(ctx_.parallelism)) {
      std::size_t k = next_;
      const std::string& path = files_[k];
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        throw Error(ErrorKind::JobFailed, "source '" + ctx_.node->name + "': cannot open '" + path +
                                              "': " + std::strerror(errno));
      std::uint64_t offset = progress_[k].at.offset;
      if (progress_[k].done) {
        // Read to its end before: go on only if it has grown since (`run --resume` over
        // growing input).
        struct stat st {};
        if (::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) <= offset) {
          ::close(fd);
          continue;
        }
      }
      if (offset > 0 && ::lseek(fd, static_cast<off_t>(offset), SEEK_SET) < 0) {
        int e = errno;
        ::close(fd);
        throw Error(ErrorKind::JobFailed, "source '" + ctx_.node->name + "': cannot seek in '" + path +
                                              "': " + std::strerror(e));
      }
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
      progress_[k].done = false;
      current_ = k;
      next_ += static_cast<std::size_t>(ctx_.parallelism);
      return Input{fd, progress_[k].at};
    }
    return std::nullopt;
  }
  void close_input(int fd, const LineProgress& at) override {
    ::close(fd);
    progress_[current_] = FileProgress{at, true};
    current_ = kNone;
  }
  bool blocking_reads() const override { return true; }

private:
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);

  std::vector<std::string> files_;
  std::vector<std::string> keys_;
  std::vector<FileProgress> progress_; // by file; only this subtask's files are used
  std::size_t next_ = 0;               // next file to open
  std::size_t current_ = kNone;        // file being read
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
  std::vector<std::string> keys;
  for (const auto& f : files)
    keys.push_back(std::filesystem::path(pattern).is_absolute()
                       ? f
                       : std::filesystem::path(f).lexically_relative(spec.base_dir).string());
  return std::make_unique<FileSource>(spec, node, names, std::move(files), std::move(keys));
}

} // namespace streamctl::operators
