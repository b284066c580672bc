// gpufeed — what an HDF5 datatype means for reading it without HDF5.
#pragma once

#include <hdf5.h>

#include <cstddef>
#include <string>

#include "gpufeed/detail/hdf5/library.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::hdf5 {

struct dtype_info {
  std::string name;           // "uint8", "int16", "float32", ... (+ " big-endian" when not native)
  std::size_t size = 0;       // bytes per element delivered (the native memory type's size)
  bool swap = false;          // stored in the other byte order: reverse each element's bytes
  bool exact = false;         // stored bytes (after `swap`) are what H5Dread with `memtype` gives
  std::string not_exact_why;  // when !exact: why HDF5 must convert (read through H5Dread)
  handle memtype;             // H5Tget_native_type of the stored type: what H5Dread converts to
};

inline const char* type_class_name(H5T_class_t c) noexcept {
  switch (c) {
    case H5T_INTEGER:
      return "integer";
    case H5T_FLOAT:
      return "floating-point";
    case H5T_TIME:
      return "time";
    case H5T_STRING:
      return "string";
    case H5T_BITFIELD:
      return "bitfield";
    case H5T_OPAQUE:
      return "opaque";
    case H5T_COMPOUND:
      return "compound";
    case H5T_REFERENCE:
      return "reference";
    case H5T_ENUM:
      return "enum";
    case H5T_VLEN:
      return "variable-length";
    case H5T_ARRAY:
      return "array";
    default:
      return "unknown";
  }
}

// The stored type `ftype` in native byte order (what keep_float16 delivers for 2-byte floats).
inline handle stored_in_native_order(hid_t ftype, const std::string& file) {
  handle t = checked(H5Tcopy(ftype), H5Tclose, "H5Tcopy", "cannot copy the type", file);
  if (H5Tget_size(ftype) > 1)
    check(H5Tset_order(t.get(), H5Tget_order(H5T_NATIVE_INT)), "H5Tset_order",
          "cannot set order", file);
  return t;
}

// True for 2-byte floating-point types (float16): H5Tget_native_type widens them to float32.
inline bool is_float16(hid_t ftype) noexcept {
  return H5Tget_class(ftype) == H5T_FLOAT && H5Tget_size(ftype) == 2;
}

// Describes dataset `what`'s stored type `ftype`. unsupported_error for anything but integers
// and floats of 1, 2, 4 or 8 bytes. keep_float16: a 2-byte float's memory type is itself (in
// native order) rather than float32 (hdf5_options::keep_float16). The caller holds a
// library_lock.
inline dtype_info describe_dtype(hid_t ftype, const std::string& file, const std::string& what,
                                 bool keep_float16 = false) {
  const H5T_class_t cls = H5Tget_class(ftype);
  const std::size_t fsize = H5Tget_size(ftype);
  if (cls != H5T_INTEGER && cls != H5T_FLOAT) {
    throw unsupported_error(what + " has a " + type_class_name(cls) +
                                " datatype; gpufeed reads integer and floating-point datasets",
                            file_context(file));
  }
  if (fsize != 1 && fsize != 2 && fsize != 4 && fsize != 8) {
    throw unsupported_error(what + " has " + std::to_string(fsize) +
                                "-byte elements; gpufeed reads elements of 1, 2, 4 or 8 bytes",
                            file_context(file));
  }
  dtype_info d;
  if (cls == H5T_INTEGER)
    d.name = std::string(H5Tget_sign(ftype) == H5T_SGN_NONE ? "uint" : "int") +
             std::to_string(fsize * 8);
  else
    d.name = "float" + std::to_string(fsize * 8);

  const H5T_order_t native = H5Tget_order(H5T_NATIVE_INT);
  const H5T_order_t order = H5Tget_order(ftype);
  d.swap = fsize > 1 && order != native;
  if (d.swap) d.name += order == H5T_ORDER_BE ? " big-endian" : " little-endian";

  d.memtype = keep_float16 && is_float16(ftype)
                  ? stored_in_native_order(ftype, file)
                  : checked(H5Tget_native_type(ftype, H5T_DIR_ASCEND), H5Tclose,
                            "H5Tget_native_type", "cannot find a native type for " + what, file);
  d.size = H5Tget_size(d.memtype.get());
  if (d.size != fsize) {
    d.not_exact_why = "its " + d.name + " elements are converted to " + std::to_string(d.size) +
                      "-byte native values";
    return d;
  }
  // Equal to the native type once the byte order matches? Then a byte swap is all HDF5 would
  // do. Not equal (padding bits, a partial precision, a non-IEEE float layout): HDF5 converts.
  handle as_native = checked(H5Tcopy(ftype), H5Tclose, "H5Tcopy", "cannot copy the type", file);
  if (fsize > 1)
    check(H5Tset_order(as_native.get(), native), "H5Tset_order", "cannot set order", file);
  const htri_t same =
      check(H5Tequal(as_native.get(), d.memtype.get()), "H5Tequal", "cannot compare types", file);
  d.exact = same > 0;
  if (!d.exact)
    d.not_exact_why =
        "its " + d.name + " type (precision, offset or float layout) needs conversion by HDF5";
  return d;
}

}  // namespace gpufeed::detail::hdf5
