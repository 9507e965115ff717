#include "model/weights.h"

#include <cstring>
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
  MPK_CHECK(!escapes, InvalidModel) << index.string() << ": shard file name '"
                                    << detail::printable(shard)
                                    << "' must be a relative path inside the model directory";
}

// Whether a directory entry exists, a dangling or looping symlink included: opening it then
// says what is wrong with it, instead of "not found".
bool present(const fs::path& p) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(p, ec));
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
  fs::path single = dir / kSingleFile;
  fs::path index = dir / kIndexFile;
  // Like transformers, a single model.safetensors wins over an index.
  if (present(single)) {
    auto file = std::make_unique<MappedFile>(single);
    for (Tensor& t : parse_safetensors(file->data(), file->size(), single.string())) {
      std::string name = t.name;
      w.tensors_.emplace(std::move(name), std::move(t));
    }
    w.files_.push_back(std::move(file));
    return w;
  }
  MPK_CHECK(present(index), NotFound)
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
    MPK_CHECK(file.is_string(), InvalidModel) << index.string() << ": weight_map['"
                                              << detail::printable(name)
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
    MPK_CHECK(present(path), NotFound)
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

namespace {

// Index of the first element whose exponent bits are all ones (NaN or +-Inf), or -1. The bits
// are tested directly: a float compare would need the values converted first.
template <typename U>
int64_t first_nonfinite_bits(const std::byte* data, size_t n, U exponent_mask) {
  for (size_t i = 0; i < n; ++i) {
    U u;
    std::memcpy(&u, data + i * sizeof(U), sizeof(U));
    if ((u & exponent_mask) == exponent_mask) return int64_t(i);
  }
  return -1;
}

}  // namespace

void check_finite(const Weights& w) {
  for (const auto& [name, t] : w.tensors()) {
    MPK_CHECK(t.data || t.nbytes == 0, BadState) << "the weights' bytes were released";
    int64_t bad = -1;
    switch (t.dtype) {
      case DType::F32: bad = first_nonfinite_bits<uint32_t>(t.data, t.nbytes / 4, 0x7f800000u); break;
      case DType::BF16: bad = first_nonfinite_bits<uint16_t>(t.data, t.nbytes / 2, 0x7f80u); break;
      case DType::F16: bad = first_nonfinite_bits<uint16_t>(t.data, t.nbytes / 2, 0x7c00u); break;
      case DType::I32: break;
    }
    MPK_CHECK(bad < 0, InvalidModel) << "tensor '" << detail::printable(name) << "' element " << bad
                                     << " is NaN or infinite";
  }
}

void Weights::make_resident() {
  MPK_CHECK(has_data_, BadState) << "the weights' bytes were released";
  for (auto& file : files_) {
    const std::byte* old_base = file->data();
    const size_t size = file->size();
    file->make_resident();
    const std::byte* new_base = file->data();
    for (auto& [name, t] : tensors_) {
      // Pointer comparison within one mapping: compare as integers.
      const auto p = reinterpret_cast<uintptr_t>(t.data), b = reinterpret_cast<uintptr_t>(old_base);
      if (old_base && p >= b && p - b <= size && (p - b < size || t.nbytes == 0))
        t.data = new_base + (p - b);
    }
  }
}

void Weights::release_data() {
  for (auto& file : files_) file->release();
  for (auto& [name, t] : tensors_) t.data = nullptr;
  has_data_ = false;
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
