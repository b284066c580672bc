// parse_datum / copy_datum_payload against values built by an independent encoder.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "gpufeed/datum.hpp"
#include "pb_writer.hpp"

using namespace gpufeed;
using gpufeed::test::pb_writer;

namespace {

std::span<const std::byte> bytes_of(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}
std::string str(std::span<const std::byte> s) {
  return std::string(reinterpret_cast<const char*>(s.data()), s.size());
}
std::string payload(const std::string& value) {
  const datum_view d = parse_datum(bytes_of(value));
  std::vector<std::byte> out(datum_payload_size(d) + 3, std::byte{0x5a});
  copy_datum_payload(bytes_of(value), d, out);
  for (std::size_t i = datum_payload_size(d); i < out.size(); ++i)
    CHECK(out[i] == std::byte{0x5a});  // nothing written past the payload
  return std::string(reinterpret_cast<const char*>(out.data()), datum_payload_size(d));
}

// The parser throws format_error with the Caffe message and the caller's context.
void check_rejected(const std::string& value, const std::string& why) {
  error_context where;
  where.file = "shard/data.mdb";
  where.record = 17;
  try {
    (void)parse_datum(bytes_of(value), where);
    FAIL("accepted a malformed Datum: " << why);
  } catch (const format_error& e) {
    CHECK(e.message().rfind("value is not a Caffe Datum: ", 0) == 0);
    CHECK_MESSAGE(e.message().find(why) != std::string::npos, e.message());
    CHECK(e.file() == "shard/data.mdb");
    CHECK(e.record() == 17u);
  }
}

}  // namespace

TEST_CASE("a Datum as Caffe writes it") {
  const std::string pixels = "\x01\x02\x03\x04\x05\x06";
  const std::string v = test::caffe_datum(3, 1, 2, pixels, 42);
  const datum_view d = parse_datum(bytes_of(v));
  CHECK(d.channels == 3);
  CHECK(d.height == 1);
  CHECK(d.width == 2);
  CHECK(d.label == 42);
  CHECK_FALSE(d.encoded);
  CHECK(str(d.data) == pixels);
  CHECK(d.data.data() >= bytes_of(v).data());  // a view into the value, not a copy
  CHECK(d.data.data() + d.data.size() <= bytes_of(v).data() + v.size());
  CHECK(d.float_data.empty());
  CHECK(d.float_count == 0);
  CHECK(datum_payload_size(d) == 6);
  CHECK(payload(v) == pixels);
}

TEST_CASE("encoded images, negative and large labels, last value wins") {
  const std::string jpeg = "\xff\xd8\xff\xe0 fake jpeg";
  const std::string value = test::caffe_datum(3, 224, 224, jpeg, -7, true);
  const datum_view d = parse_datum(bytes_of(value));
  CHECK(d.encoded);
  CHECK(d.label == -7);  // a 10-byte varint
  CHECK(str(d.data) == jpeg);

  pb_writer p;
  p.int32(5, 1).bytes(4, "first").int32(5, 2147483647).bytes(4, "second").boolean(7, true)
      .boolean(7, false);
  const datum_view e = parse_datum(bytes_of(p.str()));
  CHECK(e.label == 2147483647);
  CHECK(str(e.data) == "second");
  CHECK_FALSE(e.encoded);
}

TEST_CASE("fields in any order, with unknown fields of every wire type") {
  pb_writer inner;
  inner.int32(1, 5).bytes(2, "nested").fixed32(3, 9);
  pb_writer nested_group;
  nested_group.int32(1, 1).group(2, inner.str()).fixed64(3, 7);
  pb_writer p;
  p.bytes(4, "DATA")
      .fixed64(100, 0x0123456789abcdefULL)
      .int32(5, 9)
      .bytes(12, std::string(300, 'u'))  // two-byte length
      .fixed32(8, 77)
      .int32(536870911, -1)  // the largest field number
      .group(9, nested_group.str())
      .int32(3, 4)
      .int32(2, 5)
      .int32(1, 6);
  const datum_view d = parse_datum(bytes_of(p.str()));
  CHECK(str(d.data) == "DATA");
  CHECK(d.label == 9);
  CHECK(d.channels == 6);
  CHECK(d.height == 5);
  CHECK(d.width == 4);
  CHECK(payload(p.str()) == "DATA");
}

TEST_CASE("float_data: packed, unpacked, mixed, and data taking precedence") {
  const std::vector<float> fs = {1.5f, -2.25f, 3.0e10f, 0.0f, 7.0f};
  const std::string fb = pb_writer::float_bytes(fs);

  SUBCASE("packed: one contiguous span") {
    pb_writer p;
    p.int32(1, 1).int32(2, 1).int32(3, 5).floats_packed(6, fs).int32(5, 3);
    const datum_view d = parse_datum(bytes_of(p.str()));
    CHECK(d.float_count == 5);
    CHECK_FALSE(d.float_data_split());
    CHECK(str(d.float_data) == fb);
    CHECK(d.label == 3);
    CHECK(payload(p.str()) == fb);
  }
  SUBCASE("unpacked: gathered element by element") {
    pb_writer p;
    p.int32(5, 4);
    for (float f : fs) p.float_unpacked(6, f).int32(99, 1);  // unknown fields in between
    const datum_view d = parse_datum(bytes_of(p.str()));
    CHECK(d.float_count == 5);
    CHECK(d.float_data_split());
    CHECK(d.float_data.empty());
    CHECK(payload(p.str()) == fb);
  }
  SUBCASE("one unpacked element is contiguous") {
    pb_writer p;
    p.float_unpacked(6, 1.5f);
    const datum_view d = parse_datum(bytes_of(p.str()));
    CHECK_FALSE(d.float_data_split());
    CHECK(payload(p.str()) == pb_writer::float_bytes({1.5f}));
  }
  SUBCASE("packed runs and unpacked elements mixed, in message order") {
    pb_writer p;
    p.floats_packed(6, {fs[0], fs[1]}).float_unpacked(6, fs[2]).floats_packed(6, {})
        .floats_packed(6, {fs[3], fs[4]});
    const datum_view d = parse_datum(bytes_of(p.str()));
    CHECK(d.float_count == 5);
    CHECK(d.float_data_split());
    CHECK(payload(p.str()) == fb);
  }
  SUBCASE("non-empty data wins over float_data; empty data does not") {
    pb_writer p;
    p.floats_packed(6, fs).bytes(4, "px");
    CHECK(payload(p.str()) == "px");
    pb_writer q;
    q.bytes(4, "").floats_packed(6, fs);
    CHECK(payload(q.str()) == fb);
  }
}

TEST_CASE("empty values and empty payloads") {
  const datum_view d = parse_datum({});
  CHECK(d.label == 0);
  CHECK(datum_payload_size(d) == 0);
  CHECK(payload("") == "");
  pb_writer p;
  p.int32(5, 8).bytes(4, "");
  CHECK(parse_datum(bytes_of(p.str())).label == 8);
  CHECK(payload(p.str()) == "");
}

TEST_CASE("malformed values are format_error with the caller's context") {
  check_rejected("\x08", "truncated varint");
  check_rejected("\x08\x80\x80", "truncated varint");
  check_rejected(std::string("\x08") + std::string(10, '\x80') + "\x01", "longer than 10 bytes");
  check_rejected("\x22\x05" "abc", "length past the end");
  check_rejected("\x22\x80", "truncated varint");  // the length itself
  check_rejected("\x22\xff\xff\xff\xff\x0f", "length past the end");
  check_rejected(pb_writer().bytes(1, "x").str(), "field 1 (channels) has wire type length-delimited");
  check_rejected(pb_writer().int32(4, 1).str(), "field 4 (data) has wire type varint");
  check_rejected(pb_writer().fixed32(5, 1).str(), "field 5 (label) has wire type fixed32");
  check_rejected(pb_writer().fixed64(6, 1).str(), "field 6 (float_data) has wire type fixed64");
  check_rejected(pb_writer().fixed32(7, 1).str(), "field 7 (encoded) has wire type fixed32");
  check_rejected(pb_writer().group(2, "").str(), "field 2 (height) has wire type start-group");
  check_rejected(pb_writer().bytes(6, "abcde").str(), "not a multiple of 4");
  check_rejected("\x35\x00\x00", "truncated fixed-width");
  check_rejected("\x41\x00\x00\x00", "truncated fixed-width");  // unknown fixed64 field 8
  check_rejected(std::string(1, '\0'), "field number 0");
  check_rejected("\x0e", "invalid wire type");
  check_rejected("\x0f", "invalid wire type");
  check_rejected(pb_writer().key(9, 4).str(), "end-group without a start-group");
  check_rejected(pb_writer().key(9, 3).int32(1, 1).str(), "unterminated group");
  check_rejected(pb_writer().key(9, 3).key(10, 4).str(), "does not match");
  check_rejected("\xff\xff\xff\xff\x7f", "does not fit 32 bits");
  std::string deep;
  for (int i = 0; i < 70; ++i) deep += pb_writer().key(9, 3).str();
  check_rejected(deep, "nested too deeply");
}

TEST_CASE("every prefix of a valid Datum parses or is rejected, never more") {
  pb_writer p;
  p.int32(1, 3).int32(2, -1).bytes(4, std::string(200, 'x')).float_unpacked(6, 2.0f)
      .group(20, pb_writer().bytes(1, "g").str()).int32(5, 1000000);
  const std::string v = p.str();
  for (std::size_t n = 0; n <= v.size(); ++n) {
    const std::string prefix = v.substr(0, n);
    try {
      const datum_view d = parse_datum(bytes_of(prefix));
      std::vector<std::byte> out(datum_payload_size(d));
      copy_datum_payload(bytes_of(prefix), d, out);
    } catch (const format_error&) {
    }
  }
}

TEST_CASE("copy_datum_payload refuses a destination that is too small") {
  const std::string v = test::caffe_datum(1, 1, 4, "abcd", 0);
  const datum_view d = parse_datum(bytes_of(v));
  std::vector<std::byte> small(3);
  error_context where;
  where.record = 5;
  CHECK_THROWS_AS(copy_datum_payload(bytes_of(v), d, small, where), config_error);
  try {
    copy_datum_payload(bytes_of(v), d, small, where);
  } catch (const config_error& e) {
    CHECK(e.record() == 5u);
  }
}
