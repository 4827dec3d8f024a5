#pragma once
// The raw text of each document that went into a pipeline (the file, and the --set
// overrides as the virtual document "<--set>", one override a line), so that an offset into a
// decoded TOML string (an expression's error offset) can be turned back into the line and
// column the user sees in the file, across quotes, escapes and multi-line strings.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/spec/diagnostics.hpp"

namespace streamctl::pipeline {

class SourceTexts {
public:
  // `text` must outlive this object.
  void add(const std::string& path, std::string_view text);

  // `start` is where a TOML string value begins (its opening quote, as toml++ reports it,
  // columns counted in code points); returns where byte `offset` of the decoded string is.
  // Text without a quote there is taken as typed (a --set value that was not TOML). Falls
  // back to `start` when the text is unknown.
  SourcePos locate_in_string(const SourcePos& start, std::uint32_t offset) const;

private:
  std::map<std::string, std::vector<std::string_view>, std::less<>> lines_;
};

} // namespace streamctl::pipeline
