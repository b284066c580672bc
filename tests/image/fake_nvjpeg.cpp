// A stand-in for libnvjpeg.so.13 with every entry point gpufeed resolves, so the run-time loading
// of nvJPEG (detail/image/nvjpeg_library.hpp), its handle owners and the capability probe run on
// machines without nvJPEG or a GPU. Loaded through GPUFEED_NVJPEG_LIBRARY. Its answers come from
// environment variables read at each call, so one test program can vary them:
//   GPUFEED_FAKE_NVJPEG_VERSION   "major.minor.patch" nvjpegGetProperty reports (default 13.0.1)
//   GPUFEED_FAKE_NVJPEG_PROPERTY  nvjpegGetProperty's status (default 0 = success)
//   GPUFEED_FAKE_NVJPEG_CREATE    "backend:status,..." nvjpegCreateEx's status per backend number
//                                 (default: success for every backend)
//   GPUFEED_FAKE_NVJPEG_ENGINES   "engines,cores" nvjpegGetHardwareDecoderInfo reports on a
//                                 hardware handle (default "7,1"; other backends report 0,0)
//   GPUFEED_FAKE_NVJPEG_STATE     nvjpegJpegStateCreate's status (default 0)
// nvjpegGetImageInfo answers like the real library for what the tests give it: fewer than 4
// bytes after an SOI marker is NVJPEG_STATUS_INCOMPLETE_BITSTREAM, no SOI marker is
// NVJPEG_STATUS_BAD_JPEG, else a 3-component 4:2:0 image of 16 x 16 — unless the bytes are a
// fake header (the batch planner's tests): FF D8 'G' 'F', width and height (4 bytes each, big
// endian), components, subsampling (signed), flags (bit 0: the hardware decoder does not take
// it; bit 1: nvjpegGetImageInfo answers NVJPEG_STATUS_JPEG_NOT_SUPPORTED). nvjpegJpegStreamParse
// keeps those flags and nvjpegDecodeBatchedSupported reports bit 0. The other decode calls
// answer NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED.
//
// It counts what it made and destroyed (gpufeed_fake_nvjpeg_counts, gpufeed_fake_nvjpeg_reset):
// a destroy of something it does not hold (twice, or never made) and a JPEG state destroyed after
// its handle are counted as faults, not crashes. Built with GPUFEED_FAKE_NVJPEG_PARTIAL, it lacks
// nvjpegDecodeBatched (a library gpufeed must refuse, naming that symbol).
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

// What gpufeed_fake_nvjpeg_counts reports (the test declares the same struct).
struct gpufeed_fake_nvjpeg_tally {
  int handles_created, handles_destroyed, states_created, states_destroyed;
  int bad_destroys, states_outliving_handle;
};

namespace {
constexpr int success = 0, invalid_parameter = 2, bad_jpeg = 3, jpeg_not_supported = 4,
              not_supported_here = 9, incomplete_bitstream = 10;

// A fake header (see the top of this file); false for any other bytes.
struct fake_header {
  int width, height, components, subsampling, flags;
};
bool read_fake_header(const unsigned char* d, std::size_t n, fake_header& h) {
  if (n < 15 || d[0] != 0xFF || d[1] != 0xD8 || d[2] != 'G' || d[3] != 'F') return false;
  auto be32 = [&](int at) {
    return static_cast<int>((unsigned{d[at]} << 24) | (unsigned{d[at + 1]} << 16) |
                            (unsigned{d[at + 2]} << 8) | unsigned{d[at + 3]});
  };
  h = {be32(4), be32(8), d[12], static_cast<signed char>(d[13]), d[14]};
  return true;
}
struct fake_stream {
  int flags;
};
std::set<void*> live_streams;

struct fake_handle {
  int backend;
};
struct fake_state {
  fake_handle* owner;
};

std::set<void*> live_handles, live_states;

gpufeed_fake_nvjpeg_tally tally{};

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? static_cast<int>(std::strtol(v, nullptr, 0)) : fallback;
}

int create_status(int backend) {
  const char* v = std::getenv("GPUFEED_FAKE_NVJPEG_CREATE");
  if (!v) return success;
  int b = 0, s = 0, used = 0;
  while (std::sscanf(v, "%d:%d%n", &b, &s, &used) == 2) {
    if (b == backend) return s;
    v += used;
    if (*v != ',') break;
    ++v;
  }
  return success;
}

int destroy_handle(void* h) {
  if (!live_handles.erase(h)) {
    ++tally.bad_destroys;
    return invalid_parameter;
  }
  ++tally.handles_destroyed;
  delete static_cast<fake_handle*>(h);
  return success;
}
}  // namespace

extern "C" {
// ---- control (for the tests; not part of nvJPEG) ----
void gpufeed_fake_nvjpeg_counts(gpufeed_fake_nvjpeg_tally* out) { *out = tally; }
void gpufeed_fake_nvjpeg_reset() { tally = gpufeed_fake_nvjpeg_tally{}; }

// ---- nvJPEG ----
int nvjpegGetProperty(int type, int* value) {
  if (const int s = env_int("GPUFEED_FAKE_NVJPEG_PROPERTY", success); s != success) return s;
  int v[3] = {13, 0, 1};
  if (const char* e = std::getenv("GPUFEED_FAKE_NVJPEG_VERSION"))
    std::sscanf(e, "%d.%d.%d", &v[0], &v[1], &v[2]);
  if (type < 0 || type > 2 || !value) return invalid_parameter;
  *value = v[type];
  return success;
}
int nvjpegCreateEx(int backend, void*, void*, unsigned, void** handle) {
  if (!handle) return invalid_parameter;
  if (const int s = create_status(backend); s != success) return s;
  auto* h = new fake_handle{backend};
  live_handles.insert(h);
  ++tally.handles_created;
  *handle = h;
  return success;
}
int nvjpegCreateSimple(void** handle) { return nvjpegCreateEx(0, nullptr, nullptr, 0, handle); }
int nvjpegDestroy(void* handle) { return destroy_handle(handle); }
int nvjpegGetHardwareDecoderInfo(void* handle, unsigned* engines, unsigned* cores) {
  if (!live_handles.count(handle) || !engines || !cores) return invalid_parameter;
  unsigned e = 7, c = 1;
  if (const char* v = std::getenv("GPUFEED_FAKE_NVJPEG_ENGINES")) std::sscanf(v, "%u,%u", &e, &c);
  const bool hw = static_cast<fake_handle*>(handle)->backend == 3;
  *engines = hw ? e : 0;
  *cores = hw ? c : 0;
  return success;
}
int nvjpegJpegStateCreate(void* handle, void** state) {
  if (!live_handles.count(handle) || !state) return invalid_parameter;
  if (const int s = env_int("GPUFEED_FAKE_NVJPEG_STATE", success); s != success) return s;
  auto* st = new fake_state{static_cast<fake_handle*>(handle)};
  live_states.insert(st);
  ++tally.states_created;
  *state = st;
  return success;
}
int nvjpegJpegStateDestroy(void* state) {
  if (!live_states.erase(state)) {
    ++tally.bad_destroys;
    return invalid_parameter;
  }
  auto* st = static_cast<fake_state*>(state);
  if (!live_handles.count(st->owner)) ++tally.states_outliving_handle;
  ++tally.states_destroyed;
  delete st;
  return success;
}
int nvjpegGetImageInfo(void* handle, const unsigned char* data, std::size_t length, int* components,
                       int* subsampling, int* widths, int* heights) {
  if (!live_handles.count(handle) || !data || !components || !subsampling || !widths || !heights)
    return invalid_parameter;
  if (length < 2 || data[0] != 0xFF || data[1] != 0xD8) return bad_jpeg;
  if (length < 4) return incomplete_bitstream;
  if (fake_header f{}; read_fake_header(data, length, f)) {
    if (f.flags & 2) return jpeg_not_supported;
    *components = f.components;
    *subsampling = f.subsampling;
    for (int c = 0; c < 4; ++c) {
      widths[c] = c == 0 ? f.width : 0;
      heights[c] = c == 0 ? f.height : 0;
    }
    return success;
  }
  *components = 3;
  *subsampling = 2;
  for (int c = 0; c < 4; ++c) {
    widths[c] = c == 0 ? 16 : c < 3 ? 8 : 0;
    heights[c] = widths[c];
  }
  return success;
}
int nvjpegJpegStreamCreate(void* handle, void** stream) {
  if (!live_handles.count(handle) || !stream) return invalid_parameter;
  auto* s = new fake_stream{0};
  live_streams.insert(s);
  *stream = s;
  return success;
}
int nvjpegJpegStreamDestroy(void* stream) {
  if (!live_streams.erase(stream)) {
    ++tally.bad_destroys;
    return invalid_parameter;
  }
  delete static_cast<fake_stream*>(stream);
  return success;
}
int nvjpegJpegStreamParse(void* handle, const unsigned char* data, std::size_t length, int, int,
                          void* stream) {
  if (!live_handles.count(handle) || !live_streams.count(stream) || !data) return invalid_parameter;
  if (length < 2 || data[0] != 0xFF || data[1] != 0xD8) return bad_jpeg;
  fake_header f{};
  static_cast<fake_stream*>(stream)->flags = read_fake_header(data, length, f) ? f.flags : 0;
  return success;
}
int nvjpegDecodeBatchedSupported(void* handle, void* stream, int* is_supported) {
  if (!live_handles.count(handle) || !live_streams.count(stream) || !is_supported)
    return invalid_parameter;
  *is_supported = static_cast<fake_stream*>(stream)->flags & 1;  // 0: supported
  return success;
}

#define GPUFEED_FAKE_UNSUPPORTED(name) \
  int name() { return not_supported_here; }
GPUFEED_FAKE_UNSUPPORTED(nvjpegDecodeBatchedInitialize)
#ifndef GPUFEED_FAKE_NVJPEG_PARTIAL
GPUFEED_FAKE_UNSUPPORTED(nvjpegDecodeBatched)
#endif
GPUFEED_FAKE_UNSUPPORTED(nvjpegDecodeBatchedSupportedEx)
GPUFEED_FAKE_UNSUPPORTED(nvjpegDecoderCreate)
GPUFEED_FAKE_UNSUPPORTED(nvjpegDecoderDestroy)
GPUFEED_FAKE_UNSUPPORTED(nvjpegDecoderStateCreate)
GPUFEED_FAKE_UNSUPPORTED(nvjpegBufferDeviceCreate)
GPUFEED_FAKE_UNSUPPORTED(nvjpegBufferDeviceDestroy)
GPUFEED_FAKE_UNSUPPORTED(nvjpegBufferPinnedCreate)
GPUFEED_FAKE_UNSUPPORTED(nvjpegBufferPinnedDestroy)
GPUFEED_FAKE_UNSUPPORTED(nvjpegStateAttachDeviceBuffer)
GPUFEED_FAKE_UNSUPPORTED(nvjpegStateAttachPinnedBuffer)
GPUFEED_FAKE_UNSUPPORTED(nvjpegDecodeParamsCreate)
GPUFEED_FAKE_UNSUPPORTED(nvjpegDecodeParamsDestroy)
GPUFEED_FAKE_UNSUPPORTED(nvjpegDecodeParamsSetOutputFormat)
GPUFEED_FAKE_UNSUPPORTED(nvjpegDecodeJpegHost)
GPUFEED_FAKE_UNSUPPORTED(nvjpegDecodeJpegTransferToDevice)
GPUFEED_FAKE_UNSUPPORTED(nvjpegDecodeJpegDevice)
#undef GPUFEED_FAKE_UNSUPPORTED
}
