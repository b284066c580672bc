// make_photo_set: the image bench's photo set from a few real photographs (Debian scikit-image's,
// bench/photos/get_skimage_photos.sh). Each output is a random crop of one source (30-100 % of
// its area, aspect 3/4-4/3 around the source's), resized so its longer side is 300-640 pixels
// (ImageNet's photos average about 400 x 350), and JPEG-encoded at quality 75-95: 4:2:0 colour,
// grayscale sources as grayscale JPEGs, one in ten progressive. Class folders are the sources'
// names, as torchvision's ImageFolder and `gpufeed pack --labels` expect.
//
//   make_photo_set SRC_DIR OUT_DIR [COUNT=3000] [SEED=1] [THREADS=0 (all cores)]
//
// Deterministic: file i depends on (SEED, i) only, whatever the thread count.
#include <turbojpeg.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpufeed/image/augment.hpp"
#include "gpufeed/image/decoder.hpp"

namespace fs = std::filesystem;
using namespace gpufeed::image;

namespace {
struct source {
  std::string name;
  rgb_image pixels;
  bool gray = false;
};

std::vector<std::byte> read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::byte> b(c.size());
  std::transform(c.begin(), c.end(), b.begin(), [](char x) { return static_cast<std::byte>(x); });
  return b;
}

bool is_gray(rgb_image& im) {
  const auto v = im.view();
  for (int y = 0; y < v.height; y += 7)
    for (int x = 0; x < v.width; x += 7) {
      const std::uint8_t* p = v.row(y) + x * 3;
      if (p[0] != p[1] || p[1] != p[2]) return false;
    }
  return true;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: make_photo_set SRC_DIR OUT_DIR [COUNT] [SEED] [THREADS]\n");
    return 2;
  }
  const fs::path src_dir = argv[1], out_dir = argv[2];
  const long count = argc > 3 ? std::stol(argv[3]) : 3000;
  const unsigned long seed = argc > 4 ? std::stoul(argv[4]) : 1;
  unsigned threads = argc > 5 ? static_cast<unsigned>(std::stoul(argv[5])) : 0;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  try {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(src_dir))
      if (e.path().extension() == ".png" || e.path().extension() == ".jpg") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    if (files.empty()) throw std::runtime_error("no .png or .jpg files in " + src_dir.string());
    std::vector<source> sources;
    image_decoder dec;
    for (const auto& f : files) {
      source s;
      s.name = f.stem().string();
      const auto bytes = read_file(f);
      dec.decode(bytes, s.pixels, gpufeed::file_context(f.string()));
      s.gray = is_gray(s.pixels);
      fs::create_directories(out_dir / s.name);
      sources.push_back(std::move(s));
    }
    std::atomic<long> next{0};
    std::atomic<unsigned long long> total{0};
    auto work = [&] {
      // One handle for baseline, one for progressive: libjpeg-turbo 2.1.5's TurboJPEG writes
      // corrupt baseline JPEGs (bad Huffman codes) with a handle that compressed a progressive
      // one before (found here: djpeg refused most files of a run that shared one handle).
      tjhandle tj_base = tjInitCompress(), tj_prog = tjInitCompress();
      resampler rs;
      rgb_image out;
      for (long i; (i = next.fetch_add(1)) < count;) {
        std::mt19937_64 g(seed * 1000003ull + static_cast<unsigned long long>(i));
        source& s = sources[static_cast<std::size_t>(i) % sources.size()];
        const int sw = s.pixels.width(), sh = s.pixels.height();
        const double area = std::uniform_real_distribution<double>(0.3, 1.0)(g) * sw * sh;
        const double aspect = double(sw) / sh *
                              std::exp(std::uniform_real_distribution<double>(std::log(0.75), std::log(4.0 / 3))(g));
        const double bw = std::min<double>(sw, std::sqrt(area * aspect));
        const double bh = std::min<double>(sh, std::sqrt(area / aspect));
        const double bx = std::uniform_real_distribution<double>(0, sw - bw)(g);
        const double by = std::uniform_real_distribution<double>(0, sh - bh)(g);
        const int longer = std::uniform_int_distribution<int>(300, 640)(g);
        const int ow = bw >= bh ? longer : std::max(1, static_cast<int>(longer * bw / bh));
        const int oh = bw >= bh ? std::max(1, static_cast<int>(longer * bh / bw)) : longer;
        out.reshape(ow, oh, 3);
        resize_box(s.pixels.view(), {bx, by, bw, bh}, out.view(), rs);
        const int quality = std::uniform_int_distribution<int>(75, 95)(g);
        const bool progressive = std::uniform_int_distribution<int>(0, 9)(g) == 0;
        unsigned char* jpeg = nullptr;
        unsigned long size = 0;
        tjhandle tj = progressive ? tj_prog : tj_base;
        if (tjCompress2(tj, out.data(), ow, 0, oh, TJPF_RGB, &jpeg, &size,
                        s.gray ? TJSAMP_GRAY : TJSAMP_420, quality,
                        progressive ? TJFLAG_PROGRESSIVE : 0) != 0) {
          std::fprintf(stderr, "tjCompress2: %s\n", tjGetErrorStr2(tj));
          std::exit(1);
        }
        char name[32];
        std::snprintf(name, sizeof name, "%06ld.jpg", i);
        std::ofstream(out_dir / s.name / name, std::ios::binary)
            .write(reinterpret_cast<const char*>(jpeg), static_cast<std::streamsize>(size));
        total += size;
        tjFree(jpeg);
      }
      tjDestroy(tj_base);
      tjDestroy(tj_prog);
    };
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) pool.emplace_back(work);
    for (auto& t : pool) t.join();
    std::printf("make_photo_set: %ld JPEGs in %zu classes under %s, %.1f MB (%.0f KB each)\n", count,
                sources.size(), out_dir.c_str(), double(total) / 1e6,
                double(total) / 1e3 / double(std::max(1L, count)));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_photo_set: %s\n", e.what());
    return 1;
  }
  return 0;
}
