// JPEG encoding through TurboJPEG's own API, for the GPU tests: the GPU machine has the library
// (bundled) but not the cjpeg / djpeg programs the host tests use.
#pragma once

#include <turbojpeg.h>

#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "image_test_util.hpp"

namespace gpufeed::test {

// `p` (RGB or gray) as a JPEG of `quality` with chroma `sampling` (TJSAMP_*) and `flags`
// (TJFLAG_PROGRESSIVE, ...).
inline std::vector<std::byte> tj_encode(const pixels& p, int sampling, int flags = 0, int quality = 90) {
  tjhandle h = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  const int rc = tjCompress2(h, p.data.data(), p.width, 0, p.height,
                             p.channels == 1 ? TJPF_GRAY : TJPF_RGB, &buf, &size, sampling, quality, flags);
  std::vector<std::byte> out(rc == 0 ? size : 0);
  if (rc == 0) std::memcpy(out.data(), buf, size);
  tjFree(buf);
  tjDestroy(h);
  if (rc != 0) throw std::runtime_error("tjCompress2 failed");
  return out;
}

}  // namespace gpufeed::test
