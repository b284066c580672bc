#include "checkpoint.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>

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
template <class T>
std::vector<T> get_vector(std::ifstream& in, const std::filesystem::path& file) {
  const auto n = get<std::uint64_t>(in, file);
  if (n > (1ull << 32))
    throw gpufeed::corrupt_error("checkpoint holds a bad length", gpufeed::file_context(file.string()));
  std::vector<T> v(n);
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
  c.parameters = get_vector<float>(in, file);
  c.delivered = get_vector<std::uint64_t>(in, file);
  return c;
}

}  // namespace ddp
