/* gpufeed fault-injection shim: an LD_PRELOAD library over open/openat/close and
 * read/pread/pread64/preadv/preadv64 that makes the reads of ONE chosen file fail on purpose.
 *
 * Configuration (read at load, and again by gpufeed_fault_configure):
 *   GPUFEED_FAULT_PATH   substring of the path to fault (opens of other files are untouched)
 *   GPUFEED_FAULT_MODE   eio | short | eof | eintr
 *                          eio:   the call fails with EIO
 *                          short: the call reads (and returns) at most half of what was asked
 *                          eof:   the call returns 0, as at the end of the file
 *                          eintr: the call fails with EINTR, reading nothing
 *   GPUFEED_FAULT_AFTER  N: reads of the file before the first fault (default 0)
 *   GPUFEED_FAULT_EVERY  K: after the first, fault every K-th read (default 0: only once)
 * A read is one read/pread/pread64/preadv/preadv64 call on a descriptor opened (after configuration) on the
 * file. Test programs change the configuration at run time through
 *   void gpufeed_fault_configure(const char* path, const char* mode, long after, long every);
 *   long gpufeed_fault_injected(void);   -- faults injected since the last configure
 * found with dlsym(RTLD_DEFAULT, ...): absent means the shim is not loaded.
 *
 * mmap'd reads (LMDB data pages) are not seen by this shim. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

enum { mode_none, mode_eio, mode_short, mode_eof, mode_eintr };
#define MAX_FD 65536

static char fault_path[4096];
static atomic_int fault_mode;
static atomic_long fault_after, fault_every, fault_calls, fault_count;
static atomic_uchar tracked[MAX_FD];

static int parse_mode(const char* m) {
  if (!m) return mode_none;
  if (!strcmp(m, "eio")) return mode_eio;
  if (!strcmp(m, "short")) return mode_short;
  if (!strcmp(m, "eof")) return mode_eof;
  if (!strcmp(m, "eintr")) return mode_eintr;
  return mode_none;
}

void gpufeed_fault_configure(const char* path, const char* mode, long after, long every) {
  atomic_store(&fault_mode, mode_none);
  strncpy(fault_path, path ? path : "", sizeof fault_path - 1);
  atomic_store(&fault_after, after);
  atomic_store(&fault_every, every);
  atomic_store(&fault_calls, 0);
  atomic_store(&fault_count, 0);
  atomic_store(&fault_mode, fault_path[0] ? parse_mode(mode) : mode_none);
}

long gpufeed_fault_injected(void) { return atomic_load(&fault_count); }

__attribute__((constructor)) static void fault_init(void) {
  const char* a = getenv("GPUFEED_FAULT_AFTER");
  const char* k = getenv("GPUFEED_FAULT_EVERY");
  gpufeed_fault_configure(getenv("GPUFEED_FAULT_PATH"), getenv("GPUFEED_FAULT_MODE"),
                          a ? atol(a) : 0, k ? atol(k) : 0);
}

static void* next_fn(const char* name) { return dlsym(RTLD_NEXT, name); }

static void track(int fd, const char* path) {
  if (fd < 0 || fd >= MAX_FD) return;
  const int hit = path && fault_path[0] && strstr(path, fault_path) != NULL;
  atomic_store(&tracked[fd], (unsigned char)hit);
}

/* The fault to inject for this read of fd, or mode_none. */
static int fault_for(int fd) {
  const int m = atomic_load(&fault_mode);
  if (m == mode_none || fd < 0 || fd >= MAX_FD || !atomic_load(&tracked[fd])) return mode_none;
  const long n = atomic_fetch_add(&fault_calls, 1); /* reads before this one */
  const long after = atomic_load(&fault_after), every = atomic_load(&fault_every);
  if (n < after) return mode_none;
  if (n > after && (every <= 0 || (n - after) % every != 0)) return mode_none;
  atomic_fetch_add(&fault_count, 1);
  return m;
}

#define OPEN_BODY(real_name, ...)                                   \
  mode_t mode = 0;                                                  \
  if (flags & (O_CREAT | O_TMPFILE)) {                              \
    va_list ap;                                                     \
    va_start(ap, flags);                                            \
    mode = va_arg(ap, mode_t);                                      \
    va_end(ap);                                                     \
  }                                                                 \
  static int (*real)() = NULL;                                      \
  if (!real) real = (int (*)())next_fn(real_name);                  \
  const int fd = real(__VA_ARGS__, flags, mode);                    \
  track(fd, path);                                                  \
  return fd;

int open(const char* path, int flags, ...) { OPEN_BODY("open", path) }
int open64(const char* path, int flags, ...) { OPEN_BODY("open64", path) }
int openat(int dir, const char* path, int flags, ...) { OPEN_BODY("openat", dir, path) }
int openat64(int dir, const char* path, int flags, ...) { OPEN_BODY("openat64", dir, path) }

int close(int fd) {
  static int (*real)(int) = NULL;
  if (!real) real = (int (*)(int))next_fn("close");
  if (fd >= 0 && fd < MAX_FD) atomic_store(&tracked[fd], 0);
  return real(fd);
}

/* Applies fault m to a read of n bytes done by do_read(len); returns the call's result. */
#define READ_BODY(do_read)                                  \
  const int m = fault_for(fd);                              \
  if (m == mode_eio) {                                      \
    errno = EIO;                                            \
    return -1;                                              \
  }                                                         \
  if (m == mode_eintr) {                                    \
    errno = EINTR;                                          \
    return -1;                                              \
  }                                                         \
  if (m == mode_eof && n > 0) return 0;                     \
  if (m == mode_short && n > 1) n /= 2;                     \
  return do_read;

ssize_t read(int fd, void* buf, size_t n) {
  static ssize_t (*real)(int, void*, size_t) = NULL;
  if (!real) real = (ssize_t(*)(int, void*, size_t))next_fn("read");
  READ_BODY(real(fd, buf, n))
}

ssize_t pread(int fd, void* buf, size_t n, off_t at) {
  static ssize_t (*real)(int, void*, size_t, off_t) = NULL;
  if (!real) real = (ssize_t(*)(int, void*, size_t, off_t))next_fn("pread");
  READ_BODY(real(fd, buf, n, at))
}

ssize_t pread64(int fd, void* buf, size_t n, off_t at) {
  static ssize_t (*real)(int, void*, size_t, off_t) = NULL;
  if (!real) real = (ssize_t(*)(int, void*, size_t, off_t))next_fn("pread64");
  READ_BODY(real(fd, buf, n, at))
}

/* A vectored read is one read: n is its total length, and a short fault keeps the first half of
 * it (whole buffers, then part of the one the half falls in). */
#define MAX_IOV 1024
#define READV_BODY(real_name)                                                        \
  static ssize_t (*real)(int, const struct iovec*, int, off_t) = NULL;                \
  if (!real) real = (ssize_t(*)(int, const struct iovec*, int, off_t))next_fn(real_name); \
  size_t n = 0;                                                                      \
  for (int i = 0; i < cnt; ++i) n += iov[i].iov_len;                                 \
  const int m = fault_for(fd);                                                       \
  if (m == mode_eio) {                                                               \
    errno = EIO;                                                                     \
    return -1;                                                                       \
  }                                                                                  \
  if (m == mode_eintr) {                                                             \
    errno = EINTR;                                                                   \
    return -1;                                                                       \
  }                                                                                  \
  if (m == mode_eof && n > 0) return 0;                                              \
  if (m == mode_short && n > 1 && cnt > 0 && cnt <= MAX_IOV) {                       \
    struct iovec half[MAX_IOV];                                                      \
    size_t left = n / 2;                                                             \
    int k = 0;                                                                       \
    for (; k < cnt && left > 0; ++k) {                                               \
      half[k] = iov[k];                                                              \
      if (half[k].iov_len > left) half[k].iov_len = left;                            \
      left -= half[k].iov_len;                                                       \
    }                                                                                \
    return real(fd, half, k, at);                                                    \
  }                                                                                  \
  return real(fd, iov, cnt, at);

ssize_t preadv(int fd, const struct iovec* iov, int cnt, off_t at) { READV_BODY("preadv") }
ssize_t preadv64(int fd, const struct iovec* iov, int cnt, off_t at) { READV_BODY("preadv64") }
