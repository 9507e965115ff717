#include "model/weights.h"

#include <set>

#include "base/error.h"
#include "model/json_util.h"
#include "model/mapped_file.h"
#include "model/safetensors.h"

namespace mpk::model {
namespace {

namespace fs = std::filesystem;
using detail::Json;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

// A shard name from the index must name a file inside the model directory.
void check_shard_name(const std::string& shard, const fs::path& index) {
  fs::path p(shard);
  bool escapes = shard.empty() || shard.find('\0') != std::string::npos || p.is_absolute() ||
                 p.has_root_path();
  for (const fs::path& part : p) escapes |= part == "..";
  MPK_CHECK(!escapes, InvalidModel) << index.string() << ": shard file name '" << shard
                                    << "' must be a relative path inside the model directory";
}

}  // namespace

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Weights::Weights() = default;
Weights::~Weights() = default;
Weights::Weights(Weights&&) noexcept = default;
Weights& Weights::operator=(Weights&&) noexcept = default;

Weights Weights::open(const fs::path& dir) {
  Weights w;
  std::error_code ec;
  fs::path single = dir / kSingleFile;
  fs::path index = dir / kIndexFile;
  // Like transformers, a single model.safetensors wins over an index.
  if (fs::exists(single, ec)) {
    auto file = std::make_unique<MappedFile>(single);
    for (Tensor& t : parse_safetensors(file->data(), file->size(), single.string())) {
      std::string name = t.name;
      w.tensors_.emplace(std::move(name), std::move(t));
    }
    w.files_.push_back(std::move(file));
    return w;
  }
  MPK_CHECK(fs::exists(index, ec), NotFound)
      << "no safetensors weights in '" << dir.string() << "': expected " << kSingleFile
      << " or " << kIndexFile;

  Json j = detail::read_json_file(index);
  detail::ObjectReader r(j, index.string());
  const Json* map = r.get("weight_map");
  MPK_CHECK(map && map->is_object(), InvalidModel)
      << index.string() << ": 'weight_map' must be an object {tensor: shard file}";
  std::map<std::string, std::string> shard_of;  // tensor -> shard, per the index
  std::set<std::string> shards;
  for (const auto& [name, file] : map->items()) {
    MPK_CHECK(file.is_string(), InvalidModel) << index.string() << ": weight_map['" << name
                                              << "'] must be a file name, got "
                                              << detail::describe(file);
    const std::string& shard = file.get_ref<const std::string&>();
    check_shard_name(shard, index);
    shard_of[name] = shard;
    shards.insert(shard);
  }

  // Read every shard before judging the index, so that a tensor stored twice is reported as
  // such rather than as misplaced.
  std::map<std::string, std::string> found_in;  // tensor -> shard it was read from
  for (const std::string& shard : shards) {
    fs::path path = dir / shard;
    MPK_CHECK(fs::exists(path, ec), NotFound)
        << path.string() << ": shard listed in " << kIndexFile << " not found";
    auto file = std::make_unique<MappedFile>(path);
    for (Tensor& t : parse_safetensors(file->data(), file->size(), path.string())) {
      auto [it, inserted] = found_in.emplace(t.name, shard);
      MPK_CHECK(inserted, InvalidModel)
          << "tensor '" << t.name << "' is stored in two shards: '" << it->second << "' and '"
          << shard << "'";
      std::string name = t.name;
      w.tensors_.emplace(std::move(name), std::move(t));
    }
    w.files_.push_back(std::move(file));
  }
  for (const auto& [name, shard] : found_in) {
    auto mapped = shard_of.find(name);
    MPK_CHECK(mapped != shard_of.end(), InvalidModel)
        << (dir / shard).string() << ": tensor '" << name << "' is not listed in " << kIndexFile;
    MPK_CHECK(mapped->second == shard, InvalidModel)
        << (dir / shard).string() << ": tensor '" << name << "' is in shard '" << shard
        << "' but " << kIndexFile << " maps it to '" << mapped->second << "'";
  }
  for (const auto& [name, shard] : shard_of) {
    MPK_CHECK(found_in.count(name), InvalidModel)
        << index.string() << ": tensor '" << name << "' is mapped to shard '" << shard
        << "', which does not contain it";
  }
  return w;
}

const Tensor* Weights::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const Tensor& Weights::at(const std::string& name) const {
  const Tensor* t = find(name);
  MPK_CHECK(t != nullptr, InvalidModel) << "tensor '" << name << "' not found in the weights";
  return *t;
}

}  // namespace mpk::model
