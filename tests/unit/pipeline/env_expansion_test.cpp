#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <string>

#include "pipeline/spec/env_expansion.hpp"

using namespace streamctl::pipeline;

namespace {

// A fixed environment: what a test sets is all there is.
VariableLookup env(PipelineVariables values) {
  return [values = std::move(values)](const std::string& name) -> std::optional<std::string> {
    auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

std::string expanded(std::string_view s, const PipelineVariables& values) {
  PipelineVariables used;
  auto e = expand_string(s, env(values), used);
  INFO(s);
  REQUIRE(e.problems.empty());
  return e.value;
}

std::string problem(std::string_view s, const PipelineVariables& values = {}) {
  PipelineVariables used;
  auto e = expand_string(s, env(values), used);
  REQUIRE(e.problems.size() == 1);
  CHECK(e.value == s); // left as written
  return e.problems[0].message;
}

struct Expanded {
  toml::table root;
  Diagnostics diagnostics;
  PipelineVariables used;
};

Expanded expand_document(const std::string& text, const PipelineVariables& values) {
  Expanded out;
  out.root = toml::parse(text, std::string_view("job.toml"));
  expand_variables(out.root, text, "job.toml", env(values), out.used, out.diagnostics);
  return out;
}

// Sorted: a table is walked in the order of its keys, the loader sorts by position.
std::string all(const Diagnostics& d) {
  std::vector<std::string> lines;
  for (const auto& item : d) lines.push_back(item.to_string() + "\n");
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const auto& line : lines) out += line;
  return out;
}

} // namespace

TEST_CASE("${NAME} takes the variable's value, anywhere in the string", "[env]") {
  PipelineVariables vars{{"IN", "/data/in"}, {"N", "7"}};
  CHECK(expanded("${IN}", vars) == "/data/in");
  CHECK(expanded("${IN}/clicks-${N}.jsonl", vars) == "/data/in/clicks-7.jsonl");
  CHECK(expanded("no variables here", vars) == "no variables here");
}

TEST_CASE("${NAME:-DEFAULT} takes the default when unset or empty, as sh does", "[env]") {
  CHECK(expanded("${IN:-in}/a", {}) == "in/a");
  CHECK(expanded("${IN:-in}/a", {{"IN", ""}}) == "in/a");
  CHECK(expanded("${IN:-in}/a", {{"IN", "x"}}) == "x/a");
  CHECK(expanded("${IN:-}", {}) == "");
  // Without a default, set-but-empty is the empty string.
  CHECK(expanded("a${IN}b", {{"IN", ""}}) == "ab");
}

TEST_CASE("a lone $ stays, $${ is a literal ${, and values are not expanded again", "[env]") {
  CHECK(expanded("price > $10 and $x", {}) == "price > $10 and $x");
  CHECK(expanded("$", {}) == "$");
  CHECK(expanded("echo $${HOME}", {{"HOME", "/h"}}) == "echo ${HOME}");
  CHECK(expanded("$$${A}", {{"A", "a"}}) == "$${A}");
  CHECK(expanded("${A}", {{"A", "${B}"}, {"B", "no"}}) == "${B}");
}

TEST_CASE("an unset variable and bad syntax are problems that name what is wrong", "[env]") {
  CHECK(problem("${INPUT_DIR}/x") ==
        "environment variable INPUT_DIR is not set (write ${INPUT_DIR:-default} for a default)");
  CHECK(problem("a ${IN") == "'${' without a closing '}' (write $${ for a literal ${)");
  CHECK(problem("${}") == "'${}' has no variable name");
  CHECK(problem("${:-x}") == "'${:-x}' has no variable name");
  CHECK_THAT(problem("${1X}"), Catch::Contains("'1X' is not a variable name"));
  CHECK_THAT(problem("${A-B}"), Catch::Contains("write ${A} or ${A:-default}"));
  CHECK_THAT(problem("${A B}"), Catch::Contains("write ${A} or ${A:-default}"));
  CHECK_THAT(problem("${A:-${B}}", {{"B", "b"}}), Catch::Contains("defaults are not expanded"));
}

TEST_CASE("the variables looked up and set are recorded, unset ones are not", "[env]") {
  PipelineVariables used;
  expand_string("${A}${B:-b}${C:-c}", env({{"A", "1"}, {"C", ""}, {"D", "4"}}), used);
  CHECK(used == PipelineVariables{{"A", "1"}, {"C", ""}});
}

TEST_CASE("every string value of the document is expanded, keys are not", "[env]") {
  const std::string text = R"toml(name = "${NAME:-job}"
[sources."${K}"]
path = "${IN}/a.jsonl"
paths = ["${IN}/b", ["${IN}/c", { p = "${IN}/d" }]]
count = 3
[[test]]
input = { a = ['{"x": "${IN}"}'] }
)toml";
  auto r = expand_document(text, {{"IN", "/in"}, {"K", "k"}});
  INFO(all(r.diagnostics));
  REQUIRE(r.diagnostics.empty());
  CHECK(r.root["name"].value_or(std::string()) == "job");
  auto* src = r.root["sources"]["${K}"].as_table(); // the key as written
  REQUIRE(src != nullptr);
  CHECK((*src)["path"].value_or(std::string()) == "/in/a.jsonl");
  CHECK((*src)["paths"][0].value_or(std::string()) == "/in/b");
  CHECK((*src)["paths"][1][0].value_or(std::string()) == "/in/c");
  CHECK((*src)["paths"][1][1]["p"].value_or(std::string()) == "/in/d");
  CHECK((*src)["count"].value_or(0) == 3);
  CHECK(r.root["test"][0]["input"]["a"][0].value_or(std::string()) == R"({"x": "/in"})");
  // The expanded value keeps its position (later diagnostics point at it).
  CHECK((*src)["path"].node()->source().begin.line == 3);
  CHECK(r.used == PipelineVariables{{"IN", "/in"}});
}

TEST_CASE("problems point at the ${ in the file, in arrays and multi-line strings too", "[env]") {
  const std::string text = "name = \"j\"\n"                               // 1
                           "[sources.in]\n"                               // 2
                           "path = \"${A:-a}/${INPUT_DIR}/x\"\n"          // 3: col 17
                           "paths = [\"ok\", 'é/${B}']\n"                 // 4: col 19 (é is one)
                           "cmd = \"\"\"\nline\n  $${x} ${C\"\"\"\n"      // 5-7: 7:9
                           "esc = \"\\u0024{D}\"\n";                      // 8: its quote
  auto r = expand_document(text, {});
  std::string got = all(r.diagnostics);
  CHECK(got ==
        "job.toml:3:17: environment variable INPUT_DIR is not set (write ${INPUT_DIR:-default} "
        "for a default)\n"
        "job.toml:4:19: environment variable B is not set (write ${B:-default} for a default)\n"
        "job.toml:7:9: '${' without a closing '}' (write $${ for a literal ${)\n"
        "job.toml:8:7: environment variable D is not set (write ${D:-default} for a default)\n");
}

TEST_CASE("escape_variables writes an expanded document so that it reads back as itself",
          "[env]") {
  auto r = expand_document("a = \"$${HOME} $$${X} ${V}\"\nb = [\"${V}\"]\n",
                           {{"V", "${W}"}, {"X", "no"}});
  REQUIRE(r.diagnostics.empty());
  std::string value = r.root["a"].value_or(std::string());
  CHECK(value == "${HOME} $${X} ${W}");
  escape_variables(r.root);
  std::ostringstream written;
  written << r.root;
  auto again = expand_document(written.str(), {});
  INFO(written.str());
  REQUIRE(again.diagnostics.empty());
  CHECK(again.root["a"].value_or(std::string()) == value);
  CHECK(again.root["b"][0].value_or(std::string()) == "${W}");
}
