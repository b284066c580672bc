// gpufeed::cuda — checked CUDA runtime calls.
//
//   GPUFEED_CUDA_TRY(cudaMemcpyAsync(...));   throws gpufeed::cuda_error on failure
//   GPUFEED_CUDA_LOG(cudaFree(p));            never throws: for destructors; prints to stderr
//
// On failure both clear the runtime's last-error state (cudaGetLastError) so one failed call is
// not reported again by the next, unrelated check. A sticky error (a kernel fault) cannot be
// cleared; every later call then fails and reports it, which is the truth.
// GPUFEED_CUDA_LOG ignores cudaErrorCudartUnloading: at process exit the runtime may be torn down
// before static owners release their handles, and nothing useful can be done about it then.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <source_location>
#include <string>
#include <utility>

#include "gpufeed/error.hpp"

namespace gpufeed::cuda {

// Throws gpufeed::cuda_error for status != cudaSuccess. api is the call's text.
inline void check(cudaError_t status, const char* api,
                  std::source_location where = std::source_location::current()) {
  if (status == cudaSuccess) return;
  (void)cudaGetLastError();
  error_context ctx;
  ctx.api = api;
  ctx.status = static_cast<long long>(status);
  ctx.status_text = cudaGetErrorName(status);
  ctx.where = where;
  throw cuda_error(std::string("CUDA call failed: ") + cudaGetErrorString(status), std::move(ctx));
}

// For destructors and other places that must not throw.
inline void log_failure(cudaError_t status, const char* api,
                        std::source_location where = std::source_location::current()) noexcept {
  if (status == cudaSuccess) return;
  (void)cudaGetLastError();
  if (status == cudaErrorCudartUnloading) return;
  std::fprintf(stderr, "gpufeed: %s failed: %s (%s) at %s:%u\n", api, cudaGetErrorName(status),
               cudaGetErrorString(status), where.file_name(), static_cast<unsigned>(where.line()));
}

}  // namespace gpufeed::cuda

#define GPUFEED_CUDA_TRY(call) ::gpufeed::cuda::check((call), #call)
#define GPUFEED_CUDA_LOG(call) ::gpufeed::cuda::log_failure((call), #call)
