#include <fcntl.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
int main(int, char** argv) {
  int fd = open(argv[1], O_RDONLY);
  for (int r = 0; r < 5; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int u = 0; u < 128; ++u) posix_fadvise(fd, (off_t)u << 20, 1 << 20, POSIX_FADV_WILLNEED);
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    std::printf("128 x 1 MiB WILLNEED: %.0f us\n", us);
  }
}
