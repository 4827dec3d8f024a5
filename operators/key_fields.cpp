#include "operators/key_fields.hpp"

#include "state/error.hpp"
#include "state/key_codec.hpp"

namespace streamctl::operators {

bool KeyFields::is_keyed(const pipeline::NodeSpec& node) { return node.config.contains("key"); }

KeyFields KeyFields::from_node(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                               state::FieldNames& names) {
  KeyFields key;
  if (const auto* list = node.config["key"].as_array())
    for (const auto& f : *list) key.fields_.push_back(names.intern(f.value_or(std::string())));
  if (key.fields_.empty())
    throw Error(ErrorKind::Usage, pipeline::position_of(spec, node, "key") + ": node '" + node.name +
                                      "': 'key' needs at least one field");
  key.values_.resize(key.fields_.size());
  return key;
}

void KeyFields::encode(const state::Record& record, const state::FieldNames& names, std::string& out) {
  for (std::size_t k = 0; k < fields_.size(); ++k) {
    const state::Value* v = record.find(fields_[k]);
    values_[k] = v ? *v : state::Value::null();
  }
  state::encode_key(values_, names, out);
}

void KeyFields::append_fields(const state::Record& record, state::RecordBuilder& builder) const {
  for (auto field : fields_) {
    const state::Value* v = record.find(field);
    builder.append(field, v ? *v : state::Value::null());
  }
}

} // namespace streamctl::operators
