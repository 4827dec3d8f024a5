#include "operators/event_time.hpp"

#include <cmath>

#include "pipeline/spec/expression_functions.hpp"
#include "operators/bad_record.hpp"
#include "pipeline/spec/pipeline_spec.hpp"

namespace streamctl::operators {

using pipeline::KeySchema;
using pipeline::KeyType;

std::vector<KeySchema> event_time_keys() {
  return {
      KeySchema{"event_time", KeyType::Expression, false, {}, {},
                "field or expression giving each record's event time (epoch ms or RFC 3339)"},
      KeySchema{"watermark",
                KeyType::Table,
                false,
                {},
                {KeySchema{"max_delay", KeyType::Duration, false, {}, {}, "how late records may be"},
                 KeySchema{"idle_timeout", KeyType::Duration, false, {}, {},
                           "after this long without records, stop holding the watermark back"}},
                "how the watermark follows event time"},
  };
}

Result<std::int64_t> event_time_of(const state::Value& value) {
  switch (value.kind) {
  case state::Kind::Int: return value.i;
  case state::Kind::Float:
    if (!std::isfinite(value.f) || std::fabs(value.f) > 9.2e18) return fail("event time out of range");
    return static_cast<std::int64_t>(value.f);
  case state::Kind::String: {
    std::int64_t ms = 0;
    std::string error;
    if (!pipeline::expr::parse_time(value.str(), "", ms, error))
      return fail("event time '" + std::string(value.str()) + "' is not an RFC 3339 time: " + error);
    return ms;
  }
  case state::Kind::Null: return fail("no event time (the field is missing or null)");
  default: return fail(std::string("event time must be epoch ms or an RFC 3339 string, got ") +
                       state::kind_name(value.kind));
  }
}

std::unique_ptr<TimestampAssigner> TimestampAssigner::from_node(const pipeline::NodeSpec& node,
                                                              state::FieldNames& names) {
  auto text = node.config["event_time"].value<std::string>();
  if (!text) return nullptr;
  const toml::table* watermark = node.config["watermark"].as_table();
  std::int64_t max_delay = watermark ? pipeline::duration_ms_or(watermark->get("max_delay"), 0) : 0;
  std::int64_t idle = watermark ? pipeline::duration_ms_or(watermark->get("idle_timeout"), 0) : 0;
  return std::unique_ptr<TimestampAssigner>(
      new TimestampAssigner(pipeline::Expression::compile(*text, names), max_delay, idle));
}

void TimestampAssigner::assign(const state::Batch& in, state::Batch& out, const OperatorContext& ctx,
                               std::span<const Source::RecordOrigin> origins) {
  out.retain_memory_of(in);
  eval_.arena = &scratch_;
  std::int64_t largest = kWatermarkMin;
  const bool with_origins = origins.size() == in.size();
  auto bad = [&](std::size_t k, std::string_view reason) {
    if (with_origins) ctx.errors->bad_record(origins[k].raw, origins[k].line, reason);
    else report_bad_record(ctx, in[k], reason);
  };
  // The whole batch at once (faster than record by record); eval_batch stops at a record
  // whose expression fails, which is reported, and the rest of the batch follows, so bad
  // records are reported in order and with the same reasons as record by record.
  const std::span<const state::Record> records(in.begin(), in.end());
  values_.resize(records.size());
  std::size_t at = 0;
  while (at < records.size()) {
    const std::size_t done = expression_.eval_batch(records.subspan(at), eval_, values_.data() + at);
    for (const std::size_t end = at + done; at < end; ++at) {
      std::int64_t t;
      if (values_[at].kind == state::Kind::Int) { // epoch ms, as event_time_of gives it
        t = values_[at].i;
      } else {
        auto ts = event_time_of(values_[at]);
        if (!ts) {
          bad(at, ts.error());
          continue;
        }
        t = *ts;
      }
      state::Record stamped = records[at];
      stamped.timestamp = t;
      out.add_shared(stamped);
      largest = std::max(largest, t);
    }
    if (at < records.size()) bad(at++, eval_.error);
  }
  scratch_.reset();
  if (largest != kWatermarkMin) {
    // Saturating: a max_delay larger than the distance to the minimum keeps the minimum.
    std::int64_t candidate = largest < kWatermarkMin + max_delay_ms_ ? kWatermarkMin : largest - max_delay_ms_;
    watermark_ = std::max(watermark_, candidate);
  }
}

} // namespace streamctl::operators
