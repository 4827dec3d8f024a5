#include "operators/bad_record.hpp"

#include <string>

#include "state/json_writer.hpp"

namespace streamctl::operators {

void report_bad_record(const OperatorContext& ctx, const state::Record& record, std::string_view reason) {
  std::string raw;
  state::append_json(record, *ctx.names, raw);
  ctx.errors->bad_record(raw, 0, reason);
}

} // namespace streamctl::operators
