// gpufeed::detail::image::nvjpeg — the part of nvJPEG's C ABI that gpufeed calls, declared here
// rather than included: nvjpeg.h is not on every build machine (it ships with the CUDA toolkit
// of the GPU machines only), and the library is loaded at run time (nvjpeg_library.hpp), so a
// gpufeed program builds and starts without it.
//
// Source: NVIDIA's nvJPEG documentation (the CUDA toolkit's "nvJPEG" guide: "nvJPEG Type
// Declarations", "nvJPEG API Return Codes", "nvJPEG Helper API Reference", "nvJPEG Decode API
// Reference"). Numeric values, member order and parameter order are the documented ones; names
// are gpufeed's (snake_case, in this namespace), so a translation unit may include nvjpeg.h too
// without a clash. Host-only: cudaStream_t is declared as what it is in the CUDA runtime's ABI,
// a pointer to the opaque `struct CUstream_st`, so no CUDA header is needed.
//
// Why here (detail/image/, beside TurboJPEG's jpeg.hpp): the GPU JPEG decoder this serves belongs
// to the image component, and falls back to that component's CPU decoder.
#pragma once

#include <cstddef>

struct CUstream_st;  // the CUDA runtime's opaque stream type (cudaStream_t is CUstream_st*)

namespace gpufeed::detail::image::nvjpeg {

// nvjpegStatus_t.
enum class status : int {
  success = 0,
  not_initialized = 1,
  invalid_parameter = 2,
  bad_jpeg = 3,
  jpeg_not_supported = 4,
  allocator_failure = 5,
  execution_failed = 6,
  arch_mismatch = 7,
  internal_error = 8,
  implementation_not_supported = 9,
  incomplete_bitstream = 10,
};

// nvjpegBackend_t: which implementation a handle (nvjpegCreateEx) or decoder uses. hardware is
// the GPU's JPEG engines, where it has them (baseline JPEGs only).
enum class backend : int {
  default_backend = 0,  // NVJPEG_BACKEND_DEFAULT: the library chooses
  hybrid = 1,
  gpu_hybrid = 2,
  hardware = 3,
  gpu_hybrid_device = 4,
  hardware_device = 5,
  lossless_jpeg = 6,
};

// nvjpegOutputFormat_t. The interleaved formats (rgbi, bgri) write channel[0] only.
enum class output_format : int {
  unchanged = 0,
  yuv = 1,
  y = 2,
  rgb = 3,
  bgr = 4,
  rgbi = 5,
  bgri = 6,
  unchangedi_u16 = 7,
};

// nvjpegChromaSubsampling_t.
enum class chroma_subsampling : int {
  css_444 = 0,
  css_422 = 1,
  css_420 = 2,
  css_440 = 3,
  css_411 = 4,
  css_410 = 5,
  css_gray = 6,
  css_410v = 7,
  unknown = -1,
};

// libraryPropertyType (library_types.h), the argument of nvjpegGetProperty.
enum class library_property : int { major_version = 0, minor_version = 1, patch_level = 2 };

// NVJPEG_MAX_COMPONENT.
inline constexpr int max_component = 4;

// NVJPEG_FLAGS_DEFAULT, nvjpegCreateEx's flags.
inline constexpr unsigned flags_default = 0;

// nvjpegImage_t: the output planes, device pointers and their row pitches in bytes.
struct image_planes {
  unsigned char* channel[max_component];
  std::size_t pitch[max_component];
};

// nvjpegDevAllocator_t and nvjpegPinnedAllocator_t (gpufeed passes null: the library's default
// cudaMalloc / cudaHostAlloc), declared for the signatures that take them.
struct dev_allocator {
  int (*dev_malloc)(void**, std::size_t);
  int (*dev_free)(void*);
};
struct pinned_allocator {
  int (*pinned_malloc)(void**, std::size_t, unsigned int);
  int (*pinned_free)(void*);
};

// Opaque handles (each a pointer to an incomplete struct, as in the C header).
struct handle_st;
struct jpeg_state_st;
struct jpeg_stream_st;
struct decoder_st;
struct decode_params_st;
struct buffer_device_st;
struct buffer_pinned_st;
using handle_t = handle_st*;               // nvjpegHandle_t
using jpeg_state_t = jpeg_state_st*;       // nvjpegJpegState_t
using jpeg_stream_t = jpeg_stream_st*;     // nvjpegJpegStream_t
using decoder_t = decoder_st*;             // nvjpegJpegDecoder_t
using decode_params_t = decode_params_st*; // nvjpegDecodeParams_t
using buffer_device_t = buffer_device_st*; // nvjpegBufferDevice_t
using buffer_pinned_t = buffer_pinned_st*; // nvjpegBufferPinned_t
using cuda_stream_t = CUstream_st*;        // cudaStream_t

// The entry points, one pointer type each, in the documented parameter order.
struct functions {
  status (*get_property)(library_property, int*);
  status (*create_simple)(handle_t*);
  status (*create_ex)(backend, dev_allocator*, pinned_allocator*, unsigned, handle_t*);
  status (*destroy)(handle_t);
  status (*get_hardware_decoder_info)(handle_t, unsigned*, unsigned*);
  status (*jpeg_state_create)(handle_t, jpeg_state_t*);
  status (*jpeg_state_destroy)(jpeg_state_t);
  status (*get_image_info)(handle_t, const unsigned char*, std::size_t, int*, chroma_subsampling*,
                           int*, int*);
  // Batched decode (phase one: initialise for a batch size and output format; then decode).
  status (*decode_batched_initialize)(handle_t, jpeg_state_t, int, int, output_format);
  status (*decode_batched)(handle_t, jpeg_state_t, const unsigned char* const*,
                           const std::size_t*, image_planes*, cuda_stream_t);
  // is_supported is written 0 when the batched decoder (hardware backend) supports the stream.
  status (*decode_batched_supported)(handle_t, jpeg_stream_t, int*);
  status (*decode_batched_supported_ex)(handle_t, jpeg_stream_t, decode_params_t, int*);
  // Decoupled decode: a decoder and its state, host phase, transfer, device phase.
  status (*decoder_create)(handle_t, backend, decoder_t*);
  status (*decoder_destroy)(decoder_t);
  status (*decoder_state_create)(handle_t, decoder_t, jpeg_state_t*);
  status (*jpeg_stream_create)(handle_t, jpeg_stream_t*);
  status (*jpeg_stream_parse)(handle_t, const unsigned char*, std::size_t, int, int,
                              jpeg_stream_t);
  status (*jpeg_stream_destroy)(jpeg_stream_t);
  status (*buffer_device_create)(handle_t, dev_allocator*, buffer_device_t*);
  status (*buffer_device_destroy)(buffer_device_t);
  status (*buffer_pinned_create)(handle_t, pinned_allocator*, buffer_pinned_t*);
  status (*buffer_pinned_destroy)(buffer_pinned_t);
  status (*state_attach_device_buffer)(jpeg_state_t, buffer_device_t);
  status (*state_attach_pinned_buffer)(jpeg_state_t, buffer_pinned_t);
  status (*decode_params_create)(handle_t, decode_params_t*);
  status (*decode_params_destroy)(decode_params_t);
  status (*decode_params_set_output_format)(decode_params_t, output_format);
  status (*decode_jpeg_host)(handle_t, decoder_t, jpeg_state_t, decode_params_t, jpeg_stream_t);
  status (*decode_jpeg_transfer_to_device)(handle_t, decoder_t, jpeg_state_t, jpeg_stream_t,
                                           cuda_stream_t);
  status (*decode_jpeg_device)(handle_t, decoder_t, jpeg_state_t, image_planes*, cuda_stream_t);
};

// Calls visit(member, "symbol") for every member of `functions`, with the symbol it is resolved
// from. Every one is required: a library without one of them is refused, naming the symbol.
template <class Visit>
void for_each_symbol(functions& f, Visit&& visit) {
  visit(f.get_property, "nvjpegGetProperty");
  visit(f.create_simple, "nvjpegCreateSimple");
  visit(f.create_ex, "nvjpegCreateEx");
  visit(f.destroy, "nvjpegDestroy");
  visit(f.get_hardware_decoder_info, "nvjpegGetHardwareDecoderInfo");
  visit(f.jpeg_state_create, "nvjpegJpegStateCreate");
  visit(f.jpeg_state_destroy, "nvjpegJpegStateDestroy");
  visit(f.get_image_info, "nvjpegGetImageInfo");
  visit(f.decode_batched_initialize, "nvjpegDecodeBatchedInitialize");
  visit(f.decode_batched, "nvjpegDecodeBatched");
  visit(f.decode_batched_supported, "nvjpegDecodeBatchedSupported");
  visit(f.decode_batched_supported_ex, "nvjpegDecodeBatchedSupportedEx");
  visit(f.decoder_create, "nvjpegDecoderCreate");
  visit(f.decoder_destroy, "nvjpegDecoderDestroy");
  visit(f.decoder_state_create, "nvjpegDecoderStateCreate");
  visit(f.jpeg_stream_create, "nvjpegJpegStreamCreate");
  visit(f.jpeg_stream_parse, "nvjpegJpegStreamParse");
  visit(f.jpeg_stream_destroy, "nvjpegJpegStreamDestroy");
  visit(f.buffer_device_create, "nvjpegBufferDeviceCreate");
  visit(f.buffer_device_destroy, "nvjpegBufferDeviceDestroy");
  visit(f.buffer_pinned_create, "nvjpegBufferPinnedCreate");
  visit(f.buffer_pinned_destroy, "nvjpegBufferPinnedDestroy");
  visit(f.state_attach_device_buffer, "nvjpegStateAttachDeviceBuffer");
  visit(f.state_attach_pinned_buffer, "nvjpegStateAttachPinnedBuffer");
  visit(f.decode_params_create, "nvjpegDecodeParamsCreate");
  visit(f.decode_params_destroy, "nvjpegDecodeParamsDestroy");
  visit(f.decode_params_set_output_format, "nvjpegDecodeParamsSetOutputFormat");
  visit(f.decode_jpeg_host, "nvjpegDecodeJpegHost");
  visit(f.decode_jpeg_transfer_to_device, "nvjpegDecodeJpegTransferToDevice");
  visit(f.decode_jpeg_device, "nvjpegDecodeJpegDevice");
}

// NVIDIA's name of a status ("NVJPEG_STATUS_BAD_JPEG"); values this list does not know are
// "NVJPEG_STATUS_UNKNOWN" (the number is reported beside the name).
constexpr const char* status_name(status s) noexcept {
  switch (s) {
    case status::success: return "NVJPEG_STATUS_SUCCESS";
    case status::not_initialized: return "NVJPEG_STATUS_NOT_INITIALIZED";
    case status::invalid_parameter: return "NVJPEG_STATUS_INVALID_PARAMETER";
    case status::bad_jpeg: return "NVJPEG_STATUS_BAD_JPEG";
    case status::jpeg_not_supported: return "NVJPEG_STATUS_JPEG_NOT_SUPPORTED";
    case status::allocator_failure: return "NVJPEG_STATUS_ALLOCATOR_FAILURE";
    case status::execution_failed: return "NVJPEG_STATUS_EXECUTION_FAILED";
    case status::arch_mismatch: return "NVJPEG_STATUS_ARCH_MISMATCH";
    case status::internal_error: return "NVJPEG_STATUS_INTERNAL_ERROR";
    case status::implementation_not_supported: return "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED";
    case status::incomplete_bitstream: return "NVJPEG_STATUS_INCOMPLETE_BITSTREAM";
  }
  return "NVJPEG_STATUS_UNKNOWN";
}

// NVIDIA's name of a backend ("NVJPEG_BACKEND_HARDWARE").
constexpr const char* backend_name(backend b) noexcept {
  switch (b) {
    case backend::default_backend: return "NVJPEG_BACKEND_DEFAULT";
    case backend::hybrid: return "NVJPEG_BACKEND_HYBRID";
    case backend::gpu_hybrid: return "NVJPEG_BACKEND_GPU_HYBRID";
    case backend::hardware: return "NVJPEG_BACKEND_HARDWARE";
    case backend::gpu_hybrid_device: return "NVJPEG_BACKEND_GPU_HYBRID_DEVICE";
    case backend::hardware_device: return "NVJPEG_BACKEND_HARDWARE_DEVICE";
    case backend::lossless_jpeg: return "NVJPEG_BACKEND_LOSSLESS_JPEG";
  }
  return "NVJPEG_BACKEND_UNKNOWN";
}

}  // namespace gpufeed::detail::image::nvjpeg
