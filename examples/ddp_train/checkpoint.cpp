#include "checkpoint.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "gpufeed/error.hpp"

namespace ddp {
namespace {

constexpr char magic[16] = "gpufeed-ddp-v1";

template <class T>
void put(std::ofstream& out, const T& v) {
  out.write(reinterpret_cast<const char*>(&v), sizeof v);
}
template <class T>
void put_vector(std::ofstream& out, const std::vector<T>& v) {
  put(out, static_cast<std::uint64_t>(v.size()));
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
}
template <class T>
T get(std::ifstream& in, const std::filesystem::path& file) {
  T v{};
  if (!in.read(reinterpret_cast<char*>(&v), sizeof v))
    throw gpufeed::corrupt_error("checkpoint is truncated", gpufeed::file_context(file.string()));
  return v;
}

// Bytes from the read position to the end of the file (the position is left where it was).
std::uint64_t bytes_left(std::ifstream& in, const std::filesystem::path& file) {
  const std::streampos at = in.tellg();
  in.seekg(0, std::ios::end);
  const std::streampos end = in.tellg();
  in.seekg(at);
  if (at < 0 || end < at || !in)
    throw gpufeed::io_error("cannot find the checkpoint's size", gpufeed::file_context(file.string()));
  return static_cast<std::uint64_t>(end - at);
}

// A length-prefixed array, field `field`. The declared length is checked against the bytes the
// file still holds before anything is allocated: a damaged or hostile length is a corrupt_error
// naming the file and field, never a 2^32-element zero-fill or a std::bad_alloc.
template <class T>
std::vector<T> get_vector(std::ifstream& in, const std::filesystem::path& file, const char* field) {
  const auto n = get<std::uint64_t>(in, file);
  const std::uint64_t left = bytes_left(in, file);
  if (n > left / sizeof(T))
    throw gpufeed::corrupt_error("checkpoint is truncated: its field '" + std::string(field) +
                                     "' declares " + std::to_string(n) + " entries of " +
                                     std::to_string(sizeof(T)) + " bytes, and " +
                                     std::to_string(left) + " bytes follow",
                                 gpufeed::file_context(file.string()));
  std::vector<T> v(static_cast<std::size_t>(n));
  if (!in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(T))))
    throw gpufeed::corrupt_error("checkpoint is truncated", gpufeed::file_context(file.string()));
  return v;
}

}  // namespace

void write_checkpoint(const std::filesystem::path& file, const checkpoint& c) {
  const std::filesystem::path tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      throw gpufeed::io_error("cannot write checkpoint", gpufeed::os_call_context(tmp.string(), "open", errno));
    out.write(magic, sizeof magic);
    // sampler_state's three fields, in declaration order, whatever their names.
    const auto& [seed, epoch, where] = c.state;
    for (std::uint64_t v : {seed, epoch, where, c.records, c.steps}) put(out, v);
    put_vector(out, c.parameters);
    put_vector(out, c.delivered);
    out.flush();
    if (!out) throw gpufeed::io_error("cannot write checkpoint", gpufeed::file_context(tmp.string()));
  }
  std::filesystem::rename(tmp, file);
}

checkpoint read_checkpoint(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw gpufeed::io_error("cannot open checkpoint", gpufeed::os_call_context(file.string(), "open", errno));
  char m[sizeof magic];
  if (!in.read(m, sizeof m) || std::memcmp(m, magic, sizeof m) != 0)
    throw gpufeed::format_error(std::string("not a ddp_train checkpoint (no '") + magic + "' header)",
                                gpufeed::file_context(file.string()));
  checkpoint c;
  auto& [seed, epoch, where] = c.state;
  seed = get<std::uint64_t>(in, file);
  epoch = get<std::uint64_t>(in, file);
  where = get<std::uint64_t>(in, file);
  c.records = get<std::uint64_t>(in, file);
  c.steps = get<std::uint64_t>(in, file);
  c.parameters = get_vector<float>(in, file, "parameters");
  c.delivered = get_vector<std::uint64_t>(in, file, "delivered");
  return c;
}

}  // namespace ddp
