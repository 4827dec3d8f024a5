#pragma once
// Problems found in a pipeline file, each with its place, printed as FILE:LINE:COL: message.
// Validation collects all of them before reporting (Vector's config compiler does the same).

#include <cstdint>
#include <string>
#include <vector>

namespace streamctl::pipeline {

struct SourcePos {
  std::string file;
  std::uint32_t line = 0; // 1-based; 0 when unknown
  std::uint32_t column = 0;
};

struct Diagnostic {
  SourcePos where;
  std::string message;

  std::string to_string() const {
    return where.file + ":" + std::to_string(where.line) + ":" + std::to_string(where.column) +
           ": " + message;
  }
};

class Diagnostics {
public:
  void add(SourcePos where, std::string message) {
    items_.push_back(Diagnostic{std::move(where), std::move(message)});
  }
  bool empty() const { return items_.empty(); }
  std::size_t size() const { return items_.size(); }
  const std::vector<Diagnostic>& items() const { return items_; }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

private:
  std::vector<Diagnostic> items_;
};

} // namespace streamctl::pipeline
