// gpufeed — the reader of an HDF5 shard named by a URL (http://, https://, s3://) instead of a
// path: an HTTP(S) byte source of the remote component (detail/remote/object_source.hpp), which
// the shard's records, chunks and HDF5's own metadata reads all go through (open_shard).
//
// The remote component is optional (libcurl, OpenSSL): built without it (GPUFEED_HAS_REMOTE is
// defined by linking gpufeed::remote), a URL is still recognised, so that it is a config_error
// saying what to link rather than "no such file".
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "gpufeed/detail/io/byte_source.hpp"
#include "gpufeed/detail/remote/s3_url.hpp"
#include "gpufeed/detail/remote/unit_reads.hpp"
#include "gpufeed/detail/remote/url.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/hdf5_options.hpp"
#ifdef GPUFEED_HAS_REMOTE
#include "gpufeed/detail/remote/local_cache_source.hpp"
#include "gpufeed/detail/remote/object_source.hpp"
#endif

namespace gpufeed::detail::hdf5 {

// True when shard p is named by a URL rather than a path.
[[nodiscard]] inline bool is_shard_url(const std::filesystem::path& p) {
  return remote::is_remote_url(p.native());
}

// The shard at url's bytes (an http_file: ranged GETs, s3:// signed), through the node-local
// cache when hdf5_options::remote_cache or the environment names one (local_cache_source.hpp),
// behind a remote::unit_reads that serves reads as they are until open_shard gives it units.
// config_error when the URL
// or an S3 setting is malformed, when hdf5_options::reads asks for a memory map (a URL has none:
// its reads are ranged GETs, pread-style), when the remote component is not linked, or when the
// cache's settings are invalid (resolve_cache_config); io_error naming the URL (redacted) when
// the object cannot be opened (404, 403, no ranges, no server), naming the cache's directory
// when it cannot be created.
[[nodiscard]] inline io::owned_source open_url_reader(const std::string& url,
                                                      const hdf5_options& req) {
  if (req.reads == hdf5_options::read_method::map)
    throw config_error("hdf5_options::reads = map cannot read a shard named by a URL (its reads "
                       "are ranged requests; use automatic or pread)",
                       file_context(remote::redact_url(url)));
#ifdef GPUFEED_HAS_REMOTE
  const auto cache = remote::resolve_cache_config(
      req.remote_cache.directory, req.remote_cache.max_bytes, req.remote_cache.block_bytes);
  std::unique_ptr<remote::http_file> f = remote::open_remote_object(url);
  const remote::http_file* object = f.get();  // owned by the unit_reads returned
  io::owned_source inner = cache ? io::owned_source(remote::through_local_cache(std::move(f), url,
                                                                                *cache))
                                 : io::owned_source(std::move(f));
  // Cached bytes are read straight into the reader's buffer, not through a fetched unit.
  remote::local_copy local;
  if (const auto* c = inner.as<remote::local_cache_source>()) {
    local.holds = [c](std::uint64_t at, std::uint64_t n) { return c->holds(at, n); };
    local.read = [c](void* dst, std::size_t n, std::uint64_t at) {
      return c->read_held(dst, n, at);
    };
  }
  return io::owned_source(std::make_unique<remote::unit_reads>(
      std::move(inner), [object] { return object->stats(); }, remote::unit_hold_bytes,
      std::move(local)));
#else
  throw config_error("the shard is a URL: reading shards over HTTP(S) or S3 needs gpufeed's remote "
                     "component (link gpufeed::remote; it needs libcurl, OpenSSL and zlib)",
                     file_context(remote::redact_url(url)));
#endif
}

}  // namespace gpufeed::detail::hdf5
