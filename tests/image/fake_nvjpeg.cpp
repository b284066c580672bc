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
// NVJPEG_STATUS_BAD_JPEG, else a 3-component 4:2:0 image of 16 x 16. The other decode calls
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
constexpr int success = 0, invalid_parameter = 2, bad_jpeg = 3,
              not_supported_here = 9, incomplete_bitstream = 10;

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
  *components = 3;
  *subsampling = 2;
  for (int c = 0; c < 4; ++c) {
    widths[c] = c == 0 ? 16 : c < 3 ? 8 : 0;
    heights[c] = widths[c];
  }
  return success;
}

#define GPUFEED_FAKE_UNSUPPORTED(name) \
  int name() { return not_supported_here; }
GPUFEED_FAKE_UNSUPPORTED(nvjpegDecodeBatchedInitialize)
#ifndef GPUFEED_FAKE_NVJPEG_PARTIAL
GPUFEED_FAKE_UNSUPPORTED(nvjpegDecodeBatched)
#endif
GPUFEED_FAKE_UNSUPPORTED(nvjpegDecodeBatchedSupported)
GPUFEED_FAKE_UNSUPPORTED(nvjpegDecodeBatchedSupportedEx)
GPUFEED_FAKE_UNSUPPORTED(nvjpegDecoderCreate)
GPUFEED_FAKE_UNSUPPORTED(nvjpegDecoderDestroy)
GPUFEED_FAKE_UNSUPPORTED(nvjpegDecoderStateCreate)
GPUFEED_FAKE_UNSUPPORTED(nvjpegJpegStreamCreate)
GPUFEED_FAKE_UNSUPPORTED(nvjpegJpegStreamParse)
GPUFEED_FAKE_UNSUPPORTED(nvjpegJpegStreamDestroy)
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
