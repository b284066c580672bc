// The codec registry (detail/codec/registry.hpp): every HDF5 filter id, kind and name in one
// table, and the public pack_codec's mapping onto it (pack/detail/codecs.hpp). A new codec adds
// its row there and its expected id and name here.
#include <doctest/doctest.h>

#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gpufeed/detail/codec/registry.hpp"
#include "gpufeed/detail/hdf5/chunk_decoders.hpp"
#include "gpufeed/pack/detail/codecs.hpp"
#include "gpufeed/pack/pack_codec.hpp"

namespace codec = gpufeed::detail::codec;
using codec::kind;
using gpufeed::pack_codec;

namespace {

constexpr kind all_kinds[] = {kind::none,       kind::deflate, kind::shuffle,
                              kind::fletcher32, kind::lz4,     kind::bitshuffle,
                              kind::blosc,      kind::zstd,    kind::other};
// all_kinds lists every value of the enum, in order (`other` is the last).
static_assert(std::size(all_kinds) == static_cast<std::size_t>(kind::other) + 1);

constexpr pack_codec all_pack_codecs[] = {pack_codec::none, pack_codec::deflate, pack_codec::lz4,
                                          pack_codec::zstd, pack_codec::bitshuffle_lz4};

}  // namespace

TEST_CASE("all_kinds is the enum in order") {
  for (std::size_t i = 0; i < std::size(all_kinds); ++i)
    CHECK(static_cast<std::size_t>(all_kinds[i]) == i);
}

TEST_CASE("every kind round-trips id -> kind -> name -> kind") {
  for (const kind k : all_kinds) {
    if (k == kind::other) continue;
    CAPTURE(static_cast<int>(k));
    const int id = codec::filter_id(k);
    CHECK(id >= 0);
    const kind back = codec::kind_of_filter(id);
    CHECK(back == k);
    const std::string name = codec::name_of(back);
    CHECK(!name.empty());
    CHECK(codec::kind_named(name) == k);
    CHECK(codec::identity_of(k).kind == k);
  }
  // `other` has no id and no row of its own.
  CHECK(codec::filter_id(kind::other) == -1);
  CHECK(std::string(codec::name_of(kind::other)) == "other");
  CHECK(codec::kind_named("other") == kind::other);
  CHECK(codec::kind_named("brotli") == kind::other);
  CHECK(codec::kind_named("") == kind::other);
}

TEST_CASE("the registry holds HDF5's ids and the plugins' registered ids, and gpufeed's names") {
  struct row {
    kind k;
    int id;
    const char* name;
  };
  const row want[] = {
      {kind::none, H5Z_FILTER_NONE, "none"},
      {kind::deflate, H5Z_FILTER_DEFLATE, "deflate"},
      {kind::shuffle, H5Z_FILTER_SHUFFLE, "shuffle"},
      {kind::fletcher32, H5Z_FILTER_FLETCHER32, "fletcher32"},
      {kind::lz4, 32004, "lz4"},
      {kind::bitshuffle, 32008, "bitshuffle"},
      {kind::blosc, 32001, "blosc"},
      {kind::zstd, 32015, "zstd"},
  };
  CHECK(std::size(want) + 1 == std::size(all_kinds));  // every kind but `other`
  for (const row& r : want) {
    CAPTURE(r.name);
    CHECK(codec::filter_id(r.k) == r.id);
    CHECK(std::string(codec::name_of(r.k)) == r.name);
  }
  // Bitshuffle's names with its compression, as the pipeline's description gives them.
  CHECK(std::string(codec::bitshuffle_name(codec::bitshuffle_mode::none)) == "bitshuffle");
  CHECK(std::string(codec::bitshuffle_name(codec::bitshuffle_mode::lz4)) == "bitshuffle(lz4)");
  CHECK(std::string(codec::bitshuffle_name(codec::bitshuffle_mode::zstd)) == "bitshuffle(zstd)");
  // HDF5's own filters gpufeed leaves to HDF5: kind `other`, named as messages name them.
  const std::pair<int, const char*> left[] = {{H5Z_FILTER_SZIP, "szip"},
                                              {H5Z_FILTER_NBIT, "nbit"},
                                              {H5Z_FILTER_SCALEOFFSET, "scaleoffset"}};
  for (const auto& [id, name] : left) {
    CAPTURE(name);
    CHECK(codec::kind_of_filter(id) == kind::other);
    REQUIRE(codec::filter_row(id) != nullptr);
    CHECK(std::string(codec::filter_row(id)->name) == name);
  }
}

TEST_CASE("unknown ids map to other") {
  // LZF, bzip2, LZO, Blosc2, JPEG, SZ, ... and ids nothing registers.
  for (const int id : {-1, 7, 255, 305, 307, 32000, 32002, 32005, 32013, 32017, 32026, 65535,
                       1 << 20}) {
    CAPTURE(id);
    CHECK(codec::kind_of_filter(id) == kind::other);
    CHECK(codec::filter_row(id) == nullptr);
  }
}

TEST_CASE("ids, names and kinds are unique") {
  std::set<int> ids;
  std::set<std::string> names;
  std::set<kind> kinds;
  for (const codec::identity& f : codec::filters) {
    CAPTURE(f.name);
    CHECK(ids.insert(f.filter_id).second);
    CHECK(names.insert(f.name).second);
    if (f.kind != kind::other) CHECK(kinds.insert(f.kind).second);
  }
  CHECK(kinds.size() + 1 == std::size(all_kinds));  // every kind but `other` has its row
  CHECK(codec::filters_are_unique());
}

TEST_CASE("pack_codec maps to the right filter id for every value") {
  struct row {
    pack_codec c;
    int id;
    kind k;
  };
  const row want[] = {
      {pack_codec::none, H5Z_FILTER_NONE, kind::none},
      {pack_codec::deflate, H5Z_FILTER_DEFLATE, kind::deflate},
      {pack_codec::lz4, 32004, kind::lz4},
      {pack_codec::zstd, 32015, kind::zstd},
      {pack_codec::bitshuffle_lz4, 32008, kind::bitshuffle},
  };
  CHECK(std::size(want) == std::size(all_pack_codecs));
  for (const row& r : want) {
    CAPTURE(static_cast<int>(r.c));
    CHECK(gpufeed::detail::pack::kind_of(r.c) == r.k);
    CHECK(codec::filter_id(gpufeed::detail::pack::kind_of(r.c)) == r.id);
  }
  // The --compress names (pack_codec.hpp) name these codecs.
  CHECK(gpufeed::parse_compression("none").codec == pack_codec::none);
  CHECK(gpufeed::parse_compression("deflate").codec == pack_codec::deflate);
  CHECK(gpufeed::parse_compression("gzip").codec == pack_codec::deflate);
  CHECK(gpufeed::parse_compression("lz4").codec == pack_codec::lz4);
  CHECK(gpufeed::parse_compression("zstd").codec == pack_codec::zstd);
  CHECK(gpufeed::parse_compression("bitshuffle-lz4").codec == pack_codec::bitshuffle_lz4);
}

TEST_CASE("every codec pack writes decodes back through the reader's decoder of its kind") {
  std::vector<std::byte> in(100003), out, back;
  for (std::size_t i = 0; i < in.size(); ++i)
    in[i] = static_cast<std::byte>((i / 4) % 5 == 0 ? (i * 7) % 251 : 0);
  in.resize(in.size() / 4 * 4);  // whole 4-byte elements
  for (const pack_codec c : all_pack_codecs) {
    CAPTURE(static_cast<int>(c));
    const gpufeed::detail::pack::chunk_codec cc{gpufeed::detail::pack::kind_of(c),
                                                gpufeed::default_level(c), 4};
    gpufeed::detail::pack::encode_chunk(cc, in, out);
    if (c == pack_codec::none) {
      CHECK(out == in);
      continue;
    }
    CHECK(out.size() < in.size());
    gpufeed::detail::hdf5::filter_step f;
    f.kind = cc.kind;
    f.element_size = 4;
    if (cc.kind == kind::bitshuffle) f.compression = codec::bitshuffle_mode::lz4;
    CHECK(gpufeed::detail::hdf5::compresses(f));
    back.assign(in.size(), std::byte{0xee});
    gpufeed::detail::hdf5::chunk_decoders decoders;
    const codec::result r = decoders.decode(f, out, back);
    CHECK_MESSAGE(r.ok, r.message);
    CHECK(back == in);
  }
}
