// gpufeed::detail::record_space — when a source opens its shards: every one at construction
// (eager), or the first at construction and every other on first use of one of its records
// (lazy). The public options (hdf5_options::open, lmdb_options::open) name the same two.
#pragma once

namespace gpufeed::detail::record_space {

enum class open_kind { eager, lazy };

// A source option's open kind (any enum with an `eager` value) as the record space's.
template <class Option>
constexpr open_kind open_kind_of(Option o) noexcept {
  return o == Option::eager ? open_kind::eager : open_kind::lazy;
}

}  // namespace gpufeed::detail::record_space
