// gpufeed — Caffe Datum messages, read without libprotobuf.
//
// A Caffe LMDB stores one `caffe.Datum` per record:
//   message Datum { optional int32 channels = 1; optional int32 height = 2; optional int32 width = 3;
//                   optional bytes data = 4; optional int32 label = 5;
//                   repeated float float_data = 6; optional bool encoded = 7; }
// parse_datum() walks the protobuf wire format once and returns views into the value; it never
// copies, allocates or reads outside the value. Protobuf rules apply: fields may come in any
// order, a repeated non-repeated field keeps its last value, unknown fields (groups included) are
// skipped by wire type, and float_data may be packed (wire type 2), unpacked (wire type 5, one
// field per element) or a mix of both.
//
// The payload gpufeed delivers for a Datum follows Caffe's own rule (DataTransformer): `data`
// when it is non-empty — pixels, or an encoded JPEG/PNG delivered as-is when `encoded` is set —
// otherwise the float_data elements as raw little-endian IEEE floats, 4 bytes each. An encoded
// Datum (Caffe's convert_imageset --encoded: the image file's bytes, the label, no dimensions)
// thus delivers the JPEG/PNG file, which gpufeed/image/record_transforms.hpp decodes and crops
// in the loader's workers. When the
// floats sit in one field their bytes are `float_data`; when they are spread over several fields
// (unpacked, or several packed runs) they cannot be one span: `float_data` is then empty,
// float_count still counts them, and copy_datum_payload() gathers them element by element.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "gpufeed/detail/protobuf_wire.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed {

// Fields of a parsed Caffe Datum; the spans point into the parsed value.
struct datum_view {
  std::int32_t channels = 0, height = 0, width = 0, label = 0;
  bool encoded = false;                   // data holds an encoded image (JPEG/PNG): delivered as-is
  std::span<const std::byte> data;        // field 4 (bytes)
  std::span<const std::byte> float_data;  // field 6 when its elements are contiguous (see above)
  std::uint64_t float_count = 0;          // float_data elements over every field-6 occurrence

  // float_data elements are spread over several fields and must be gathered.
  [[nodiscard]] bool float_data_split() const noexcept {
    return float_count * 4 != float_data.size();
  }
};

namespace detail::datum {

enum field : std::uint32_t {
  channels = 1, height = 2, width = 3, data = 4, label = 5, float_data = 6, encoded = 7
};

[[noreturn]] inline void fail(const char* why, const error_context& where) {
  throw format_error(std::string("value is not a Caffe Datum: ") + why, where);
}

inline const char* wire_name(pb::wire_type t) noexcept {
  switch (t) {
    case pb::wire_type::varint: return "varint";
    case pb::wire_type::fixed64: return "fixed64";
    case pb::wire_type::length: return "length-delimited";
    case pb::wire_type::start_group: return "start-group";
    case pb::wire_type::end_group: return "end-group";
    case pb::wire_type::fixed32: return "fixed32";
  }
  return "?";
}

[[noreturn]] inline void wrong_type(std::uint32_t field, pb::wire_type t,
                                    const error_context& where) {
  static const char* const names[] = {"", "channels", "height", "width", "data",
                                      "label", "float_data", "encoded"};
  throw format_error(std::string("value is not a Caffe Datum: field ") + std::to_string(field) +
                         " (" + names[field] + ") has wire type " + wire_name(t),
                     where);
}

// Copies every float_data element of `value`, in message order, to dst; returns the bytes written.
// Writes at most dst.size() bytes: more elements than that is an error (the value is not the one
// whose count the caller planned for).
inline std::size_t gather_floats(std::span<const std::byte> value, std::span<std::byte> dst,
                                 const error_context& where) {
  pb::wire_reader r(value);
  std::size_t out = 0;
  auto put = [&](std::span<const std::byte> s) {
    if (s.size() > dst.size() - out) fail("more float_data than expected", where);
    if (!s.empty()) std::memcpy(dst.data() + out, s.data(), s.size());
    out += s.size();
  };
  while (!r.done()) {
    std::uint32_t f = 0;
    pb::wire_type t{};
    std::span<const std::byte> s;
    if (!r.tag(f, t)) fail(r.why(), where);
    if (f == field::float_data && t == pb::wire_type::length) {
      if (!r.length_delimited(s)) fail(r.why(), where);
      if (s.size() % 4 != 0) fail("packed float_data length is not a multiple of 4", where);
      put(s);
    } else if (f == field::float_data && t == pb::wire_type::fixed32) {
      if (!r.bytes(4, s)) fail(r.why(), where);
      put(s);
    } else if (!r.skip(f, t)) {
      fail(r.why(), where);
    }
  }
  return out;
}

}  // namespace detail::datum

// Parses a Caffe Datum. Throws format_error ("value is not a Caffe Datum: <why>") carrying
// `where` (file/record) on any malformed input: truncated varint, length past the end, wrong wire
// type for a known field, packed float_data whose length is not a multiple of 4, a bad group.
inline datum_view parse_datum(std::span<const std::byte> value, const error_context& where = {}) {
  namespace d = detail::datum;
  using detail::pb::wire_type;
  datum_view v;
  detail::pb::wire_reader r(value);
  std::size_t float_runs = 0;  // field-6 occurrences that hold at least one element
  while (!r.done()) {
    std::uint32_t f = 0;
    wire_type t{};
    if (!r.tag(f, t)) d::fail(r.why(), where);
    std::uint64_t n = 0;
    std::span<const std::byte> s;
    switch (f) {
      case d::channels:
      case d::height:
      case d::width:
      case d::label:
      case d::encoded: {
        if (t != wire_type::varint) d::wrong_type(f, t, where);
        if (!r.varint(n)) d::fail(r.why(), where);
        // int32 fields: protobuf keeps the low 32 bits (negative values are sign-extended to 64).
        const auto i32 = static_cast<std::int32_t>(static_cast<std::uint32_t>(n));
        if (f == d::channels) v.channels = i32;
        if (f == d::height) v.height = i32;
        if (f == d::width) v.width = i32;
        if (f == d::label) v.label = i32;
        if (f == d::encoded) v.encoded = n != 0;
        break;
      }
      case d::data:
        if (t != wire_type::length) d::wrong_type(f, t, where);
        if (!r.length_delimited(s)) d::fail(r.why(), where);
        v.data = s;
        break;
      case d::float_data:
        if (t == wire_type::length) {
          if (!r.length_delimited(s)) d::fail(r.why(), where);
          if (s.size() % 4 != 0) d::fail("packed float_data length is not a multiple of 4", where);
        } else if (t == wire_type::fixed32) {
          if (!r.bytes(4, s)) d::fail(r.why(), where);
        } else {
          d::wrong_type(f, t, where);
        }
        if (!s.empty()) {
          v.float_count += s.size() / 4;
          if (float_runs++ == 0) v.float_data = s;
        }
        break;
      default:
        if (!r.skip(f, t)) d::fail(r.why(), where);
    }
  }
  if (float_runs > 1) v.float_data = {};
  return v;
}

// Bytes gpufeed delivers for this Datum: `data` when non-empty, else 4 * float_count.
[[nodiscard]] inline std::size_t datum_payload_size(const datum_view& d) noexcept {
  return !d.data.empty() ? d.data.size() : static_cast<std::size_t>(d.float_count * 4);
}

// Writes the payload (see above) to dst.data(). `value` must be the bytes `d` was parsed from;
// dst.size() >= datum_payload_size(d) or it throws config_error. Split float_data is gathered by
// walking `value` again; a value that no longer matches `d` throws format_error.
inline void copy_datum_payload(std::span<const std::byte> value, const datum_view& d,
                               std::span<std::byte> dst, const error_context& where = {}) {
  const std::size_t n = datum_payload_size(d);
  if (dst.size() < n)
    throw config_error("destination of " + std::to_string(dst.size()) +
                           " bytes is smaller than the Datum payload of " + std::to_string(n),
                       where);
  if (n == 0) return;
  if (!d.data.empty()) {
    std::memcpy(dst.data(), d.data.data(), n);
  } else if (!d.float_data_split()) {
    std::memcpy(dst.data(), d.float_data.data(), n);
  } else if (detail::datum::gather_floats(value, dst.first(n), where) != n) {
    detail::datum::fail("fewer float_data elements than parsed", where);
  }
}

}  // namespace gpufeed
