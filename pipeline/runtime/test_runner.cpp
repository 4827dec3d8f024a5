#include "pipeline/runtime/test_runner.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "pipeline/spec/env_expansion.hpp"
#include "state/error.hpp"
#include "state/json_reader.hpp"
#include "state/json_writer.hpp"

namespace streamctl::runtime {

namespace {

namespace fs = std::filesystem;

// Keys a source keeps when its input is replaced by the case's records: how records are read
// and timed, not where they come from.
const char* const kKeptSourceKeys[] = {"event_time", "watermark", "on_error", "parallelism"};

toml::table test_pipeline(const pipeline::PipelineSpec& spec, const pipeline::TestCase& test, const fs::path& dir) {
  toml::table root = spec.root;
  root.erase("test");
  for (const auto& node : spec.nodes) {
    const char* group = node.role == pipeline::NodeRole::Source ? "sources"
                        : node.role == pipeline::NodeRole::Sink ? "sinks"
                                                                : nullptr;
    if (group == nullptr) continue;
    toml::table replacement;
    if (node.role == pipeline::NodeRole::Source) {
      fs::path input = dir / "in" / (node.name + ".jsonl");
      std::ofstream file(input);
      if (auto it = test.input.find(node.name); it != test.input.end())
        for (const auto& line : it->second) file << line << "\n";
      replacement.insert("type", "file");
      replacement.insert("path", input.string());
      replacement.insert("format", "json");
      for (const char* key : kKeptSourceKeys)
        if (const toml::node* value = node.config.get(key)) replacement.insert(key, *value);
    } else {
      replacement.insert("type", "file");
      replacement.insert("path", (dir / "out" / node.name).string());
      replacement.insert("format", "json");
      if (const toml::node* inputs = node.config.get("inputs")) replacement.insert("inputs", *inputs);
    }
    if (node.role == pipeline::NodeRole::Source && node.on_error == pipeline::OnError::DeadLetter) {
      replacement.insert("dead_letter", (dir / (node.name + ".dead_letter.jsonl")).string());
    }
    (*root[group].as_table()).insert_or_assign(node.name, std::move(replacement));
  }
  // Its values are expanded already (and a "$${" of the file is now "${"): written out, they
  // must not be expanded a second time.
  pipeline::escape_variables(root);
  return root;
}

// Canonical JSON text of each line, for multiset comparison; lines that are not JSON values
// are kept as they are, marked, so that they never match by accident.
std::vector<std::string> canonical_lines(const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  state::FieldNames names;
  for (const auto& line : lines) {
    state::Batch scratch;
    auto value = state::parse_json_value(line, names, scratch);
    out.push_back(value ? state::canonical_json(*value, names) : "(not JSON) " + line);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> read_sink_output(const fs::path& dir) {
  std::vector<std::string> lines;
  if (!fs::is_directory(dir)) return lines;
  std::vector<fs::path> parts;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename().string().rfind('.', 0) != 0) parts.push_back(entry.path());
  std::sort(parts.begin(), parts.end());
  for (const auto& part : parts) {
    std::ifstream in(part);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

void compare(const std::string& sink, const std::vector<std::string>& expected_lines,
             const std::vector<std::string>& actual_lines, TestOutcome& outcome) {
  auto expected = canonical_lines(expected_lines);
  auto actual = canonical_lines(actual_lines);
  std::vector<std::string> missing, unexpected;
  std::set_difference(expected.begin(), expected.end(), actual.begin(), actual.end(), std::back_inserter(missing));
  std::set_difference(actual.begin(), actual.end(), expected.begin(), expected.end(), std::back_inserter(unexpected));
  if (missing.empty() && unexpected.empty()) return;
  outcome.passed = false;
  outcome.details.push_back("sink '" + sink + "': expected " + std::to_string(expected.size()) + " record(s), got " +
                            std::to_string(actual.size()));
  for (const auto& m : missing) outcome.details.push_back("  missing:    " + m);
  for (const auto& u : unexpected) outcome.details.push_back("  unexpected: " + u);
}

} // namespace

std::vector<TestOutcome> run_pipeline_tests(const LoadedJob& job, const operators::Registry& registry,
                                            const RunOptions& options, spdlog::logger& log, std::ostream& out) {
  std::vector<TestOutcome> outcomes;
  fs::path base = options.state_dir / "tests";
  fs::create_directories(base);
  for (std::size_t k = 0; k < job.spec.tests.size(); ++k) {
    const pipeline::TestCase& test = job.spec.tests[k];
    TestOutcome outcome{test.name, true, {}};
    std::string tmpl = (base / (job.spec.name + "-XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw Error(ErrorKind::Internal, "cannot create a directory under " + base.string());
    fs::path dir = tmpl;
    fs::create_directories(dir / "in");
    try {
      std::ostringstream text;
      text << test_pipeline(job.spec, test, dir);
      LoadedJob case_job = load_job_text(text.str(), job.spec.file.string() + " [test '" + test.name + "']",
                                         job.spec.base_dir, {}, registry);
      // A test's input and output are files here: its workers run here too, whatever the
      // pipeline's [cluster] says.
      RunOptions local = options;
      local.ignore_cluster = true;
      local.ignore_metrics_listen = true;
      // Not a job of the user's: registered (with its default checkpoint directory) in the
      // case's directory, which goes with it, so that `list` does not fill with test runs.
      local.state_dir = dir / "state";
      RunOutcome run = run_job(case_job, local, log);
      if (run.exit_code != 0) {
        outcome.passed = false;
        outcome.details.push_back("the job failed: " + (run.error.empty() ? "exit " + std::to_string(run.exit_code) : run.error));
      } else {
        for (const auto& [sink, expected] : test.expect)
          compare(sink, expected, read_sink_output(dir / "out" / sink), outcome);
      }
    } catch (const Error& e) {
      outcome.passed = false;
      outcome.details.push_back(e.what());
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
    out << (outcome.passed ? "ok    " : "FAIL  ") << test.name << "\n";
    for (const auto& d : outcome.details) out << "      " << d << "\n";
    out.flush();
    outcomes.push_back(std::move(outcome));
  }
  return outcomes;
}

} // namespace streamctl::runtime
