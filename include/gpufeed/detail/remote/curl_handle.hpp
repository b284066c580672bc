// gpufeed — owners of libcurl's handles: libcurl's process-wide initialisation, a move-only easy
// handle (one connection cache, used by one thread at a time) and a move-only header list.
//
// libcurl's global initialisation runs once, on first use, and is never undone: curl_global_cleanup
// is not thread-safe and would pull the library from under handles that other threads, or static
// destructors, still own. An easy handle may be used by one thread at a time only; its owner
// (handle_pool.hpp) hands it to one reader at a time.
#pragma once

#include <curl/curl.h>

#include <string>
#include <utility>

#include "gpufeed/error.hpp"

namespace gpufeed::detail::remote {

// Initialises libcurl once for the process (thread-safe: a function-local static). library_error
// when libcurl cannot initialise (its TLS library failed, say).
inline void curl_global() {
  static const CURLcode status = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (status != CURLE_OK) {
    error_context ctx;
    ctx.api = "curl_global_init";
    ctx.status = static_cast<long long>(status);
    ctx.status_text = curl_easy_strerror(status);
    throw library_error("cannot initialise libcurl", std::move(ctx));
  }
}

// A CURL easy handle: the connections it keeps alive (HTTP/1.1 keep-alive, an HTTP/2 stream
// multiplexer) are reused by every request made on it. Move-only; empty after a move.
class curl_handle {
 public:
  curl_handle() noexcept = default;
  // A new handle; library_error when libcurl cannot make one (out of memory).
  static curl_handle make() {
    curl_global();
    CURL* h = curl_easy_init();
    if (!h) throw library_error("cannot create a libcurl handle", error_context{});
    return curl_handle(h);
  }

  curl_handle(const curl_handle&) = delete;
  curl_handle& operator=(const curl_handle&) = delete;
  curl_handle(curl_handle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  curl_handle& operator=(curl_handle&& o) noexcept {
    std::swap(h_, o.h_);
    return *this;
  }
  ~curl_handle() {
    if (h_) curl_easy_cleanup(h_);
  }

  [[nodiscard]] CURL* get() const noexcept { return h_; }
  explicit operator bool() const noexcept { return h_ != nullptr; }

 private:
  explicit curl_handle(CURL* h) noexcept : h_(h) {}
  CURL* h_ = nullptr;
};

// A request's header lines (curl_slist). Move-only; empty after a move.
class header_list {
 public:
  header_list() noexcept = default;
  header_list(const header_list&) = delete;
  header_list& operator=(const header_list&) = delete;
  header_list(header_list&& o) noexcept : l_(std::exchange(o.l_, nullptr)) {}
  header_list& operator=(header_list&& o) noexcept {
    std::swap(l_, o.l_);
    return *this;
  }
  ~header_list() {
    if (l_) curl_slist_free_all(l_);
  }

  // Appends "name: value" (libcurl copies it); false when out of memory.
  [[nodiscard]] bool add(const std::string& name, const std::string& value) {
    const std::string line = name + ": " + value;
    curl_slist* l = curl_slist_append(l_, line.c_str());
    if (!l) return false;
    l_ = l;
    return true;
  }
  [[nodiscard]] curl_slist* get() const noexcept { return l_; }

 private:
  curl_slist* l_ = nullptr;
};

// `url` as errors name it: scheme, host, port and path, without user name, password, query or
// fragment (a presigned URL's query carries its signature, a URL's user part its password).
// "<unparsable URL>" when libcurl cannot parse it, so that nothing of it leaks either.
inline std::string display_url(const std::string& url) {
  curl_global();
  CURLU* u = curl_url();
  std::string shown = "<unparsable URL>";
  if (!u) return shown;
  if (curl_url_set(u, CURLUPART_URL, url.c_str(), 0) == CURLUE_OK) {
    (void)curl_url_set(u, CURLUPART_USER, nullptr, 0);
    (void)curl_url_set(u, CURLUPART_PASSWORD, nullptr, 0);
    (void)curl_url_set(u, CURLUPART_OPTIONS, nullptr, 0);
    (void)curl_url_set(u, CURLUPART_QUERY, nullptr, 0);
    (void)curl_url_set(u, CURLUPART_FRAGMENT, nullptr, 0);
    char* text = nullptr;
    if (curl_url_get(u, CURLUPART_URL, &text, 0) == CURLUE_OK && text) {
      shown = text;
      curl_free(text);
    }
  }
  curl_url_cleanup(u);
  return shown;
}

}  // namespace gpufeed::detail::remote
