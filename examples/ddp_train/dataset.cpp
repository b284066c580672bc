#include "dataset.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "gpufeed/pack/pack.hpp"

namespace fs = std::filesystem;

namespace ddp {
namespace {

std::string spec_text(const dataset_spec& s) {
  std::ostringstream o;
  o << "records " << s.records << "\nfeatures " << s.features << "\nclasses " << s.classes
    << "\nseparation " << s.separation << "\nseed " << s.seed << "\n";
  return o.str();
}

std::vector<fs::path> list_shards(const fs::path& shards) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(shards))
    if (e.path().extension() == ".h5") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

void generate(const fs::path& dir, const dataset_spec& s) {
  const fs::path raw = dir / "raw";
  fs::remove_all(raw);
  fs::create_directories(raw);
  std::mt19937_64 rng(s.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> means(s.classes * s.features);
  for (auto& m : means) m = static_cast<float>(s.separation) * normal(rng);
  std::vector<gpufeed::pack_input> inputs;
  inputs.reserve(s.records);
  std::vector<float> x(s.features);
  for (std::size_t i = 0; i < s.records; ++i) {
    const std::size_t label = i % s.classes;
    for (std::size_t d = 0; d < s.features; ++d) x[d] = means[label * s.features + d] + normal(rng);
    char name[32];
    std::snprintf(name, sizeof name, "%08zu.f32", i);
    std::ofstream(raw / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(x.data()), static_cast<std::streamsize>(x.size() * 4));
    inputs.push_back({raw / name, name, static_cast<std::int64_t>(label)});
  }
  gpufeed::pack_options po;
  po.format = gpufeed::shard_format::hdf5;
  po.shard_bytes = std::max<std::uint64_t>(1, s.records * s.features * 4 / 3);  // a few shards
  po.threads = 2;
  for (std::size_t c = 0; c < s.classes; ++c) po.label_names.push_back("class" + std::to_string(c));
  gpufeed::pack(inputs, dir / "shards", po);
  fs::remove_all(raw);
  std::ofstream(dir / "spec.txt") << spec_text(s);
}

}  // namespace

std::vector<fs::path> prepare_dataset(const fs::path& dir, const dataset_spec& spec) {
  const fs::path shards = dir / "shards";
  if (!fs::exists(shards / "manifest.json")) generate(dir, spec);
  std::ifstream in(dir / "spec.txt");
  std::stringstream have;
  have << in.rdbuf();
  if (have.str() != spec_text(spec))
    throw gpufeed::config_error("the directory holds a dataset of another spec: use another --data",
                                gpufeed::file_context((dir / "spec.txt").string()));
  return list_shards(shards);
}

}  // namespace ddp
