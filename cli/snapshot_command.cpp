#include "cli/snapshot_command.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <set>
#include <sstream>

#include "cli/context.hpp"
#include "pipeline/runtime/checkpoint_restore.hpp"
#include "state/error.hpp"
#include "state/hex.hpp"
#include "state/json_writer.hpp"
#include "state/snapshot_format.hpp"

namespace streamctl::cli {

namespace {

namespace fs = std::filesystem;

// "streamctl: FILE: reason" on stderr (a JSON log line with --log-format json).
void report(Context& ctx, const std::string& message) {
  if (ctx.global.log_format == "json" && ctx.log)
    ctx.log->error("{}", message);
  else
    std::cerr << "streamctl: " << message << "\n";
  ctx.exit_code = exit_code_for(ErrorKind::Snapshot);
}

std::string utc_time(std::int64_t ms) {
  std::time_t seconds = static_cast<std::time_t>(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
  std::tm tm{};
  if (!::gmtime_r(&seconds, &tm)) return "?";
  char buf[64];
  std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  int millis = static_cast<int>(ms - std::int64_t(seconds) * 1000);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", millis);
  return buf;
}

std::string ratio(const state::SegmentInfo& s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f",
                s.compressed_length == 0 ? 0.0
                                         : double(s.raw_length) / double(s.compressed_length));
  return buf;
}

std::string chain_text(const std::vector<std::string>& nodes) {
  std::string out;
  for (const auto& n : nodes)
    out += (out.empty() ? "" : " -> ") + n;
  return out;
}

void print_text(const state::SnapshotReader& r) {
  const auto& h = r.header();
  std::uint64_t raw = 0, compressed = 0;
  for (const auto& s : r.segments()) {
    raw += s.raw_length;
    compressed += s.compressed_length;
  }
  std::ostringstream out;
  out << "file:            " << r.path().string() << "\n"
      << "format version:  " << r.format_version() << "\n"
      << "job:             " << h.job_name << "\n"
      << "pipeline hash:   " << state::hex64(h.pipeline_hash) << "\n"
      << "checkpoint:      " << h.checkpoint_id << "\n"
      << "created:         " << utc_time(h.created_at_ms) << " (" << h.created_at_ms << " ms)\n"
      << "chain:           " << h.chain_id << ": " << chain_text(h.chain_nodes) << "\n"
      << "subtask:         " << h.subtask << " of " << h.parallelism << "\n"
      << "key groups:      [" << h.key_groups.first << ", " << h.key_groups.end << ") of "
      << h.max_parallelism << " (max_parallelism)\n"
      << "segments:        " << r.segments().size() << ", " << raw << " bytes raw, " << compressed
      << " compressed, " << r.file_size() << " in the file\n";
  // A file of an incremental checkpoint with entry deltas: its keyed_delta segments are
  // changes to the same task's earlier files, not state of their own.
  std::size_t deltas = 0;
  std::uint64_t delta_raw = 0;
  for (const auto& s : r.segments())
    if (s.kind == state::SegmentKind::KeyedDelta) {
      ++deltas;
      delta_raw += s.raw_length;
    }
  if (deltas > 0)
    out << "deltas:          " << deltas << " key groups as keyed_delta segments (" << delta_raw
        << " bytes raw): changes to the task's earlier files, applied on restore\n";
  out << "\n";

  std::size_t node_width = 4;
  for (const auto& s : r.segments())
    node_width = std::max(node_width, s.node.size());
  auto row = [&](const std::string& node, const std::string& kind, const std::string& kg,
                 const std::string& raw_text, const std::string& comp, const std::string& rat,
                 const std::string& sum) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "  %-15s %9s %12s %12s %6s  %s", kind.c_str(), kg.c_str(),
                  raw_text.c_str(), comp.c_str(), rat.c_str(), sum.c_str());
    out << node << std::string(node_width - node.size(), ' ') << buf << "\n";
  };
  row("NODE", "KIND", "KEY GROUP", "RAW", "COMPRESSED", "RATIO", "XXH64");
  for (const auto& s : r.segments())
    row(s.node, std::string(state::segment_kind_name(s.kind)),
        state::is_keyed(s.kind) ? std::to_string(s.key_group) : "-",
        std::to_string(s.raw_length), std::to_string(s.compressed_length), ratio(s),
        state::hex64(s.checksum));
  std::cout << out.str();
}

void print_json(const state::SnapshotReader& r) {
  const auto& h = r.header();
  std::string out = "{\"file\":";
  state::append_json_string(r.path().string(), out);
  out += ",\"format_version\":" + std::to_string(r.format_version());
  out += ",\"job\":";
  state::append_json_string(h.job_name, out);
  out += ",\"pipeline_hash\":\"" + state::hex64(h.pipeline_hash) + "\"";
  out += ",\"checkpoint_id\":" + std::to_string(h.checkpoint_id);
  out += ",\"created_at_ms\":" + std::to_string(h.created_at_ms);
  out += ",\"max_parallelism\":" + std::to_string(h.max_parallelism);
  out += ",\"chain_id\":" + std::to_string(h.chain_id);
  out += ",\"chain\":[";
  for (std::size_t k = 0; k < h.chain_nodes.size(); ++k) {
    if (k) out += ',';
    state::append_json_string(h.chain_nodes[k], out);
  }
  out += "],\"subtask\":" + std::to_string(h.subtask);
  out += ",\"parallelism\":" + std::to_string(h.parallelism);
  out += ",\"key_groups\":{\"first\":" + std::to_string(h.key_groups.first) +
         ",\"end\":" + std::to_string(h.key_groups.end) + "}";
  out += ",\"file_bytes\":" + std::to_string(r.file_size());
  std::uint64_t raw = 0, compressed = 0;
  for (const auto& s : r.segments()) {
    raw += s.raw_length;
    compressed += s.compressed_length;
  }
  out += ",\"raw_bytes\":" + std::to_string(raw);
  out += ",\"compressed_bytes\":" + std::to_string(compressed);
  out += ",\"segments\":[";
  bool first = true;
  for (const auto& s : r.segments()) {
    if (!first) out += ',';
    first = false;
    out += "{\"node\":";
    state::append_json_string(s.node, out);
    out += ",\"kind\":\"" + std::string(state::segment_kind_name(s.kind)) + "\"";
    out += ",\"key_group\":" + (state::is_keyed(s.kind) ? std::to_string(s.key_group)
                                                                    : std::string("null"));
    out += ",\"offset\":" + std::to_string(s.offset);
    out += ",\"raw_bytes\":" + std::to_string(s.raw_length);
    out += ",\"compressed_bytes\":" + std::to_string(s.compressed_length);
    out += ",\"xxh64\":\"" + state::hex64(s.checksum) + "\"}";
  }
  out += "]}\n";
  std::cout << out;
}

// A checkpoint or savepoint directory: what its _metadata says, or (with --json) the same as
// one JSON object.
void print_metadata(const runtime::CheckpointMetadata& m, const fs::path& dir, bool json) {
  if (json) {
    std::string out = "{\"dir\":";
    state::append_json_string(dir.string(), out);
    out += ",\"kind\":";
    state::append_json_string(m.kind, out);
    out += ",\"job\":";
    state::append_json_string(m.job_name, out);
    out += ",\"job_id\":";
    state::append_json_string(m.job_id, out);
    out += ",\"checkpoint_id\":" + std::to_string(m.checkpoint_id) +
           ",\"created_at_ms\":" + std::to_string(m.created_at_ms) +
           ",\"max_parallelism\":" + std::to_string(m.max_parallelism) + ",\"tasks\":[";
    for (std::size_t k = 0; k < m.tasks.size(); ++k) {
      const auto& t = m.tasks[k];
      out += k ? ",{\"file\":" : "{\"file\":";
      state::append_json_string(t.file, out);
      out += ",\"nodes\":[";
      for (std::size_t n = 0; n < t.nodes.size(); ++n) {
        if (n) out += ",";
        state::append_json_string(t.nodes[n], out);
      }
      out += "],\"subtask\":" + std::to_string(t.subtask) + ",\"parallelism\":" + std::to_string(t.parallelism) +
             ",\"bytes\":" + std::to_string(t.bytes) + ",\"previous\":[";
      for (std::size_t n = 0; n < t.previous.size(); ++n) {
        out += n ? ",{\"file\":" : "{\"file\":";
        state::append_json_string(t.previous[n].path, out);
        out += ",\"bytes\":" + std::to_string(t.previous[n].bytes) + "}";
      }
      out += "]}";
    }
    std::cout << out << "]}\n";
    return;
  }
  std::uint64_t total = 0;
  for (const auto& t : m.tasks) total += t.bytes;
  std::cout << "directory:       " << dir.string() << "\n"
            << "kind:            " << m.kind << "\n"
            << "job:             " << m.job_name << " (" << m.job_id << ")\n"
            << "checkpoint:      " << m.checkpoint_id << "\n"
            << "created:         " << m.created_at_ms << " ms since the epoch\n"
            << "max_parallelism: " << m.max_parallelism << "\n"
            << "tasks:           " << m.tasks.size() << ", " << total << " bytes\n\n";
  for (const auto& t : m.tasks) {
    std::string nodes;
    for (const auto& n : t.nodes) nodes += (nodes.empty() ? "" : " -> ") + n;
    std::cout << "  " << t.file << "  " << nodes << "[" << t.subtask << " of " << t.parallelism << "]  " << t.bytes
              << " bytes\n";
    // An incremental checkpoint: the earlier checkpoints' files this task's state builds on.
    for (const auto& p : t.previous) std::cout << "    builds on " << p.path << "  " << p.bytes << " bytes\n";
  }
}

// The files `verify` checks for one argument: the file itself, or the files a checkpoint or
// savepoint directory's _metadata lists, after checking that the metadata is whole (its
// checksum) and complete (every subtask of every chain, once) and that each file is the one it
// names (CheckpointRestore::open). A directory without _metadata is incomplete, which is
// reported; its *.snap files are still checked, each.
std::vector<fs::path> files_of(Context& ctx, const std::string& arg) {
  std::error_code ec;
  if (!fs::is_directory(arg, ec)) return {fs::path(arg)};
  if (fs::exists(fs::path(arg) / runtime::kMetadataFile)) {
    auto restore = runtime::CheckpointRestore::open(arg);
    if (!restore) {
      report(ctx, restore.error());
      return {};
    }
    std::vector<fs::path> listed;
    std::set<std::vector<std::string>> chains;
    for (const auto& t : restore->metadata().tasks) {
      listed.push_back(fs::path(arg) / t.file);
      for (const auto& p : t.previous) listed.push_back((fs::path(arg) / p.path).lexically_normal());
      chains.insert(t.nodes);
    }
    if (!ctx.global.quiet)
      std::cout << (fs::path(arg) / runtime::kMetadataFile).string() << ": ok (version "
                << restore->metadata().version << ", " << chains.size()
                << (chains.size() == 1 ? " chain, " : " chains, ") << restore->metadata().tasks.size()
                << (restore->metadata().tasks.size() == 1 ? " task" : " tasks") << ", every subtask once"
                << (listed.size() > restore->metadata().tasks.size()
                        ? ", with " + std::to_string(listed.size() - restore->metadata().tasks.size()) +
                              " files of earlier checkpoints"
                        : std::string())
                << ")" << std::endl;
    return listed;
  }
  report(ctx, (fs::path(arg) / runtime::kMetadataFile).string() +
                  ": missing: not a completed checkpoint or savepoint (its files are checked one by one)");
  std::vector<fs::path> files;
  for (fs::directory_iterator it(arg, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".snap") files.push_back(it->path());
  if (ec) {
    report(ctx, arg + ": cannot list the directory: " + ec.message());
    return {};
  }
  if (files.empty()) report(ctx, arg + ": no *.snap file in the directory");
  std::sort(files.begin(), files.end());
  return files;
}

} // namespace

void add_snapshot_command(CLI::App& app, Context& ctx) {
  auto* snapshot = app.add_subcommand(
      "snapshot", "Inspect or verify snapshot files (see streamctl-snapshot(5))");
  snapshot->require_subcommand(1);

  auto* inspect = snapshot->add_subcommand(
      "inspect", "Print a snapshot file's header and its table of segments");
  struct InspectOptions {
    std::string file;
    bool json = false;
  };
  auto io = std::make_shared<InspectOptions>();
  inspect->add_option("PATH", io->file, "a snapshot file (*.snap), or a checkpoint or savepoint directory")
      ->required()
      ->type_name("");
  inspect->add_flag("--json", io->json, "print one JSON object instead of text");
  inspect->callback([&ctx, io] {
    ctx.configure_logging("streamctl");
    std::error_code ec;
    if (fs::is_directory(io->file, ec)) {
      auto metadata = runtime::read_metadata(io->file);
      if (!metadata) return report(ctx, metadata.error());
      print_metadata(*metadata, io->file, io->json);
      ctx.exit_code = 0;
      return;
    }
    auto reader = state::SnapshotReader::open(io->file);
    if (!reader) return report(ctx, reader.error());
    if (io->json)
      print_json(*reader);
    else
      print_text(*reader);
    ctx.exit_code = 0;
  });

  auto* verify = snapshot->add_subcommand(
      "verify",
      "Check that checkpoint directories are complete and read every segment of snapshot files, checking "
      "every checksum; exit 3 if anything is missing or bad");
  auto files = std::make_shared<std::vector<std::string>>();
  verify
      ->add_option("PATH", *files,
                   "snapshot files, or checkpoint directories (every *.snap in them)")
      ->required()
      ->type_name("");
  verify->callback([&ctx, files] {
    ctx.configure_logging("streamctl");
    ctx.exit_code = 0;
    for (const auto& arg : *files) {
      for (const auto& path : files_of(ctx, arg)) {
        auto reader = state::SnapshotReader::open(path);
        if (!reader) {
          report(ctx, reader.error());
          continue;
        }
        auto summary = reader->verify();
        if (!summary) {
          report(ctx, summary.error());
          continue;
        }
        if (!ctx.global.quiet)
          std::cout << path.string() << ": ok (" << summary->segments
                    << (summary->segments == 1 ? " segment, " : " segments, ")
                    << summary->file_bytes << " bytes)" << std::endl;
      }
    }
  });
}

} // namespace streamctl::cli
