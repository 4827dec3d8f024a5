#include "pipeline/runtime/field_presence.hpp"

#include <charconv>
#include <map>
#include <set>
#include <tuple>

#include "operators/window_combiner.hpp"
#include "pipeline/spec/edit_distance.hpp"

namespace streamctl::runtime {

namespace {

const pipeline::NodeTypeSchema* operator_schema(const operators::Registry& registry,
                                                const std::string& type) {
  for (const auto& schema : registry.operator_schemas())
    if (schema.type == type) return &schema;
  return nullptr;
}

// The top-level fields `node` reads itself of each input: its read_fields with nothing read
// after it. A map may read what an earlier `set` of its own assigns: those are left out.
std::vector<pipeline::FieldSet> own_reads(const pipeline::PipelineSpec& spec,
                                          const pipeline::NodeSpec& node,
                                          const pipeline::NodeTypeSchema& schema) {
  auto reads =
      schema.read_fields(spec, node, pipeline::FieldSet::none(), pipeline::FieldSet::none());
  if (const auto* sets = node.config["set"].as_table())
    for (auto& input : reads)
      for (const auto& [name, value] : *sets)
        input.names.erase(std::string(name.str()));
  return reads;
}

constexpr std::size_t kMaxWatched = 64; // one bit each

void escape_to(std::string_view name, std::string& out) {
  for (char c : name) {
    if (c == '%' || c == '\t' || c == '\n' || c == ',') {
      static const char hex[] = "0123456789ABCDEF";
      out += '%';
      out += hex[static_cast<unsigned char>(c) >> 4];
      out += hex[static_cast<unsigned char>(c) & 15];
    } else {
      out += c;
    }
  }
}

bool unescape(std::string_view in, std::string& out) {
  out.clear();
  for (std::size_t k = 0; k < in.size(); ++k) {
    if (in[k] != '%') {
      out += in[k];
      continue;
    }
    unsigned value = 0;
    if (k + 2 >= in.size()) return false;
    auto [end, ec] = std::from_chars(in.data() + k + 1, in.data() + k + 3, value, 16);
    if (ec != std::errc() || end != in.data() + k + 3) return false;
    out += static_cast<char>(value);
    k += 2;
  }
  return true;
}

void append_list(const std::vector<std::string>& names, std::string& out) {
  for (std::size_t k = 0; k < names.size(); ++k) {
    if (k) out += ',';
    escape_to(names[k], out);
  }
}

bool parse_list(std::string_view text, std::vector<std::string>& out) {
  while (!text.empty()) {
    auto comma = text.find(',');
    std::string name;
    if (!unescape(text.substr(0, comma), name)) return false;
    out.push_back(std::move(name));
    text.remove_prefix(comma == std::string_view::npos ? text.size() : comma + 1);
  }
  return true;
}

template <typename T> bool parse_number(std::string_view text, T& out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  while (true) {
    auto at = text.find(separator);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return parts;
    text.remove_prefix(at + 1);
  }
}

std::string nearest(const std::string& name, const std::set<std::string>& candidates) {
  std::string best;
  std::size_t best_distance = 3; // at most two edits away, as the lint's suggestions
  for (const auto& candidate : candidates) {
    std::size_t d = pipeline::edit_distance(name, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

} // namespace

FieldPresence::FieldPresence(const pipeline::PipelineSpec& spec,
                             const std::vector<std::size_t>& chain_nodes,
                             const operators::Registry& registry, state::FieldNames& names)
    : spec_(&spec), names_(&names) {
  for (std::size_t index : chain_nodes) {
    const pipeline::NodeSpec& node = spec.nodes[index];
    if (node.role != pipeline::NodeRole::Operator) continue;
    std::vector<Watch>& inputs = watches_.emplace_back();
    const pipeline::NodeTypeSchema* schema = operator_schema(registry, node.type);
    if (schema == nullptr || !schema->read_fields) continue; // reads everything: no telling
    auto reads_by_input = own_reads(spec, node, *schema);
    if (reads_by_input.size() != node.inputs.size()) continue; // as projection: no telling
    for (const auto& reads : reads_by_input) {
      Watch& w = inputs.emplace_back();
      w.node = index;
      if (reads.all) continue;
      for (const auto& name : reads.names) {
        if (w.fields.size() == kMaxWatched) break;
        state::FieldId id = names.intern(name);
        if (id >= w.bit_of.size()) w.bit_of.resize(static_cast<std::size_t>(id) + 1, 0);
        w.fields.push_back(id);
        w.bit_of[id] = static_cast<std::uint8_t>(w.fields.size());
      }
      if (spec.combines_into(index)) w.partial_key = names.intern(operators::kPartialKeyField);
      // Nothing to look for: behave as done from the start.
      if (w.fields.empty()) w.checked = w.looked = kFieldPresenceRecords;
    }
  }
}

void FieldPresence::look_at(Watch& w, const state::Batch& batch) {
  for (const state::Record& record : batch) {
    if (w.looked == kFieldPresenceRecords) return;
    ++w.looked;
    if (w.partial_key != kNoPartials && record.find(w.partial_key) != nullptr) continue;
    ++w.checked;
    for (const state::Field& field : record) {
      if (field.name < w.bit_of.size() && w.bit_of[field.name] != 0)
        w.seen |= std::uint64_t{1} << (w.bit_of[field.name] - 1);
      if (field.name >= w.had.size()) w.had.resize(static_cast<std::size_t>(field.name) + 1, false);
      w.had[field.name] = true;
    }
  }
}

std::vector<FieldPresenceReport> FieldPresence::reports() const {
  std::vector<FieldPresenceReport> out;
  for (const auto& inputs : watches_)
    for (std::size_t input = 0; input < inputs.size(); ++input) {
      const Watch& w = inputs[input];
      if (w.fields.empty() || w.checked == 0) continue;
      FieldPresenceReport r{
          spec_->nodes[w.node].name, static_cast<std::uint32_t>(input), w.checked, {}, {}};
      for (std::size_t k = 0; k < w.fields.size(); ++k)
        if ((w.seen & (std::uint64_t{1} << k)) == 0)
          r.unseen.emplace_back(names_->name(w.fields[k]));
      if (!r.unseen.empty())
        for (std::size_t id = 0; id < w.had.size(); ++id)
          if (w.had[id]) r.had.emplace_back(names_->name(static_cast<state::FieldId>(id)));
      out.push_back(std::move(r));
    }
  return out;
}

std::string encode_field_presence(const std::vector<FieldPresenceReport>& reports) {
  std::string out;
  for (const auto& r : reports) {
    if (!out.empty()) out += '\n';
    escape_to(r.node, out);
    out += '\t' + std::to_string(r.input) + '\t' + std::to_string(r.checked) + '\t';
    append_list(r.unseen, out);
    out += '\t';
    append_list(r.had, out);
  }
  return out;
}

std::vector<FieldPresenceReport> decode_field_presence(std::string_view text) {
  std::vector<FieldPresenceReport> out;
  if (text.empty()) return out;
  for (std::string_view line : split(text, '\n')) {
    auto parts = split(line, '\t');
    FieldPresenceReport r;
    if (parts.size() == 5 && unescape(parts[0], r.node) && parse_number(parts[1], r.input) &&
        parse_number(parts[2], r.checked) && parse_list(parts[3], r.unseen) &&
        parse_list(parts[4], r.had))
      out.push_back(std::move(r));
  }
  return out;
}

std::vector<std::string> describe_unseen_fields(const pipeline::PipelineSpec& spec,
                                                const std::vector<FieldPresenceReport>& reports) {
  struct Joined {
    std::uint64_t checked = 0;
    bool all_read = true;                      // no subtask stopped looking before its input ended
    std::map<std::string, std::size_t> unseen; // field -> subtasks that did not see it
    std::size_t subtasks = 0;
    std::set<std::string> had;
  };
  std::map<std::pair<std::string, std::uint32_t>, Joined> by_input;
  for (const auto& r : reports) {
    if (r.checked == 0) continue;
    Joined& j = by_input[{r.node, r.input}];
    j.checked += r.checked;
    j.all_read = j.all_read && r.checked < kFieldPresenceRecords;
    ++j.subtasks;
    for (const auto& f : r.unseen)
      ++j.unseen[f];
    j.had.insert(r.had.begin(), r.had.end());
  }
  std::vector<std::string> lines;
  for (const auto& node : spec.nodes)
    for (std::uint32_t input = 0; input < node.inputs.size(); ++input) {
      auto it = by_input.find({node.name, input});
      if (it == by_input.end()) continue;
      const Joined& j = it->second;
      for (const auto& [field, subtasks] : j.unseen) {
        if (subtasks != j.subtasks) continue; // some subtask saw it
        std::string suggestion = nearest(field, j.had);
        lines.push_back(
            pipeline::position_of(spec, node, "") + ": " + node.type + " '" + node.name +
            "' reads field '" + field + "'" +
            (node.inputs.size() > 1 ? " of input '" + node.inputs[input] + "'" : std::string()) +
            ", which none of the " + (j.all_read ? "" : "first ") + std::to_string(j.checked) +
            " records it read had" +
            (suggestion.empty() ? std::string() : " (did you mean '" + suggestion + "'?)"));
      }
    }
  return lines;
}

std::vector<FieldPresenceReport> settled_reports(const std::vector<FieldPresenceReport>& reports) {
  std::map<std::pair<std::string, std::uint32_t>, std::uint64_t> checked;
  for (const auto& r : reports) checked[{r.node, r.input}] += r.checked;
  std::vector<FieldPresenceReport> settled;
  for (const auto& r : reports)
    if (checked[{r.node, r.input}] >= kFieldPresenceRecords) settled.push_back(r);
  return settled;
}

} // namespace streamctl::runtime
