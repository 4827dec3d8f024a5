#include "cli/status_view.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "state/batch.hpp"
#include "state/json_reader.hpp"

namespace streamctl::cli {

namespace {

// Field access over a parsed JSON value; the values point into the text and the batch, so
// everything kept is copied out before they go.
class Reader {
public:
  explicit Reader(state::FieldNames& names) : names_(names) {}

  state::Value field(const state::Value& map, const char* name) const {
    if (map.kind != state::Kind::Map) return state::Value::null();
    state::FieldId id = names_.intern(name);
    for (std::uint32_t k = 0; k < map.size; ++k)
      if (map.map[k].name == id) return map.map[k].value;
    return state::Value::null();
  }
  Figure number(const state::Value& map, const char* name) const {
    state::Value v = field(map, name);
    if (!v.is_number()) return std::nullopt;
    double d = v.as_double();
    return std::isfinite(d) ? Figure(d) : std::nullopt;
  }
  std::optional<std::string> text(const state::Value& map, const char* name) const {
    state::Value v = field(map, name);
    if (v.kind != state::Kind::String) return std::nullopt;
    return std::string(v.str());
  }

private:
  state::FieldNames& names_;
};

SubtaskView read_subtask(const Reader& r, const state::Value& s, const OperatorView& op) {
  SubtaskView v;
  v.node = op.name;
  v.type = op.type;
  v.index = r.number(s, "index");
  v.host = r.text(s, "host");
  v.pid = r.number(s, "pid");
  v.records_in = r.number(s, "records_in");
  v.records_out = r.number(s, "records_out");
  v.bad_records = r.number(s, "bad_records");
  v.bytes_in = r.number(s, "bytes_in");
  v.bytes_out = r.number(s, "bytes_out");
  v.records_in_per_s = r.number(s, "records_in_per_s");
  v.records_out_per_s = r.number(s, "records_out_per_s");
  v.records_in_per_s_1m = r.number(s, "records_in_per_s_1m");
  v.records_out_per_s_1m = r.number(s, "records_out_per_s_1m");
  v.busy = r.number(s, "busy");
  v.idle = r.number(s, "idle");
  v.backpressured = r.number(s, "backpressured");
  v.input_queue = r.number(s, "input_queue");
  v.output_queue = r.number(s, "output_queue");
  v.watermark_ms = r.number(s, "watermark_ms");
  v.watermark_lag_ms = r.number(s, "watermark_lag_ms");
  v.state_entries = r.number(s, "state_entries");
  v.state_bytes = r.number(s, "state_bytes");
  state::Value c = r.field(s, "last_checkpoint");
  v.last_checkpoint = {r.number(c, "id"), r.number(c, "duration_ms"), r.number(c, "alignment_ms"),
                       r.number(c, "bytes")};
  state::Value l = r.field(s, "latency_ms");
  if (l.kind == state::Kind::Map)
    v.latency = LatencyView{r.number(l, "markers"), r.number(l, "p50"), r.number(l, "p95"),
                            r.number(l, "p99"), r.number(l, "max")};
  return v;
}

// A figure scaled down by `base` until it fits in 3 digits: "999", "3.4k", "34k", "1.2M".
std::string scaled(double n, double base, const char* const* units, std::size_t count,
                   bool integral_below_base) {
  std::string sign = n < 0 ? "-" : "";
  n = std::fabs(n);
  std::size_t u = 0;
  while (u + 1 < count && n >= 999.5) {
    n /= base;
    ++u;
  }
  char buf[32];
  if (u == 0 && integral_below_base) std::snprintf(buf, sizeof buf, "%.0f%s", n, units[0]);
  else if (n < 9.95 && !(u == 0 && n == 0))
    std::snprintf(buf, sizeof buf, "%.1f%s", n, units[u]);
  else std::snprintf(buf, sizeof buf, "%.0f%s", n, units[u]);
  return sign + buf;
}

// A table of right-aligned columns (the first may be left-aligned), two spaces apart, each as
// wide as its widest cell: what `ps` and `kubectl get` print.
struct Column {
  std::string header;
  bool left = false;
  std::vector<std::string> cells;
};

// The header line and one line per row, each starting with `indent` and without a trailing
// space.
std::vector<std::string> render(const std::vector<Column>& columns, std::string_view indent) {
  std::size_t rows = columns.empty() ? 0 : columns.front().cells.size();
  std::vector<std::size_t> width;
  for (const auto& c : columns) {
    std::size_t w = c.header.size();
    for (const auto& cell : c.cells) w = std::max(w, cell.size());
    width.push_back(w);
  }
  auto line = [&](auto cell_of) {
    std::string out(indent);
    for (std::size_t k = 0; k < columns.size(); ++k) {
      const std::string& cell = cell_of(k);
      std::string pad(width[k] - cell.size(), ' ');
      if (k) out += "  ";
      out += columns[k].left ? cell + pad : pad + cell;
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
  };
  std::vector<std::string> lines;
  lines.push_back(line([&](std::size_t k) -> const std::string& { return columns[k].header; }));
  for (std::size_t r = 0; r < rows; ++r)
    lines.push_back(line([&](std::size_t k) -> const std::string& { return columns[k].cells[r]; }));
  return lines;
}

std::string index_text(Figure index) {
  return index ? std::to_string(static_cast<long long>(*index)) : std::string("-");
}

std::string integer(Figure n) {
  return n ? std::to_string(static_cast<long long>(*n)) : std::string("-");
}

// The subtasks' table: `label` names each row (the index under an operator heading, or
// "node[i]" in top's flat table). Host, bad records and latency columns appear only when they
// say something: a host other than localhost, a bad record, a latency figure.
std::vector<std::string> subtask_table(const std::vector<SubtaskView>& rows, Column label,
                                       std::string_view indent) {
  bool remote = false, bad = false, latency = false;
  for (const auto& s : rows) {
    remote = remote || (s.host && *s.host != "localhost");
    bad = bad || (s.bad_records && *s.bad_records > 0);
    latency = latency || (s.latency && s.latency->p99_ms);
  }
  std::vector<Column> columns;
  auto add = [&](std::string header, auto cell_of, bool left = false) {
    Column c{std::move(header), left, {}};
    for (const auto& s : rows) c.cells.push_back(cell_of(s));
    columns.push_back(std::move(c));
  };
  columns.push_back(std::move(label));
  if (remote)
    add("host", [](const SubtaskView& s) { return s.host ? s.host->substr(0, 24) : "-"; }, true);
  // 0: the worker has exited (an ended job's figures), and its number may be another's now.
  add("pid", [](const SubtaskView& s) { return s.pid && *s.pid > 0 ? integer(s.pid) : std::string("-"); });
  add("in", [](const SubtaskView& s) { return human_count(s.records_in); });
  add("out", [](const SubtaskView& s) { return human_count(s.records_out); });
  if (bad) add("bad", [](const SubtaskView& s) { return human_count(s.bad_records); });
  add("in/s", [](const SubtaskView& s) { return human_count(s.records_in_per_s); });
  add("out/s", [](const SubtaskView& s) { return human_count(s.records_out_per_s); });
  add("busy", [](const SubtaskView& s) { return percent(s.busy); });
  add("bkpr", [](const SubtaskView& s) { return percent(s.backpressured); });
  add("wm lag", [](const SubtaskView& s) { return human_duration_ms(s.watermark_lag_ms); });
  add("state", [](const SubtaskView& s) { return human_bytes(s.state_bytes); });
  if (latency)
    add("p99", [](const SubtaskView& s) {
      return human_duration_ms(s.latency ? s.latency->p99_ms : std::nullopt);
    });
  add("ckpt", [](const SubtaskView& s) { return human_duration_ms(s.last_checkpoint.duration_ms); });
  return render(columns, indent);
}

std::string or_dash(const std::optional<std::string>& s) { return s ? *s : "-"; }

// The lines above the table, shared by status and top.
std::string job_lines(const StatusView& v, std::string_view note) {
  std::string out = "job " + or_dash(v.id) + " (" + or_dash(v.name) + "): " + or_dash(v.state) +
                    std::string(note) + ", started " + or_dash(v.started) + "\n";
  if (v.restarts || v.checkpoints_completed || v.checkpoints_failed)
    out += "  restarts " + integer(v.restarts) + ", checkpoints " +
           integer(v.checkpoints_completed) + " completed, " + integer(v.checkpoints_failed) +
           " failed\n";
  out += "  last checkpoint: " +
         (!v.last_checkpoint || v.last_checkpoint->empty() ? std::string("none")
                                                            : *v.last_checkpoint) +
         "\n";
  if (v.autoscale) out += "  autoscale: " + *v.autoscale + "\n";
  for (const auto& w : v.warnings) out += "  warning: " + w + "\n";
  if (v.failure) {
    const FailureView& f = *v.failure;
    std::string where;
    auto part = [&](const char* what, const std::optional<std::string>& s) {
      if (!s || s->empty()) return;
      where += (where.empty() ? "" : ", ") + std::string(what) + *s;
    };
    part("node ", f.node);
    part("task ", f.task);
    part("at ", f.time);
    out += "  failed: " + (f.message && !f.message->empty() ? *f.message : "(no message)") +
           (where.empty() ? "" : " (" + where + ")") + "\n";
  }
  return out;
}

// "2026-12-02T05:40:01Z: slow 1 -> 2 (target in 2000/s, true rate 1400/s per instance);
// rescaling to slow=2" (autoscaler.hpp writes the object).
std::string autoscale_line(const Reader& r, const state::Value& a) {
  auto rate = [](const Figure& f) {
    if (!f) return std::string("?");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f/s", *f);
    return std::string(buf);
  };
  std::string nodes;
  state::Value list = r.field(a, "nodes");
  for (std::uint32_t k = 0; list.kind == state::Kind::Array && k < list.size; ++k) {
    const state::Value& n = list.array[k];
    nodes += (nodes.empty() ? "" : ", ") + or_dash(r.text(n, "node")) + " " +
             integer(r.number(n, "from")) + " -> " + integer(r.number(n, "to")) +
             " (target in " + rate(r.number(n, "target_in")) + ", true rate " +
             rate(r.number(n, "true_rate")) + " per instance)";
  }
  return or_dash(r.text(a, "time")) + ": " + (nodes.empty() ? std::string("no data") : nodes) +
         "; " + or_dash(r.text(a, "outcome"));
}

} // namespace

Result<StatusView> parse_status_view(std::string_view json) {
  state::FieldNames names;
  state::Batch batch;
  auto parsed = state::parse_json_value(json, names, batch);
  if (!parsed) return fail("the job's status is not JSON: " + parsed.error());
  if (parsed->kind != state::Kind::Map) return fail("the job's status is not a JSON object");
  Reader r(names);
  const state::Value& top = *parsed;
  StatusView v;
  v.id = r.text(top, "id");
  v.name = r.text(top, "name");
  v.state = r.text(top, "state");
  v.started = r.text(top, "started");
  v.updated = r.text(top, "updated");
  v.last_checkpoint = r.text(top, "last_checkpoint");
  v.coordinator_pid = r.number(top, "coordinator_pid");
  v.restarts = r.number(top, "restarts");
  v.checkpoints_completed = r.number(top, "checkpoints_completed");
  v.checkpoints_failed = r.number(top, "checkpoints_failed");
  state::Value f = r.field(top, "failure");
  if (f.kind == state::Kind::Map)
    v.failure = FailureView{r.text(f, "node"), r.text(f, "task"), r.text(f, "message"),
                            r.text(f, "time")};
  if (state::Value a = r.field(top, "autoscale"); a.kind == state::Kind::Map)
    v.autoscale = autoscale_line(r, a);
  state::Value warnings = r.field(top, "warnings");
  for (std::uint32_t k = 0; warnings.kind == state::Kind::Array && k < warnings.size; ++k)
    if (warnings.array[k].kind == state::Kind::String) v.warnings.emplace_back(warnings.array[k].str());
  state::Value ops = r.field(top, "operators");
  for (std::uint32_t n = 0; ops.kind == state::Kind::Array && n < ops.size; ++n) {
    const state::Value& o = ops.array[n];
    if (o.kind != state::Kind::Map) continue;
    OperatorView op;
    op.name = or_dash(r.text(o, "name"));
    op.type = or_dash(r.text(o, "type"));
    op.parallelism = r.number(o, "parallelism");
    state::Value subtasks = r.field(o, "subtasks");
    for (std::uint32_t k = 0; subtasks.kind == state::Kind::Array && k < subtasks.size; ++k)
      if (subtasks.array[k].kind == state::Kind::Map)
        op.subtasks.push_back(read_subtask(r, subtasks.array[k], op));
    v.operators.push_back(std::move(op));
  }
  return v;
}

bool is_final_state(std::string_view state) {
  return state == "finished" || state == "failed" || state == "stopped" || state == "cancelled";
}

std::string format_status(const StatusView& view, std::string_view note) {
  std::string out = job_lines(view, note);
  std::vector<SubtaskView> rows;
  for (const auto& op : view.operators) rows.insert(rows.end(), op.subtasks.begin(), op.subtasks.end());
  if (view.operators.empty()) return out;
  Column label{"#", false, {}};
  for (const auto& s : rows) label.cells.push_back(index_text(s.index));
  // One table for every operator, so that the columns line up; each operator's rows under a
  // heading line.
  std::vector<std::string> lines = subtask_table(rows, std::move(label), "    ");
  out += lines[0] + "\n";
  std::size_t row = 1;
  for (const auto& op : view.operators) {
    out += "  " + op.name + " (" + op.type + ") x" + integer(op.parallelism) + "\n";
    for (std::size_t k = 0; k < op.subtasks.size(); ++k) out += lines[row++] + "\n";
  }
  return out;
}

std::vector<SubtaskView> subtasks_by_pressure(const StatusView& view) {
  std::vector<SubtaskView> rows;
  for (const auto& op : view.operators) rows.insert(rows.end(), op.subtasks.begin(), op.subtasks.end());
  // A missing fraction sorts below 0; equal ones keep the pipeline's order.
  auto key = [](Figure f) { return f ? *f : -1.0; };
  std::stable_sort(rows.begin(), rows.end(), [&](const SubtaskView& a, const SubtaskView& b) {
    if (key(a.backpressured) != key(b.backpressured))
      return key(a.backpressured) > key(b.backpressured);
    return key(a.busy) > key(b.busy);
  });
  return rows;
}

std::string format_top(const StatusView& view) {
  std::string out = job_lines(view, {});
  std::vector<SubtaskView> rows = subtasks_by_pressure(view);
  if (rows.empty()) return out + "  (no subtask figures)\n";
  Column label{"node[#]", true, {}};
  for (const auto& s : rows) label.cells.push_back(s.node.substr(0, 24) + "[" + index_text(s.index) + "]");
  for (const auto& line : subtask_table(rows, std::move(label), "  ")) out += line + "\n";
  return out;
}

std::string human_count(Figure n) {
  if (!n) return "-";
  static const char* const units[] = {"", "k", "M", "G", "T", "P", "E"};
  // Below 10 a rate keeps its decimal ("2.5"); a count is whole anyway.
  return scaled(*n, 1000, units, std::size(units), std::fabs(*n) >= 9.95 || *n == std::floor(*n));
}

std::string human_bytes(Figure n) {
  if (!n) return "-";
  static const char* const units[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB"};
  return scaled(*n, 1024, units, std::size(units), true);
}

std::string human_duration_ms(Figure ms) {
  if (!ms) return "-";
  double v = std::fabs(*ms);
  std::string sign = *ms < 0 ? "-" : "";
  char buf[32];
  auto one = [&](double x, const char* unit) {
    if (x < 9.95) std::snprintf(buf, sizeof buf, "%.1f%s", x, unit);
    else std::snprintf(buf, sizeof buf, "%.0f%s", x, unit);
    return sign + buf;
  };
  if (v < 999.5) {
    std::snprintf(buf, sizeof buf, "%.0fms", v);
    return sign + buf;
  }
  if (v < 59.95e3) return one(v / 1e3, "s");
  if (v < 59.95 * 60e3) return one(v / 60e3, "min");
  if (v < 23.95 * 3600e3) return one(v / 3600e3, "h");
  return one(v / 86400e3, "d");
}

std::string percent(Figure fraction) {
  if (!fraction) return "-";
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.0f%%", std::clamp(*fraction, 0.0, 1.0) * 100);
  return buf;
}

} // namespace streamctl::cli
