#include <catch2/catch.hpp>

#include "transport/control.hpp"
#include "transport/frame.hpp"

using namespace streamctl::transport;

TEST_CASE("a frame header round-trips and rejects what is not one", "[transport]") {
  FrameHeader h;
  h.kind = FrameKind::EndOfInput;
  h.input_index = 513;
  h.channel = 0xdeadbeef;
  h.sequence = 0x0102030405060708ULL;
  std::string bytes;
  write_frame_header(h, bytes);
  REQUIRE(bytes.size() == kFrameHeaderSize);
  CHECK(bytes.substr(0, 4) == "SCF1");
  CHECK(static_cast<unsigned char>(bytes[16]) == 0x08); // little-endian sequence
  auto back = read_frame_header(bytes);
  REQUIRE(back);
  CHECK(back->kind == FrameKind::EndOfInput);
  CHECK(back->input_index == 513);
  CHECK(back->channel == 0xdeadbeef);
  CHECK(back->sequence == 0x0102030405060708ULL);

  CHECK_FALSE(read_frame_header(bytes.substr(0, 23)));
  std::string bad_magic = bytes;
  bad_magic[0] = 'X';
  CHECK_FALSE(read_frame_header(bad_magic));
  std::string bad_kind = bytes;
  bad_kind[4] = 9;
  CHECK_FALSE(read_frame_header(bad_kind));
}

TEST_CASE("a data frame can carry the watermark in front of its batch", "[transport]") {
  FrameHeader h;
  h.kind = FrameKind::DataWithWatermark;
  std::string bytes;
  write_frame_header(h, bytes);
  write_piggyback_watermark(-1700000000123, bytes);
  bytes += "SCTB";
  auto back = read_frame_header(bytes);
  REQUIRE(back);
  CHECK(back->kind == FrameKind::DataWithWatermark);
  std::string_view payload = std::string_view(bytes).substr(kFrameHeaderSize);
  auto watermark = read_piggyback_watermark(payload);
  REQUIRE(watermark);
  CHECK(*watermark == -1700000000123);
  CHECK(payload.substr(kPiggybackWatermarkSize) == "SCTB");
  CHECK_FALSE(read_piggyback_watermark(payload.substr(0, 7)));
}

TEST_CASE("control messages round-trip values with newlines and backslashes", "[transport]") {
  ControlMessage m{"FAILED", {}};
  m.set("task", "3").set("message", "line one\nline \\two\\n");
  auto back = decode_control(encode_control(m));
  REQUIRE(back);
  CHECK(back->type == "FAILED");
  CHECK(back->get("message") == "line one\nline \\two\\n");
  CHECK(back->get_int("task") == 3);
  CHECK(back->get_int("missing", -1) == -1);
  CHECK_FALSE(decode_control("no newline"));
  CHECK_FALSE(decode_control("T\nkey-without-equals\n"));
}

TEST_CASE("a barrier payload round-trips its checkpoint id and directory, and rejects a short one", "[transport]") {
  std::string bytes;
  write_barrier_payload(BarrierPayload{0x0102030405060708ULL, "/ck/jobs/chk-7"}, bytes);
  CHECK(static_cast<unsigned char>(bytes[0]) == 0x08); // little-endian id
  auto back = read_barrier_payload(bytes);
  REQUIRE(back);
  CHECK(back->checkpoint_id == 0x0102030405060708ULL);
  CHECK(back->directory == "/ck/jobs/chk-7");
  CHECK_FALSE(read_barrier_payload(bytes.substr(0, bytes.size() - 1)));
  CHECK_FALSE(read_barrier_payload(bytes + "x"));
  CHECK_FALSE(read_barrier_payload("short"));
}

TEST_CASE("a barrier that stops the job carries a flags byte; one without reads as not stopping", "[transport]") {
  std::string plain, stopping;
  write_barrier_payload(BarrierPayload{7, "/ck/chk-7", false}, plain);
  write_barrier_payload(BarrierPayload{7, "/ck/chk-7", true}, stopping);
  CHECK(stopping.size() == plain.size() + 1);
  auto a = read_barrier_payload(plain);
  auto b = read_barrier_payload(stopping);
  REQUIRE(a);
  REQUIRE(b);
  CHECK_FALSE(a->stops_job);
  CHECK(b->stops_job);
  CHECK(b->directory == "/ck/chk-7");
  CHECK_FALSE(read_barrier_payload(plain + '\x02')); // an unknown flag
  CHECK_FALSE(read_barrier_payload(stopping + '\x01'));
}
