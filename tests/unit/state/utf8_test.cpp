// Finding 7 of issue 7: invalid UTF-8 inside JSON strings was passed through into JSON output,
// which is then not JSON. These pin down which byte sequences are UTF-8 (RFC 3629).
#include <catch2/catch.hpp>

#include <string>

#include "state/base64.hpp"
#include "state/utf8.hpp"

using namespace streamctl::state;

namespace {
constexpr auto npos = std::string_view::npos;
std::size_t invalid_at(std::string_view s) { return find_invalid_utf8(s); }
} // namespace

TEST_CASE("utf8: valid sequences of every length are accepted", "[utf8]") {
  CHECK(is_valid_utf8(""));
  CHECK(is_valid_utf8("plain ascii with \x01 and \x7f"));
  CHECK(is_valid_utf8(std::string("nul\0inside", 10)));
  CHECK(is_valid_utf8("\xC2\x80 \xDF\xBF"));                 // U+0080, U+07FF
  CHECK(is_valid_utf8("\xE0\xA0\x80 \xED\x9F\xBF \xEE\x80\x80 \xEF\xBF\xBF")); // U+0800, U+D7FF, U+E000, U+FFFF
  CHECK(is_valid_utf8("\xF0\x90\x80\x80 \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF")); // U+10000, U+1F600, U+10FFFF
  CHECK(is_valid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xE4\xB8\xAD\xE6\x96\x87"));
  CHECK(utf8_sequence_length("\xF0\x9F\x98\x80", "\xF0\x9F\x98\x80" + 4) == 4);
}

TEST_CASE("utf8: each kind of invalid sequence is found at its first byte", "[utf8]") {
  CHECK(invalid_at("ab\xC0\xAF") == 2);                   // overlong '/'
  CHECK(invalid_at("ab\xC1\xBF") == 2);                   // overlong
  CHECK(invalid_at("\xE0\x80\xAF") == 0);                 // overlong, 3 bytes
  CHECK(invalid_at("\xE0\x9F\xBF") == 0);                 // overlong U+07FF
  CHECK(invalid_at("\xF0\x80\x80\xAF") == 0);             // overlong, 4 bytes
  CHECK(invalid_at("\xF0\x8F\xBF\xBF") == 0);             // overlong U+FFFF
  CHECK(invalid_at("x\x80") == 1);                        // lone continuation byte
  CHECK(invalid_at("x\xBF y") == 1);
  CHECK(invalid_at("\xED\xA0\x80") == 0);                 // U+D800 encoded
  CHECK(invalid_at("\xED\xBF\xBF") == 0);                 // U+DFFF encoded
  CHECK(invalid_at("\xED\xA0\xBD\xED\xB8\x80") == 0);     // a surrogate pair, CESU-8 style
  CHECK(invalid_at("ok\xE2\x82") == 2);                   // truncated at the end
  CHECK(invalid_at("\xE2\x82x") == 0);                    // truncated before ASCII
  CHECK(invalid_at("\xF0\x9F\x98") == 0);                 // 4-byte sequence cut short
  CHECK(invalid_at("\xC3") == 0);
  CHECK(invalid_at("\xF4\x90\x80\x80") == 0);             // above U+10FFFF
  for (int b = 0xF5; b <= 0xFF; ++b) {
    std::string s = "abc";
    s += static_cast<char>(b);
    s += "\x80\x80\x80";
    CHECK(invalid_at(s) == 3);
  }
}

TEST_CASE("utf8: the 16-byte ASCII steps find a bad byte at any position", "[utf8]") {
  for (std::size_t at = 0; at < 70; ++at) {
    std::string s(70, 'a');
    s[at] = '\xFF';
    CHECK(invalid_at(s) == at);
    std::string ok(70, 'a');
    ok.replace(at, 1, "\xE2\x82\xAC");
    CHECK(invalid_at(ok) == npos);
  }
}

TEST_CASE("base64 of every padding length", "[utf8]") {
  auto b64 = [](std::string_view s) {
    std::string out;
    append_base64(s, out);
    return out;
  };
  CHECK(b64("") == "");
  CHECK(b64("f") == "Zg==");
  CHECK(b64("fo") == "Zm8=");
  CHECK(b64("foo") == "Zm9v");
  CHECK(b64("foob") == "Zm9vYg==");
  CHECK(b64(std::string("\xFF\xFE\x00", 3)) == "//4A");
}
