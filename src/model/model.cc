#include "model/model.h"

#include <algorithm>
#include <set>
#include <string_view>

#include "base/error.h"
#include "base/log.h"

namespace mpk::model {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxNamesListed = 5;

bool ignored_buffer(const std::string& name) {
  constexpr std::string_view kSuffix = "rotary_emb.inv_freq";
  return name.size() >= kSuffix.size() &&
         name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
}

std::string list_names(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < kMaxNamesListed; ++i)
    s += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > kMaxNamesListed)
    s += " and " + std::to_string(names.size() - kMaxNamesListed) + " more";
  return s;
}

void check_shape(const Tensor& t, const std::vector<int64_t>& want, const fs::path& dir) {
  MPK_CHECK(t.shape == want, InvalidModel)
      << dir.string() << ": tensor '" << t.name << "' has shape " << shape_to_string(t.shape)
      << ", expected " << shape_to_string(want);
}

// The layers of [0, num_layers) the files hold a tensor of ("model.layers.N." names): at most
// one per tensor, whatever the indices say.
int64_t layers_in_files(const Weights& w, int64_t num_layers) {
  constexpr std::string_view kPrefix = "model.layers.";
  std::set<int64_t> layers;
  for (const auto& [name, t] : w.tensors()) {
    if (name.compare(0, kPrefix.size(), kPrefix) != 0) continue;
    int64_t n = 0;
    size_t i = kPrefix.size();
    for (; i < name.size() && name[i] >= '0' && name[i] <= '9' && n < (int64_t(1) << 40); ++i)
      n = n * 10 + (name[i] - '0');
    if (i > kPrefix.size() && i < name.size() && name[i] == '.' && n < num_layers) layers.insert(n);
  }
  return int64_t(layers.size());
}

// Checks the tensor set against the config; sets the weights' dtype and parameter count.
void check_tensor_set(Model& m) {
  // The config's layer count is checked against the files before anything proportional to it
  // is built: a config claiming a million layers must not cost gigabytes to reject, nor one
  // tensor named after layer 2^31 - 2 let it through.
  const int64_t stored = layers_in_files(m.weights, m.config.num_layers);
  MPK_CHECK(m.config.num_layers <= stored, InvalidModel)
      << m.dir.string() << ": config.json has num_hidden_layers = " << m.config.num_layers
      << " but the weights hold " << stored << " of those layer(s)";
  const auto expected = expected_tensors(m.config);
  std::vector<std::string> missing, unexpected;
  for (const auto& [name, shape] : expected)
    if (!m.weights.find(name)) missing.push_back(name);
  MPK_CHECK(missing.empty(), InvalidModel)
      << m.dir.string() << ": " << missing.size() << " tensor(s) required by the "
      << m.config.architecture << " config are missing: " << list_names(missing);

  for (const auto& [name, t] : m.weights.tensors()) {
    if (expected.count(name) || ignored_buffer(name)) continue;
    if (name == "lm_head.weight" && m.config.tie_word_embeddings) {
      // Some checkpoints store the tied head anyway; it must at least match the embedding.
      check_shape(t, {m.config.vocab_size, m.config.hidden_size}, m.dir);
      continue;
    }
    unexpected.push_back(name);
  }
  MPK_CHECK(unexpected.empty(), InvalidModel)
      << m.dir.string() << ": " << unexpected.size() << " tensor(s) not used by the "
      << m.config.architecture << " config: " << list_names(unexpected);

  const Tensor* first = nullptr;
  m.num_parameters = 0;
  for (const auto& [name, shape] : expected) {
    const Tensor& t = m.weights.at(name);
    check_shape(t, shape, m.dir);
    if (!first) first = &t;
    MPK_CHECK(t.dtype == first->dtype, Unsupported)
        << m.dir.string() << ": mixed weight dtypes are not supported: '" << first->name
        << "' is " << dtype_name(first->dtype) << " but '" << t.name << "' is "
        << dtype_name(t.dtype);
    m.num_parameters += uint64_t(t.numel());
  }
  m.dtype = first->dtype;  // expected_tensors always holds the embedding
}

}  // namespace

std::unique_ptr<Model> load(const fs::path& dir) {
  std::error_code ec;
  MPK_CHECK(fs::is_directory(dir, ec), NotFound)
      << "model directory '" << dir.string() << "' does not exist or is not a directory";
  auto m = std::make_unique<Model>();
  m->dir = dir;
  m->config = load_config(dir);
  m->weights = Weights::open(dir);
  check_tensor_set(*m);
  log(LogLevel::Info, "loaded {} ({}): {} layers, {} parameters, {}", dir.string(),
      m->config.architecture, m->config.num_layers, m->num_parameters, dtype_name(m->dtype));
  return m;
}

}  // namespace mpk::model
