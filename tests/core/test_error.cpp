#include <doctest/doctest.h>

#include <cstdlib>
#include <exception>
#include <string>
#include <typeinfo>

#include "gpufeed/detail/error_class.hpp"
#include "gpufeed/error.hpp"

using namespace gpufeed;

namespace {
// Sets GPUFEED_ERROR_LOCATIONS for one scope: what() then ends in the source location in every
// build type.
struct error_locations {
  explicit error_locations(const char* v) { ::setenv("GPUFEED_ERROR_LOCATIONS", v, 1); }
  ~error_locations() { ::unsetenv("GPUFEED_ERROR_LOCATIONS"); }
};
}  // namespace

TEST_CASE("error carries its context and prints it") {
  const error_locations on("1");
  const error_context ctx{.file = "/data/shard-0003.h5",
                          .record = 1234,
                          .api = "H5Dread",
                          .status = -1,
                          .status_text = "HDF5 error"};
  const corrupt_error e("fletcher32 checksum mismatch", ctx);
  CHECK(e.file() == "/data/shard-0003.h5");
  CHECK(e.record() == 1234u);
  CHECK(e.api() == "H5Dread");
  CHECK(e.status() == -1);
  CHECK(e.message() == "fletcher32 checksum mismatch");
  const std::string what = e.what();
  CHECK(what.find("gpufeed: fletcher32 checksum mismatch") == 0);
  CHECK(what.find("file '/data/shard-0003.h5'") != std::string::npos);
  CHECK(what.find("record 1234") != std::string::npos);
  CHECK(what.find("H5Dread returned -1 (HDF5 error)") != std::string::npos);
  CHECK(what.find("test_error.cpp") != std::string::npos);  // call site of the context
}

TEST_CASE("error subclasses are caught by their type and as gpufeed::error") {
  auto thrower = [] { throw format_error("not an HDF5 file", error_context{.file = "x.bin"}); };
  CHECK_THROWS_AS(thrower(), format_error);
  CHECK_THROWS_AS(thrower(), error);
  CHECK_THROWS_AS(thrower(), std::runtime_error);
  try {
    thrower();
  } catch (const corrupt_error&) {
    FAIL("a format_error must not be caught as corrupt_error");
  } catch (const error& e) {
    CHECK(e.file() == "x.bin");
    CHECK_FALSE(e.record().has_value());
    CHECK_FALSE(e.status().has_value());
  }
}

#ifdef NDEBUG
TEST_CASE("a release build's what() has no source location unless asked for") {
  const config_error e("batch size must be at least 1");
  CHECK(std::string(e.what()) == "gpufeed: batch size must be at least 1");
  CHECK(e.context().where.has_value());  // still there for a bug report
  const error_locations off("0");
  CHECK(std::string(config_error("x").what()) == "gpufeed: x");
}
#endif

TEST_CASE("error with a message only names the call site") {
  const error_locations on("1");
  const config_error e("batch size must be at least 1");
  const std::string what = e.what();
  CHECK(what.find("gpufeed: batch size must be at least 1 at ") == 0);
  CHECK(what.find("[") == std::string::npos);
}

namespace {
error_context context_built_elsewhere() {
  error_context c;  // default-constructed away from the throw site
  c.file = "shard.h5";
  return c;
}
}  // namespace

TEST_CASE("the error names the place it was raised, not where its context was built") {
  const int line = __LINE__ + 2;
  try {
    throw io_error("short read", context_built_elsewhere());
  } catch (const error& e) {
    REQUIRE(e.context().where.has_value());
    CHECK(std::string(e.context().where->file_name()).find("test_error.cpp") != std::string::npos);
    CHECK(e.context().where->line() == static_cast<unsigned>(line));
    CHECK(std::string(e.what()).find("error.hpp") == std::string::npos);
  }
}

TEST_CASE("describe() gives the message and context without the source location") {
  const io_error e("short read", error_context{.file = "a.h5", .record = 7, .api = "pread",
                                               .status = 5, .status_text = "Input/output error"});
  CHECK(e.describe() == "short read [file 'a.h5', record 7, pread returned 5 (Input/output error)]");
  CHECK(config_error("plain").describe() == "plain");
}

TEST_CASE("the record's input name follows the record in the context, when known") {
  const corrupt_error e("record transform failed: corrupt JPEG data",
                        error_context{.file = "shards/shard-00003.h5", .record = 4123,
                                      .input = "train/cat/0042.jpg"});
  CHECK(e.input() == "train/cat/0042.jpg");
  CHECK(e.describe() == "record transform failed: corrupt JPEG data [file "
                        "'shards/shard-00003.h5', record 4123, input 'train/cat/0042.jpg']");
  CHECK(std::string(e.what()).find("record 4123, input 'train/cat/0042.jpg']") !=
        std::string::npos);
  CHECK(format_error("x", error_context{.record = 1}).input().empty());
}

namespace {
// with_context(e, c) as thrown: its class, message and context.
template <class E>
void check_renamed(const E& original) {
  error_context c = original.context();
  c.input = "train/cat/0042.jpg";
  try {
    std::rethrow_exception(detail::with_context(original, c));
  } catch (const error& x) {
    CHECK(typeid(x) == typeid(E));
    CHECK(x.message() == original.message());
    CHECK(x.file() == "a.h5");
    CHECK(x.record() == 7u);
    CHECK(x.input() == "train/cat/0042.jpg");
    CHECK(x.context().where->line() == original.context().where->line());  // raised where it was
  }
}
class callers_own_error : public error {
 public:
  using error::error;
};
}  // namespace

TEST_CASE("an error named again keeps its class, message and place, whatever its class") {
  const error_context c{.file = "a.h5", .record = 7};
  check_renamed(io_error("short read", c));
  check_renamed(format_error("bad header", c));
  check_renamed(corrupt_error("bad crc", c));
  check_renamed(unsupported_error("filter 32015", c));
  check_renamed(library_error("H5Dread failed", c));
  check_renamed(cuda_error("cudaMemcpyAsync failed", c));
  check_renamed(cancelled_error("stopped", c));
  check_renamed(config_error("batch_size 0", c));
  check_renamed(error("plain", c));
  // A class of the caller's own is not gpufeed's to copy: it comes back as gpufeed::error.
  const callers_own_error own("own", c);
  try {
    std::rethrow_exception(detail::with_context(own, c));
  } catch (const error& x) {
    CHECK(typeid(x) == typeid(error));
    CHECK(x.message() == "own");
  }
}
