// gpufeed inspect — what gpufeed sees in shards: layout, dtype/shape, storage, filters, read
// path, records and bytes, image sizes of a sample of records (inspect_images.hpp); with
// --checksums, every record's size and crc32 as the loader would deliver it.
//
//   gpufeed inspect SHARD... [--dataset NAME] [--datum] [--checksums] [--names] [--verify]
//                   [--json]
//
// A SHARD is an HDF5 file (detected by its signature), an LMDB environment directory (one
// holding data.mdb) or its data.mdb, or a pack directory or its manifest.json (the shards it
// lists; one without a complete manifest is refused: the pack did not finish). An HDF5 file
// without the dataset to read, --dataset not given, is described by the list of its datasets
// (shape, dtype, chunks, filters) instead. Every shard is opened (and so validated) before anything is printed.
// The manifest.json gpufeed pack wrote beside a shard is read when present: an LMDB shard it
// lists as Caffe Datum is read as Datum without --datum, and its record index -> name map names
// LMDB records (HDF5 shards hold their names in names/). --names prints only lines
// "INDEX NAME" (global index over the shards given; with --json, a "names" array).
// --checksums prints only lines "INDEX SIZE CRC32" (global index over the shards given, in
// decimal; size in bytes; zlib crc32 of the delivered bytes as 8 lowercase hex digits), so two
// runs can be diffed; with --json they go into the JSON instead. --verify reads every record
// of each shard and checks its count, bytes and crc32 against pack's manifest.json beside it
// (the check a source makes when it opens a shard, size and fingerprint, does not read every
// byte): a mismatch is exit code 1 naming the shard; a shard the manifest does not list is a
// config error. Bad input: exit code 1 and one
// line on stderr naming the file (and record).
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "commands.hpp"
#include "inspect_datasets.hpp"
#include "inspect_images.hpp"
#include "gpufeed/detail/pack_directory.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/lmdb_source.hpp"
#include "gpufeed/pack/hdf5_extras.hpp"
#include "gpufeed/pack/pack.hpp"
#include "report.hpp"
#include "shards.hpp"

namespace gpufeed::cli {
namespace {

using json = nlohmann::ordered_json;

struct inspect_args {
  std::vector<std::string> shards;
  std::string dataset = "data";
  bool dataset_given = false;
  bool datum = false, checksums = false, names = false, as_json = false, verify = false;
};

// What gpufeed pack's manifest.json beside a shard says about it; found = false when there is
// none, it is not pack's, or it does not list the shard.
struct manifest_entry {
  bool found = false, datum = false;
  std::vector<std::string> names;  // the shard's records' names, in record order
  std::uint64_t records = 0, bytes = 0;
  std::string crc32;  // 8 hex digits: crc32 of the shard's record bytes, records in order
  std::string manifest;
};

manifest_entry manifest_for(const std::string& shard) {
  manifest_entry e;
  std::filesystem::path p = std::filesystem::path(shard).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // "x.lmdb/"
  const std::string file = p.filename().string();
  const std::filesystem::path dir = p.has_parent_path() ? p.parent_path() : ".";
  std::ifstream in(dir / "manifest.json");
  if (!in) return e;
  const json m = json::parse(in, nullptr, false);
  if (m.is_discarded() || !m.is_object() || m.value("kind", "") != "gpufeed pack manifest")
    return e;
  for (const auto& s : m.value("shards", json::array())) {
    if (!s.is_object() || s.value("file", "") != file) continue;
    e.found = true;
    e.manifest = (dir / "manifest.json").string();
    e.records = s.value("records", std::uint64_t{0});
    e.bytes = s.value("bytes", std::uint64_t{0});
    e.crc32 = s.value("crc32", "");
    const auto& o = m.value("options", json::object());
    e.datum = o.is_object() && o.value("lmdb_datum", false);
    const auto& names = m.value("names", json::array());
    const auto first = s.value("first_record", std::uint64_t{0});
    const auto count = s.value("records", std::uint64_t{0});
    if (names.is_array() && names.size() >= first + count)
      for (std::uint64_t i = first; i < first + count; ++i)
        e.names.push_back(names[i].is_string() ? names[i].get<std::string>() : "");
  }
  return e;
}

struct opened {
  std::string path;
  std::variant<hdf5_source, lmdb_source> source;
  hdf5_shard_extras extras;
  std::uint64_t first = 0;
  manifest_entry manifest;
};

json hdf5_summary(const opened& o, const hdf5_source& s) {
  const hdf5_shard_info& i = s.shards().front();
  json j;
  j["path"] = o.path;
  j["format"] = "hdf5";
  j["layout"] = i.layout;
  j["dtype"] = i.dtype;
  j["shape"] = i.shape;
  j["storage"] = i.storage;
  j["chunk_shape"] = i.chunk_shape;
  j["filters"] = i.filters;
  j["read_path"] = to_string(i.read_path);
  if (!i.fallback_reason.empty()) j["fallback_reason"] = i.fallback_reason;
  j["first_record"] = o.first;
  j["records"] = i.records;
  j["bytes"] = i.data_bytes;
  j["labels"] = o.extras.has_labels;
  j["names"] = o.extras.has_names;
  if (o.extras.has_names && !o.extras.names.empty()) j["first_name"] = o.extras.names.front();
  return j;
}

json lmdb_summary(const opened& o, const lmdb_source& s) {
  const lmdb_shard_info& i = s.shards().front();
  json j;
  j["path"] = o.path;
  j["format"] = "lmdb";
  j["values"] = i.format;
  j["read_path"] = "mdb_get";
  j["first_record"] = o.first;
  j["records"] = i.records;
  j["bytes"] = i.data_bytes;
  j["min_record"] = i.min_record;
  j["max_record"] = i.max_record;
  j["labels"] = s.has_labels();
  j["names"] = !o.manifest.names.empty();
  if (!o.manifest.names.empty()) j["first_name"] = o.manifest.names.front();
  if (i.records) {
    const auto k0 = s.key(0), k1 = s.key(i.records - 1);
    j["first_key"] = std::string(reinterpret_cast<const char*>(k0.data()), k0.size());
    j["last_key"] = std::string(reinterpret_cast<const char*>(k1.data()), k1.size());
  }
  return j;
}

std::string list_text(const json& a) {
  std::string s;
  for (const auto& v : a) s += (s.empty() ? "" : ", ") + v.dump();
  return "[" + s + "]";
}

void print_text(const json& j) {
  const std::string path = one_line(j["path"].get<std::string>());
  const auto rec = j["records"].get<std::uint64_t>();
  const auto first = j["first_record"].get<std::uint64_t>();
  std::printf("%s  %s\n", path.c_str(), j["format"] == "hdf5" ? "HDF5" : "LMDB");
  if (j["format"] == "hdf5") {
    std::printf("  layout     %s, dtype %s, shape %s\n", j["layout"].get<std::string>().c_str(),
                j["dtype"].get<std::string>().c_str(), list_text(j["shape"]).c_str());
    std::printf("  storage    %s", j["storage"].get<std::string>().c_str());
    if (!j["chunk_shape"].empty()) std::printf(", chunks %s", list_text(j["chunk_shape"]).c_str());
    std::string filters;
    for (const auto& f : j["filters"])
      filters += (filters.empty() ? "" : ", ") + f.get<std::string>();
    std::printf(", filters %s\n", filters.empty() ? "none" : filters.c_str());
    std::printf("  read path  %s", j["read_path"].get<std::string>().c_str());
    if (j.contains("fallback_reason"))
      std::printf(" (%s)", one_line(j["fallback_reason"].get<std::string>()).c_str());
    std::printf("\n");
  } else {
    std::printf("  values     %s, read by mdb_get, keys %s .. %s\n",
                j["values"].get<std::string>().c_str(),
                j.contains("first_key") ? one_line(j["first_key"].get<std::string>()).c_str() : "-",
                j.contains("last_key") ? one_line(j["last_key"].get<std::string>()).c_str() : "-");
  }
  std::printf("  records    %" PRIu64, rec);
  if (rec) std::printf(" (global %" PRIu64 "..%" PRIu64 ")", first, first + rec - 1);
  std::printf("\n  bytes      %" PRIu64 "\n", j["bytes"].get<std::uint64_t>());
  std::printf("  labels     %s\n", j["labels"].get<bool>() ? "yes" : "no");
  if (j.contains("names"))
    std::printf("  names      %s%s%s\n",
                j["names"].get<bool>() ? (j["format"] == "hdf5" ? "yes" : "yes (manifest.json)")
                                       : "no",
                j.contains("first_name")
                    ? (", first '" + one_line(j["first_name"].get<std::string>()) + "'").c_str()
                    : "",
                j["names"].get<bool>() ? " (--names lists them)" : "");
}

template <class Source>
void checksums(const opened& o, const Source& s, json* out) {
  auto reader = make_reader(s);
  std::vector<std::byte> buf(std::max<std::size_t>(s.max_record_size(), 1));
  for (std::uint64_t i = 0; i < s.size(); ++i) {
    const std::size_t n = s.record_size(i);
    reader.read(i, std::span<std::byte>(buf.data(), n));
    const auto crc = detail::pack::crc32_of(buf.data(), n);
    if (out) {
      out->push_back({{"index", o.first + i}, {"size", n}, {"crc32", detail::pack::hex32(crc)}});
    } else {
      std::printf("%" PRIu64 " %zu %08x\n", o.first + i, n, static_cast<unsigned>(crc));
    }
  }
}

// --verify: every record of the shard read, its count, bytes and crc32 against the manifest's.
template <class Source>
void verify(const opened& o, const Source& s, json* out) {
  if (!o.manifest.found)
    throw config_error("--verify checks a shard against gpufeed pack's manifest.json beside it, "
                       "which does not list it",
                       file_context(o.path));
  auto reader = make_reader(s);
  std::vector<std::byte> buf(std::max<std::size_t>(s.max_record_size(), 1));
  std::uint64_t bytes = 0;
  std::uint32_t crc = 0;
  for (std::uint64_t i = 0; i < s.size(); ++i) {
    const std::size_t n = s.record_size(i);
    reader.read(i, std::span<std::byte>(buf.data(), n));
    crc = detail::pack::crc32_join(crc, detail::pack::crc32_of(buf.data(), n), n);
    bytes += n;
  }
  const std::string got = detail::pack::hex32(crc);
  if (s.size() != o.manifest.records || bytes != o.manifest.bytes || got != o.manifest.crc32)
    throw corrupt_error("the shard's records differ from what " + o.manifest.manifest +
                            " says (" + std::to_string(s.size()) + " records, " +
                            std::to_string(bytes) + " bytes, crc32 " + got + "; the manifest: " +
                            std::to_string(o.manifest.records) + " records, " +
                            std::to_string(o.manifest.bytes) + " bytes, crc32 " +
                            o.manifest.crc32 + ")",
                        file_context(o.path));
  if (out)
    out->push_back({{"path", o.path}, {"records", s.size()}, {"bytes", bytes}, {"crc32", got}});
  else
    std::printf("verified %s: %" PRIu64 " records, %" PRIu64 " bytes, crc32 %s\n",
                o.path.c_str(), s.size(), bytes, got.c_str());
}

void run_inspect(const inspect_args& a) {
  // A pack directory (or its manifest) stands for its shards.
  std::vector<std::string> paths;
  for (const std::string& p : a.shards) {
    if (auto listed = detail::pack_directory_shards(p))
      for (const auto& s : *listed) paths.push_back(s.string());
    else
      paths.push_back(p);
  }
  if (paths.size() == 1 && !a.dataset_given && !a.checksums && !a.names && !is_lmdb(paths[0])) {
    const auto list = hdf5_datasets(paths[0]);
    if (!has_dataset(list, a.dataset)) return print_datasets(paths[0], list, a.as_json);
  }
  std::vector<opened> shards;
  std::uint64_t first = 0;
  for (const std::string& p : paths) {
    if (is_lmdb(p)) {
      manifest_entry m = manifest_for(p);
      lmdb_options lo;
      if (a.datum || m.datum) lo.format = lmdb_options::value_format::datum;
      shards.push_back({p, lmdb_source(p, lo), {}, first, std::move(m)});
    } else {
      if (a.datum)
        throw config_error("--datum reads LMDB values as Caffe Datum; this is an HDF5 file",
                           file_context(p));
      // The source first: its errors say best what is wrong with a damaged file.
      hdf5_options ho;
      ho.dataset = a.dataset;
      // pack's labels belong to its "data" dataset: read (and so checked) only with it.
      if (a.dataset != "data") ho.label_dataset = "";
      hdf5_source src(p, ho);
      const hdf5_shard_extras x = read_hdf5_extras(p, !a.checksums || a.names);
      shards.push_back(
          {p, std::move(src), x, first, a.verify ? manifest_for(p) : manifest_entry{}});
    }
    first += std::visit([](const auto& s) { return s.size(); }, shards.back().source);
  }
  json doc;
  if (a.names) {
    json names = json::array();
    for (const opened& o : shards) {
      const auto& v = o.extras.has_names ? o.extras.names : o.manifest.names;
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (a.as_json)
          names.push_back({{"index", o.first + i}, {"name", v[i]}});
        else
          std::printf("%" PRIu64 " %s\n", o.first + i, one_line(v[i]).c_str());
      }
    }
    if (a.as_json) doc["names"] = std::move(names);
  }
  if (a.verify) {  // before anything else is printed: a mismatch is the answer
    json list = json::array();
    for (const opened& o : shards)
      std::visit([&](const auto& s) { verify(o, s, a.as_json ? &list : nullptr); }, o.source);
    if (a.as_json) doc["verified"] = std::move(list);
  }
  if (a.as_json || (!a.checksums && !a.names && !a.verify)) {
    json list = json::array();
    std::uint64_t bytes = 0;
    for (const opened& o : shards) {
      json j = std::visit(
          [&](const auto& s) {
            if constexpr (std::is_same_v<std::decay_t<decltype(s)>, hdf5_source>)
              return hdf5_summary(o, s);
            else
              return lmdb_summary(o, s);
          },
          o.source);
      bytes += j["bytes"].get<std::uint64_t>();
#ifdef GPUFEED_CLI_HAS_IMAGE
      j["images"] = std::visit([&](const auto& s) { return image_sample(s, o.first); }, o.source);
#endif
      if (!a.as_json) print_text(j);
#ifdef GPUFEED_CLI_HAS_IMAGE
      if (!a.as_json) print_image_sample(j["images"]);
#endif
      list.push_back(std::move(j));
    }
    doc["shards"] = std::move(list);
    doc["records"] = first;
    doc["bytes"] = bytes;
    // What the shards take on disk (an LMDB shard: its environment's files), against the
    // records' bytes: the compression ratio, or LMDB's page overhead.
    std::uint64_t disk = 0;
    std::error_code ec;
    for (const opened& o : shards) {
      std::filesystem::path p = o.path;
      if (p.filename() == "data.mdb") p = p.parent_path();
      if (std::filesystem::is_directory(p, ec)) {
        for (const auto& e : std::filesystem::directory_iterator(p, ec))
          if (e.is_regular_file(ec)) disk += e.file_size(ec);
      } else {
        disk += std::filesystem::file_size(p, ec);
      }
    }
    const double ratio = disk ? static_cast<double>(bytes) / static_cast<double>(disk) : 0.0;
    doc["disk_bytes"] = disk;
    doc["compression_ratio"] = ratio;
    if (!a.as_json)
      std::printf("total: %zu shard%s, %" PRIu64 " records, %" PRIu64 " bytes; on disk %" PRIu64
                  " bytes (%.2fx)\n",
                  shards.size(), shards.size() == 1 ? "" : "s", first, bytes, disk, ratio);
  }
  if (a.checksums) {
    json sums = json::array();
    for (const opened& o : shards)
      std::visit([&](const auto& s) { checksums(o, s, a.as_json ? &sums : nullptr); }, o.source);
    if (a.as_json) doc["checksums"] = std::move(sums);
  }
  if (a.as_json)
    std::printf("%s\n", doc.dump(2, ' ', false, json::error_handler_t::replace).c_str());
  if (std::fflush(stdout) != 0) throw io_error("cannot write to standard output");
}

}  // namespace

void add_inspect(CLI::App& app) {
  auto a = std::make_shared<inspect_args>();
  CLI::App* cmd = app.add_subcommand(
      "inspect",
      "Show what gpufeed sees in HDF5 files and LMDB directories: layout, dtype, "
      "storage, filters, read path, records, bytes; --checksums: each record's crc32");
  cmd->add_option("shards", a->shards,
                  "HDF5 files, LMDB directories (or their data.mdb) and pack directories, in "
                  "record order")
      ->required();
  auto* dataset = cmd->add_option("--dataset", a->dataset,
                                  "HDF5 dataset holding the records (not given, a file without "
                                  "'data' is described by the list of its datasets)")
                      ->capture_default_str();
  cmd->add_flag("--datum", a->datum,
                "LMDB values are Caffe Datum messages (records = payloads); detected from a "
                "gpufeed pack manifest.json beside the shard");
  cmd->add_flag("--checksums", a->checksums,
                "print only 'INDEX SIZE CRC32' per record (decimal, bytes, 8 hex digits)");
  cmd->add_flag("--names", a->names,
                "print only 'INDEX NAME' per record: the record index -> input name map");
  cmd->add_flag("--verify", a->verify,
                "read every record and check each shard's record count, bytes and crc32 "
                "against gpufeed pack's manifest.json beside it");
  cmd->add_flag("--json", a->as_json, "one JSON document on stdout");
  cmd->callback([a, dataset] {
    a->dataset_given = dataset->count() > 0;
    try {
      run_inspect(*a);
    } catch (...) {
      fail_current("inspect");
    }
  });
}

}  // namespace gpufeed::cli
