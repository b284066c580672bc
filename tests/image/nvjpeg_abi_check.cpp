// gpufeed's nvJPEG declarations (detail/image/nvjpeg_api.hpp) against NVIDIA's own nvjpeg.h, and
// against the installed library at run time. Built only where nvjpeg.h is (the CUDA toolkit of a
// GPU machine); needs no gpufeed library target, so it also builds there by hand:
//   g++ -std=c++20 -Iinclude -I<cuda>/include tests/image/nvjpeg_abi_check.cpp
//       -L<cuda>/lib64 -lcudart -ldl -o nvjpeg_abi_check       (one command line)
//   ./nvjpeg_abi_check [photo.jpg photo.rgb]
// At compile time: every enumerator's value, nvjpegImage_t's and the allocators' layout, the
// stream type, and each entry point's arity and parameter kinds (pointer or value, and size).
// At run time (exit 77 = skipped, when no library or no GPU): the library loads and passes, the
// probe's answer is printed, and with a JPEG and its pixels as raw RGB (written by a reference
// decoder) it decodes the JPEG with nvjpegDecodeBatched on each backend that works and compares:
// the mean absolute difference must be under 2 levels (IDCTs differ in their last bits).
#include <cuda_runtime.h>
#include <nvjpeg.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <type_traits>
#include <vector>

#include "gpufeed/detail/image/nvjpeg_api.hpp"
#include "gpufeed/detail/image/nvjpeg_handles.hpp"
#include "gpufeed/detail/image/nvjpeg_library.hpp"
#include "gpufeed/image/nvjpeg_probe.hpp"

namespace nv = gpufeed::detail::image::nvjpeg;

// ---- compile time ----------------------------------------------------------------------------
#define SAME_VALUE(ours, theirs) static_assert(static_cast<int>(ours) == static_cast<int>(theirs))
SAME_VALUE(nv::status::success, NVJPEG_STATUS_SUCCESS);
SAME_VALUE(nv::status::not_initialized, NVJPEG_STATUS_NOT_INITIALIZED);
SAME_VALUE(nv::status::invalid_parameter, NVJPEG_STATUS_INVALID_PARAMETER);
SAME_VALUE(nv::status::bad_jpeg, NVJPEG_STATUS_BAD_JPEG);
SAME_VALUE(nv::status::jpeg_not_supported, NVJPEG_STATUS_JPEG_NOT_SUPPORTED);
SAME_VALUE(nv::status::allocator_failure, NVJPEG_STATUS_ALLOCATOR_FAILURE);
SAME_VALUE(nv::status::execution_failed, NVJPEG_STATUS_EXECUTION_FAILED);
SAME_VALUE(nv::status::arch_mismatch, NVJPEG_STATUS_ARCH_MISMATCH);
SAME_VALUE(nv::status::internal_error, NVJPEG_STATUS_INTERNAL_ERROR);
SAME_VALUE(nv::status::implementation_not_supported, NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED);
SAME_VALUE(nv::status::incomplete_bitstream, NVJPEG_STATUS_INCOMPLETE_BITSTREAM);
SAME_VALUE(nv::backend::default_backend, NVJPEG_BACKEND_DEFAULT);
SAME_VALUE(nv::backend::hybrid, NVJPEG_BACKEND_HYBRID);
SAME_VALUE(nv::backend::gpu_hybrid, NVJPEG_BACKEND_GPU_HYBRID);
SAME_VALUE(nv::backend::hardware, NVJPEG_BACKEND_HARDWARE);
SAME_VALUE(nv::backend::gpu_hybrid_device, NVJPEG_BACKEND_GPU_HYBRID_DEVICE);
SAME_VALUE(nv::backend::hardware_device, NVJPEG_BACKEND_HARDWARE_DEVICE);
SAME_VALUE(nv::backend::lossless_jpeg, NVJPEG_BACKEND_LOSSLESS_JPEG);
SAME_VALUE(nv::output_format::unchanged, NVJPEG_OUTPUT_UNCHANGED);
SAME_VALUE(nv::output_format::yuv, NVJPEG_OUTPUT_YUV);
SAME_VALUE(nv::output_format::y, NVJPEG_OUTPUT_Y);
SAME_VALUE(nv::output_format::rgb, NVJPEG_OUTPUT_RGB);
SAME_VALUE(nv::output_format::bgr, NVJPEG_OUTPUT_BGR);
SAME_VALUE(nv::output_format::rgbi, NVJPEG_OUTPUT_RGBI);
SAME_VALUE(nv::output_format::bgri, NVJPEG_OUTPUT_BGRI);
SAME_VALUE(nv::output_format::unchangedi_u16, NVJPEG_OUTPUT_UNCHANGEDI_U16);
SAME_VALUE(nv::chroma_subsampling::css_444, NVJPEG_CSS_444);
SAME_VALUE(nv::chroma_subsampling::css_422, NVJPEG_CSS_422);
SAME_VALUE(nv::chroma_subsampling::css_420, NVJPEG_CSS_420);
SAME_VALUE(nv::chroma_subsampling::css_440, NVJPEG_CSS_440);
SAME_VALUE(nv::chroma_subsampling::css_411, NVJPEG_CSS_411);
SAME_VALUE(nv::chroma_subsampling::css_410, NVJPEG_CSS_410);
SAME_VALUE(nv::chroma_subsampling::css_gray, NVJPEG_CSS_GRAY);
SAME_VALUE(nv::chroma_subsampling::css_410v, NVJPEG_CSS_410V);
SAME_VALUE(nv::chroma_subsampling::unknown, NVJPEG_CSS_UNKNOWN);
SAME_VALUE(nv::library_property::major_version, MAJOR_VERSION);
SAME_VALUE(nv::library_property::minor_version, MINOR_VERSION);
SAME_VALUE(nv::library_property::patch_level, PATCH_LEVEL);
SAME_VALUE(nv::max_component, NVJPEG_MAX_COMPONENT);
SAME_VALUE(nv::flags_default, NVJPEG_FLAGS_DEFAULT);
#undef SAME_VALUE

static_assert(std::is_same_v<nv::cuda_stream_t, cudaStream_t>);
static_assert(sizeof(nv::image_planes) == sizeof(nvjpegImage_t));
static_assert(offsetof(nv::image_planes, pitch) == offsetof(nvjpegImage_t, pitch));
static_assert(sizeof(nv::image_planes::pitch) == sizeof(nvjpegImage_t::pitch));
static_assert(sizeof(nv::dev_allocator) == sizeof(nvjpegDevAllocator_t));
static_assert(sizeof(nv::pinned_allocator) == sizeof(nvjpegPinnedAllocator_t));
static_assert(sizeof(nv::status) == sizeof(nvjpegStatus_t));
static_assert(sizeof(nv::chroma_subsampling) == sizeof(nvjpegChromaSubsampling_t));

// Two parameter types are passed alike: both pointers, or both of one size and neither a pointer.
template <class A, class B>
constexpr bool passed_alike =
    std::is_pointer_v<A> == std::is_pointer_v<B> && sizeof(A) == sizeof(B);

template <class F, class G>
struct same_abi : std::false_type {};
template <class R, class... A, class S, class... B>
struct same_abi<R (*)(A...), S (*)(B...)> {
  static constexpr bool value = sizeof...(A) == sizeof...(B) && passed_alike<R, S> &&
                                (passed_alike<A, B> && ...);
};
#define SAME_SIGNATURE(member, fn)                                                          \
  static_assert(same_abi<decltype(&fn), decltype(nv::functions::member)>::value, #fn)
SAME_SIGNATURE(get_property, nvjpegGetProperty);
SAME_SIGNATURE(create_simple, nvjpegCreateSimple);
SAME_SIGNATURE(create_ex, nvjpegCreateEx);
SAME_SIGNATURE(destroy, nvjpegDestroy);
SAME_SIGNATURE(get_hardware_decoder_info, nvjpegGetHardwareDecoderInfo);
SAME_SIGNATURE(jpeg_state_create, nvjpegJpegStateCreate);
SAME_SIGNATURE(jpeg_state_destroy, nvjpegJpegStateDestroy);
SAME_SIGNATURE(get_image_info, nvjpegGetImageInfo);
SAME_SIGNATURE(decode_batched_initialize, nvjpegDecodeBatchedInitialize);
SAME_SIGNATURE(decode_batched, nvjpegDecodeBatched);
SAME_SIGNATURE(decode_batched_supported, nvjpegDecodeBatchedSupported);
SAME_SIGNATURE(decode_batched_supported_ex, nvjpegDecodeBatchedSupportedEx);
SAME_SIGNATURE(decoder_create, nvjpegDecoderCreate);
SAME_SIGNATURE(decoder_destroy, nvjpegDecoderDestroy);
SAME_SIGNATURE(decoder_state_create, nvjpegDecoderStateCreate);
SAME_SIGNATURE(jpeg_stream_create, nvjpegJpegStreamCreate);
SAME_SIGNATURE(jpeg_stream_parse, nvjpegJpegStreamParse);
SAME_SIGNATURE(jpeg_stream_destroy, nvjpegJpegStreamDestroy);
SAME_SIGNATURE(buffer_device_create, nvjpegBufferDeviceCreate);
SAME_SIGNATURE(buffer_device_destroy, nvjpegBufferDeviceDestroy);
SAME_SIGNATURE(buffer_pinned_create, nvjpegBufferPinnedCreate);
SAME_SIGNATURE(buffer_pinned_destroy, nvjpegBufferPinnedDestroy);
SAME_SIGNATURE(state_attach_device_buffer, nvjpegStateAttachDeviceBuffer);
SAME_SIGNATURE(state_attach_pinned_buffer, nvjpegStateAttachPinnedBuffer);
SAME_SIGNATURE(decode_params_create, nvjpegDecodeParamsCreate);
SAME_SIGNATURE(decode_params_destroy, nvjpegDecodeParamsDestroy);
SAME_SIGNATURE(decode_params_set_output_format, nvjpegDecodeParamsSetOutputFormat);
SAME_SIGNATURE(decode_jpeg_host, nvjpegDecodeJpegHost);
SAME_SIGNATURE(decode_jpeg_transfer_to_device, nvjpegDecodeJpegTransferToDevice);
SAME_SIGNATURE(decode_jpeg_device, nvjpegDecodeJpegDevice);
#undef SAME_SIGNATURE

// ---- run time --------------------------------------------------------------------------------
namespace {

int failures = 0;
void expect(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what.c_str());
  if (!ok) ++failures;
}

std::vector<unsigned char> slurp(const char* path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Decodes `jpeg` to interleaved RGB on `b` through the loaded table; compares with `rgb`.
void decode_and_compare(const nv::library& lib, nv::backend b,
                        const std::vector<unsigned char>& jpeg,
                        const std::vector<unsigned char>& rgb) {
  const std::string name = nv::backend_name(b);
  nv::handle h;
  if (nv::try_create_handle(lib, b, h) != nv::status::success) return;
  const nv::jpeg_state st = nv::create_jpeg_state(lib, h.get());
  int comps = 0, w[4] = {}, hh[4] = {};
  nv::chroma_subsampling css{};
  nv::check_decode(lib.api().get_image_info(h.get(), jpeg.data(), jpeg.size(), &comps, &css, w, hh),
                   "nvjpegGetImageInfo", {});
  const std::size_t bytes = static_cast<std::size_t>(w[0]) * hh[0] * 3;
  expect(bytes == rgb.size(), name + ": nvjpegGetImageInfo's size " + std::to_string(w[0]) + " x " +
                                  std::to_string(hh[0]) + " matches the reference pixels");
  if (bytes != rgb.size()) return;
  int supported = -1;
  nv::jpeg_stream_t js = nullptr;
  nv::check(lib.api().jpeg_stream_create(h.get(), &js), "nvjpegJpegStreamCreate");
  nv::check_decode(lib.api().jpeg_stream_parse(h.get(), jpeg.data(), jpeg.size(), 0, 0, js),
                   "nvjpegJpegStreamParse", {});
  const nv::status s = lib.api().decode_batched_supported(h.get(), js, &supported);
  (void)lib.api().jpeg_stream_destroy(js);
  std::printf("%s: nvjpegDecodeBatchedSupported returned %s, is_supported %d (0 = supported)\n",
              name.c_str(), nv::status_name(s), supported);
  void* dev = nullptr;
  if (cudaMalloc(&dev, bytes) != cudaSuccess) return expect(false, name + ": cudaMalloc");
  nv::image_planes out{};
  out.channel[0] = static_cast<unsigned char*>(dev);
  out.pitch[0] = static_cast<std::size_t>(w[0]) * 3;
  const unsigned char* data[] = {jpeg.data()};
  const std::size_t lengths[] = {jpeg.size()};
  nv::check(lib.api().decode_batched_initialize(h.get(), st.get(), 1, 1, nv::output_format::rgbi),
            "nvjpegDecodeBatchedInitialize");
  nv::check_decode(lib.api().decode_batched(h.get(), st.get(), data, lengths, &out, nullptr),
                   "nvjpegDecodeBatched", {});
  std::vector<unsigned char> got(bytes);
  const bool copied = cudaMemcpy(got.data(), dev, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
  cudaFree(dev);
  expect(copied, name + ": decoded pixels copied back");
  double sum = 0;
  for (std::size_t i = 0; i < bytes; ++i) sum += std::abs(int(got[i]) - int(rgb[i]));
  const double mad = sum / static_cast<double>(bytes);
  expect(mad < 2.0, name + ": mean absolute difference from the reference " + std::to_string(mad));
}

}  // namespace

int main(int argc, char** argv) {
  const nv::library lib = nv::library::load();
  if (!lib.ok()) {
    std::printf("SKIPPED: %s\n", lib.why_not().c_str());
    return 77;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  std::printf("nvJPEG %s loaded from %s\n", lib.library_version().text().c_str(),
              lib.path().c_str());
  expect(lib.library_version().major == NVJPEG_VER_MAJOR,
         "the library's major version is nvjpeg.h's (" + std::to_string(NVJPEG_VER_MAJOR) + ")");
  const auto cap = gpufeed::image::probe_nvjpeg();
  std::printf("probe: backend %s, engines %u x %u cores, notice '%s'\n",
              gpufeed::image::to_string(cap.backend), cap.hardware_engines, cap.cores_per_engine,
              cap.notice.c_str());
  for (const auto& r : cap.refused) std::printf("  refused: %s\n", r.c_str());
  expect(cap.gpu_decode(), "some backend works");
  if (argc == 3) {
    const auto jpeg = slurp(argv[1]);
    const auto rgb = slurp(argv[2]);
    try {
      for (nv::backend b : {nv::backend::hardware, nv::backend::default_backend,
                            nv::backend::gpu_hybrid})
        decode_and_compare(lib, b, jpeg, rgb);
    } catch (const gpufeed::error& e) {
      expect(false, e.what());
    }
  }
  std::printf("%s\n", failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}
