// Test images made at test time: a synthetic picture written as PPM, encoded by cjpeg (or
// TurboJPEG's compressor for CMYK), and djpeg's decode of a file read back as the reference.
// GPUFEED_CJPEG / GPUFEED_DJPEG are the programs' paths (tests/image/CMakeLists.txt).
#pragma once

#include <turbojpeg.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpufeed::test {

struct pixels {
  int width = 0, height = 0, channels = 3;
  std::vector<std::uint8_t> data;  // packed rows
};

// Smooth gradients, a few hard edges and seeded noise: enough detail that a wrong scale,
// upsampling or colour conversion changes many pixels.
inline pixels synthetic_picture(int width, int height, int channels = 3, unsigned seed = 1) {
  pixels p{width, height, channels, {}};
  p.data.resize(static_cast<std::size_t>(width) * height * channels);
  unsigned s = seed * 2654435761u + 1;
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < channels; ++c) {
        s = s * 1664525u + 1013904223u;
        int v = (x * (2 + c) + y * (3 - c % 3)) % 256;
        if ((x / 17 + y / 23) % 3 == 0) v = 255 - v;
        v += static_cast<int>((s >> 24) % 24) - 12;
        p.data[(static_cast<std::size_t>(y) * width + x) * channels + c] =
            static_cast<std::uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
      }
  return p;
}

inline void write_pnm(const std::filesystem::path& path, const pixels& p) {
  std::ofstream f(path, std::ios::binary);
  f << (p.channels == 1 ? "P5" : "P6") << "\n" << p.width << " " << p.height << "\n255\n";
  f.write(reinterpret_cast<const char*>(p.data.data()), static_cast<std::streamsize>(p.data.size()));
}

// Reads a binary PPM (P6) or PGM (P5) as djpeg writes it.
inline pixels read_pnm(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::string magic;
  int maxval = 0;
  pixels p;
  f >> magic >> p.width >> p.height >> maxval;
  f.get();
  if (!f || (magic != "P6" && magic != "P5") || maxval != 255)
    throw std::runtime_error("not a binary 8-bit PPM/PGM: " + path.string());
  p.channels = magic == "P6" ? 3 : 1;
  p.data.resize(static_cast<std::size_t>(p.width) * p.height * p.channels);
  f.read(reinterpret_cast<char*>(p.data.data()), static_cast<std::streamsize>(p.data.size()));
  if (!f) throw std::runtime_error("short PPM/PGM: " + path.string());
  return p;
}

inline std::vector<std::byte> read_bytes(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::byte> b(c.size());
  for (std::size_t i = 0; i < c.size(); ++i) b[i] = static_cast<std::byte>(c[i]);
  return b;
}

inline void write_bytes(const std::filesystem::path& path, const std::vector<std::byte>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

inline void run(const std::string& cmd) {
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("command failed: " + cmd);
}

// cjpeg `options` of picture p; returns the JPEG's bytes.
inline std::vector<std::byte> cjpeg(const std::filesystem::path& dir, const pixels& p,
                                    const std::string& options, const std::string& name) {
  const auto in = dir / (name + (p.channels == 1 ? ".pgm" : ".ppm"));
  const auto out = dir / (name + ".jpg");
  write_pnm(in, p);
  run(std::string(GPUFEED_CJPEG) + " " + options + " -outfile '" + out.string() + "' '" +
      in.string() + "'");
  return read_bytes(out);
}

// djpeg -scale 1/denom of `jpeg`: the reference decode (PPM, or PGM for grayscale).
inline pixels djpeg(const std::filesystem::path& dir, const std::vector<std::byte>& jpeg,
                    int denom, const std::string& name) {
  const auto in = dir / (name + ".ref.jpg");
  const auto out = dir / (name + ".ref.pnm");
  write_bytes(in, jpeg);
  run(std::string(GPUFEED_DJPEG) + " -scale 1/" + std::to_string(denom) + " -pnm -outfile '" +
      out.string() + "' '" + in.string() + "'");
  return read_pnm(out);
}

// A CMYK JPEG (Adobe marker, YCCK) from 4-channel pixels, through TurboJPEG's compressor: cjpeg
// takes no CMYK input.
inline std::vector<std::byte> cmyk_jpeg(const pixels& p, int quality = 90) {
  tjhandle h = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  const int rc = tjCompress2(h, p.data.data(), p.width, 0, p.height, TJPF_CMYK, &buf, &size,
                             TJSAMP_444, quality, 0);
  std::vector<std::byte> out;
  if (rc == 0) {
    out.resize(size);
    for (unsigned long i = 0; i < size; ++i) out[i] = static_cast<std::byte>(buf[i]);
  }
  tjFree(buf);
  tjDestroy(h);
  if (rc != 0) throw std::runtime_error("tjCompress2 (CMYK) failed");
  return out;
}

// Frame headers libjpeg refuses in jpeg_read_header (TurboJPEG then leaves its handle inside
// the refused stream): the SOF segment of a baseline JPEG edited in place.
enum class bad_frame { precision_12, lossless, zero_width, zero_height, too_high };

inline std::vector<std::byte> with_bad_frame(std::vector<std::byte> jpeg, bad_frame what) {
  std::size_t at = 2;  // after SOI: walk the marker segments to the SOF
  while (at + 9 < jpeg.size()) {
    if (jpeg[at] != std::byte{0xFF}) throw std::runtime_error("with_bad_frame: not a marker");
    const auto marker = static_cast<unsigned>(jpeg[at + 1]);
    if (marker == 0xC0 || marker == 0xC1 || marker == 0xC2) break;
    at += 2 + (static_cast<std::size_t>(jpeg[at + 2]) << 8 | static_cast<std::size_t>(jpeg[at + 3]));
  }
  if (at + 9 >= jpeg.size()) throw std::runtime_error("with_bad_frame: no SOF marker");
  // FF Cn, length (2), precision (1), height (2), width (2), components ...
  switch (what) {
    case bad_frame::precision_12:  // extended sequential, 12-bit: what cjpeg -precision 12 writes
      jpeg[at + 1] = std::byte{0xC1};
      jpeg[at + 4] = std::byte{12};
      break;
    case bad_frame::lossless:
      jpeg[at + 1] = std::byte{0xC3};
      break;
    case bad_frame::zero_width:
      jpeg[at + 7] = jpeg[at + 8] = std::byte{0};
      break;
    case bad_frame::zero_height:
      jpeg[at + 5] = jpeg[at + 6] = std::byte{0};
      break;
    case bad_frame::too_high:  // 65,535 rows: over libjpeg's JPEG_MAX_DIMENSION (65,500)
      jpeg[at + 5] = jpeg[at + 6] = std::byte{0xFF};
      break;
  }
  return jpeg;
}

}  // namespace gpufeed::test
