// gpufeed — repack_hdf5(): a dataset a user already has, read through hdf5_source, into gpufeed
// shards (part of gpufeed/pack/pack.hpp, included at the end of run.hpp when HDF5 is built).
#pragma once

#include <hdf5.h>

#include <memory>
#include <string>
#include <vector>

#include "gpufeed/detail/hdf5/dtype.hpp"
#include "gpufeed/detail/hdf5/library.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/pack/detail/run.hpp"

namespace gpufeed {

namespace detail::pack {

// The HDF5 type hdf5_source delivers `dataset` of `file` in (read with keep_float16), for the
// repacked data: the native type, or for float16 the stored type in native byte order, so the
// dtype is kept.
inline detail::hdf5::handle native_type_of(const std::filesystem::path& file,
                                           const std::string& dataset) {
  namespace h = detail::hdf5;
  const std::string f = file.string();
  h::library_lock lock;
  h::handle fid = h::checked<format_error>(H5Fopen(f.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT),
                                           H5Fclose, "H5Fopen", "cannot open the HDF5 file", f);
  h::handle did = h::checked<format_error>(H5Dopen2(fid.get(), dataset.c_str(), H5P_DEFAULT),
                                           H5Dclose, "H5Dopen2",
                                           "cannot open dataset '" + dataset + "'", f);
  h::handle type =
      h::checked(H5Dget_type(did.get()), H5Tclose, "H5Dget_type", "no datatype", f);
  if (h::is_float16(type.get())) return h::stored_in_native_order(type.get(), f);
  return h::checked(H5Tget_native_type(type.get(), H5T_DIR_ASCEND), H5Tclose,
                    "H5Tget_native_type", "no native type", f);
}

}  // namespace detail::pack

inline namespace GPUFEED_PACK_FORMATS {

inline pack_result repack_hdf5(const repack_source& from, const std::filesystem::path& out_dir,
                               const pack_options& o) {
  namespace d = detail::pack;
  const auto t0 = std::chrono::steady_clock::now();
  d::check_common(o);
  if (o.format != shard_format::hdf5 || o.lmdb_datum)
    throw config_error("pack: repacking an HDF5 dataset writes HDF5 shards (format hdf5)");
  hdf5_options ho;
  ho.dataset = from.dataset;
  ho.label_dataset = from.label_dataset;
  ho.keep_float16 = true;  // float16 rows as stored, written as float16
  auto src = std::make_shared<const hdf5_source>(from.file, ho);
  const std::uint64_t n = src->size();
  if (n == 0)
    throw config_error("pack: dataset '" + from.dataset + "' holds no records",
                       file_context(from.file));
  d::pack_job job;
  job.input_of = d::record_order(n, o.shuffle, o.seed);
  job.has_labels = has_labels(*src);
  job.sizes.reserve(static_cast<std::size_t>(n));
  for (const std::uint64_t i : job.input_of) {
    job.sizes.push_back(src->record_size(i));
    if (job.has_labels) job.labels.push_back(src->label(i));
  }
  const std::uint64_t row = src->fixed_record_size();
  detail::hdf5::handle type;
  std::size_t element = 1;
  job.chunk_bytes = o.chunk_bytes;
  if (row > 0) {  // fixed layout: the same type and row shape, chunks of whole rows
    type = d::native_type_of(from.file, from.dataset);
    element = H5Tget_size(type.get());
    job.shape.type = type.get();
    const auto& shape = src->shards().front().shape;
    job.shape.row.assign(shape.begin() + 1, shape.end());
    job.shape.row_bytes = row;
    job.align = row;
    job.chunk_bytes = std::max<std::uint64_t>(1, o.chunk_bytes / row) * row;
  }
  job.codec = d::codec_of(o, element);
  const auto order = std::make_shared<std::vector<std::uint64_t>>(job.input_of);
  job.parts = [src, order] {
    // One reader per batch: consecutive rows of a compressed chunk are decoded once.
    auto reader = std::make_shared<decltype(make_reader(*src))>(make_reader(*src));
    auto scratch = std::make_shared<std::vector<std::byte>>();
    return d::read_part_fn([src, order, reader, scratch](std::uint64_t r, std::byte* dst,
                                                         std::uint64_t len, std::uint64_t at) {
      const std::uint64_t i = (*order)[r];
      const std::size_t size = src->record_size(i);
      if (at == 0 && len == size) {
        reader->read(i, std::span<std::byte>(dst, size));
        return;
      }
      scratch->resize(size);
      reader->read(i, std::span<std::byte>(scratch->data(), size));
      std::memcpy(dst, scratch->data() + at, static_cast<std::size_t>(len));
    });
  };
  const std::string file = from.file.string(), dataset = from.dataset;
  job.describe = [order, file, dataset](std::uint64_t r) {
    return "source row " + std::to_string((*order)[r]) + " of '" + file + "' dataset '" +
           dataset + "'";
  };
  std::string source = "{\"file\": " + d::json_string(file) +
                       ", \"dataset\": " + d::json_string(dataset) + ", \"labels\": " +
                       (job.has_labels
                            ? d::json_string(src->shards().front().label_dataset)
                            : std::string("null"));
  if (o.shuffle) {
    source += ", \"rows\": [";
    for (std::size_t i = 0; i < order->size(); ++i)
      source += (i ? ", " : "") + std::to_string((*order)[i]);
    source += "]";
  }
  job.source_text = source + "}";
  d::refuse_inputs_inside_output({from.file}, out_dir);
  return d::run_job(job, out_dir, o, t0);
}

}  // inline namespace GPUFEED_PACK_FORMATS

}  // namespace gpufeed
