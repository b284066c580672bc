// Helpers for the pack tests: input trees of random files, whole-file reads, record read-back.
#pragma once

#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpufeed/source.hpp"

namespace gpufeed::test {

using bytes = std::vector<std::byte>;

// Deterministic pseudo-random bytes (splitmix64, 8 bytes per step: fast in debug builds too).
inline bytes random_bytes(std::size_t n, std::uint32_t seed) {
  bytes b(n);
  std::uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1ull);
  for (std::size_t i = 0; i < n; i += 8) {
    std::uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    std::memcpy(b.data() + i, &z, std::min<std::size_t>(8, n - i));
  }
  return b;
}

// Compressible content (for deflate tests): runs of a few byte values.
inline bytes patterned_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  bytes b(n);
  for (std::size_t i = 0; i < n;) {
    const auto v = static_cast<std::byte>(rng() % 4);
    const std::size_t run = 1 + rng() % 64;
    for (std::size_t k = 0; k < run && i < n; ++k) b[i++] = v;
  }
  return b;
}

inline void write_file(const std::filesystem::path& p, const bytes& b) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  if (!out) throw std::runtime_error("test: cannot write " + p.string());
}

inline void write_text(const std::filesystem::path& p, const std::string& s) {
  write_file(p, bytes(reinterpret_cast<const std::byte*>(s.data()),
                      reinterpret_cast<const std::byte*>(s.data()) + s.size()));
}

inline bytes read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("test: cannot read " + p.string());
  bytes b(static_cast<std::size_t>(std::filesystem::file_size(p)));
  in.read(reinterpret_cast<char*>(b.data()), static_cast<std::streamsize>(b.size()));
  if (!in) throw std::runtime_error("test: short read of " + p.string());
  return b;
}

inline std::string read_text(const std::filesystem::path& p) {
  const bytes b = read_file(p);
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

inline std::uint32_t crc_of(const bytes& b) {
  return static_cast<std::uint32_t>(
      ::crc32_z(0, reinterpret_cast<const Bytef*>(b.data()), static_cast<z_size_t>(b.size())));
}

// A tree of `count` files under root: classes c0..c{classes-1}, random sizes in [0, max_size]
// (every 7th file empty), random content. Returns the relative names.
inline std::vector<std::string> make_tree(const std::filesystem::path& root, std::size_t count,
                                          std::size_t max_size, std::size_t classes,
                                          std::uint32_t seed, bool compressible = false) {
  std::mt19937 rng(seed);
  std::vector<std::string> names;
  for (std::size_t i = 0; i < count; ++i) {
    const std::string name = "c" + std::to_string(i % classes) + "/f" + std::to_string(i) + ".bin";
    const std::size_t n = i % 7 == 3 ? 0 : rng() % (max_size + 1);
    const auto seed_i = static_cast<std::uint32_t>(seed * 7919u + i);
    write_file(root / name, compressible ? patterned_bytes(n, seed_i) : random_bytes(n, seed_i));
    names.push_back(name);
  }
  return names;
}

// Every record of a source, read through a per-thread reader.
template <class Source>
std::vector<bytes> read_all_records(const Source& s) {
  auto r = gpufeed::make_reader(s);
  std::vector<bytes> out;
  for (std::uint64_t i = 0; i < s.size(); ++i) {
    bytes b(s.record_size(i));
    r.read(i, std::span<std::byte>(b));
    out.push_back(std::move(b));
  }
  return out;
}

// Flips one byte of `file` at the first place `needle` occurs in it (CHECKed to occur).
inline bool flip_first(const std::filesystem::path& file, const bytes& needle) {
  bytes b = read_file(file);
  const auto it = std::search(b.begin(), b.end(), needle.begin(), needle.end());
  if (it == b.end()) return false;
  *(it + static_cast<std::ptrdiff_t>(needle.size() / 2)) ^= std::byte{0x5a};
  std::fstream f(file, std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(it - b.begin() + static_cast<std::ptrdiff_t>(needle.size() / 2));
  const char c = static_cast<char>(*(it + static_cast<std::ptrdiff_t>(needle.size() / 2)));
  f.write(&c, 1);
  return static_cast<bool>(f);
}

}  // namespace gpufeed::test
