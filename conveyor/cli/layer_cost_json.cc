#include "conveyor/cli/layer_cost_json.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <iterator>
#include <string>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

constexpr char kFormat[] = "conveyor layer costs 7";
// The names of kMeasuredKinds, in its order.
constexpr const char* kKinds[] = {"embedding", "block",        "block_selective",
                                  "head",      "sparse_block", "sparse_block_selective"};
constexpr int kDenseKinds = 4;  // every model has these; a Mixture-of-Experts model all
constexpr double LayerSample::*kFields[] = {
    &LayerSample::forward_s,    &LayerSample::input_s,          &LayerSample::weight_s,
    &LayerSample::backward_s,   &LayerSample::activation_bytes, &LayerSample::backward_bytes,
    &LayerSample::weight_bytes, &LayerSample::forward_bytes,    &LayerSample::infer_bytes,
    &LayerSample::infer_s};
constexpr const char* kFieldNames[] = {
    "forward_s",      "input_s",      "weight_s",      "backward_s",  "activation_bytes",
    "backward_bytes", "weight_bytes", "forward_bytes", "infer_bytes", "infer_s"};
constexpr int kNumFields = 10;

// A finite number >= 0 at `key` of `j`, named in the error as `where`.key.
double Number(const nlohmann::json& j, const char* key, const std::string& where) {
  CONVEYOR_CHECK(j.is_object() && j.contains(key) && j[key].is_number())
      << where << ": '" << key << "' must be a number";
  const double value = j[key].get<double>();
  CONVEYOR_CHECK(std::isfinite(value) && value >= 0)
      << where << ": '" << key << "' must be finite and >= 0, got " << value;
  return value;
}

// Each kind of `kinds` measured into `out`: its parameters and a sample a size.
void WriteKinds(const MeasuredKinds& kinds, nlohmann::json* out) {
  for (int k = 0; k < std::ssize(kKinds); ++k) {
    const MeasuredLayer& layer = kinds.*kMeasuredKinds[k];
    if (k >= kDenseKinds && layer.at.empty()) continue;
    nlohmann::json at = nlohmann::json::array();
    for (const LayerSample& sample : layer.at) {
      nlohmann::json row;
      for (int f = 0; f < kNumFields; ++f) row[kFieldNames[f]] = sample.*kFields[f];
      at.push_back(row);
    }
    (*out)[kKinds[k]] = {{"params", layer.params}, {"at", at}};
  }
}

// The kinds WriteKinds wrote into `j`, `sizes` samples each (the sparse ones where `sparse`);
// errors name `where`.
void ReadKinds(const nlohmann::json& j, size_t sizes, bool sparse, const std::string& where,
               MeasuredKinds* kinds) {
  for (int k = 0; k < (sparse ? std::ssize(kKinds) : kDenseKinds); ++k) {
    const std::string kind_where = where + ": " + kKinds[k];
    CONVEYOR_CHECK(j.is_object() && j.contains(kKinds[k])) << kind_where << " is missing";
    const nlohmann::json& layer = j[kKinds[k]];
    MeasuredLayer& out = kinds->*kMeasuredKinds[k];
    out.params = Number(layer, "params", kind_where);
    CONVEYOR_CHECK(layer.contains("at") && layer["at"].is_array() && layer["at"].size() == sizes)
        << kind_where << ": 'at' must hold a sample for each of the " << sizes << " sizes";
    out.at.resize(sizes);
    for (size_t i = 0; i < sizes; ++i) {
      for (int f = 0; f < kNumFields; ++f) {
        out.at[i].*kFields[f] = Number(layer["at"][i], kFieldNames[f], kind_where);
      }
    }
  }
}

}  // namespace

nlohmann::json LayerCostTableJson(const LayerCostTable& t, const std::string& describe) {
  const TransformerSpec& m = t.model;
  nlohmann::json out = {{"format", kFormat},
                        {"describe", describe},
                        {"device", t.device},
                        {"threads", t.threads},
                        {"element_bytes", t.element_bytes},
                        {"optimizer_s_per_param", t.optimizer_s},
                        {"optimizer_bytes_per_param", t.optimizer_bytes},
                        {"cores", t.cores},
                        {"capacity", t.capacity},
                        {"capacity_ranks", t.capacity_ranks},
                        {"calibration", t.calibration},
                        {"sequences", t.sequences},
                        {"model",
                         {{"layers", m.layers},
                          {"hidden", m.hidden},
                          {"heads", m.heads},
                          {"kv_heads", m.kv()},
                          {"intermediate", m.mlp()},
                          {"vocab", m.vocab},
                          {"seq_len", m.seq_len},
                          {"gated_mlp", m.gated_mlp}}}};
  if (m.experts > 0) {
    nlohmann::json& model = out["model"];
    model["experts"] = m.experts;
    model["top_k"] = m.top_k;
    model["expert_units"] = m.expert_units;
    model["shared_units"] = m.shared_units;
    model["dense_blocks"] = m.dense_blocks;
  }
  WriteKinds(t, &out);
  nlohmann::json shards = nlohmann::json::object();
  for (const auto& [tp, kinds] : t.tp_shards) WriteKinds(kinds, &shards[std::to_string(tp)]);
  out["tp_shards"] = shards;
  return out;
}

LayerCostTable ReadLayerCostTable(const std::string& path) {
  std::ifstream in(path);
  CONVEYOR_CHECK(in.good()) << "--costs " << path << ": cannot be read";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    CONVEYOR_CHECK(false) << "--costs " << path << ": not JSON (" << e.what() << ")";
  }
  const std::string where = "--costs " + path;
  CONVEYOR_CHECK(j.is_object() && j.value("format", "") == kFormat)
      << where << ": not a file of this `conveyor profile` (format '" << kFormat
      << "'; a file of an older one: profile again)";
  LayerCostTable t;
  t.device = j.value("device", "");
  t.threads = static_cast<int>(Number(j, "threads", where));
  t.element_bytes = Number(j, "element_bytes", where);
  t.optimizer_s = Number(j, "optimizer_s_per_param", where);
  t.optimizer_bytes = Number(j, "optimizer_bytes_per_param", where);
  t.cores = static_cast<int>(Number(j, "cores", where));
  t.capacity_ranks = static_cast<int>(Number(j, "capacity_ranks", where));
  CONVEYOR_CHECK(t.cores >= 1 && t.threads >= 1 && t.capacity_ranks >= 1)
      << where << ": 'cores', 'capacity_ranks' and 'threads' must be positive";
  const nlohmann::json& sizes = j["sequences"];
  bool ascending = sizes.is_array() && sizes.size() >= 2;
  for (size_t k = 0; ascending && k < sizes.size(); ++k) {
    ascending = sizes[k].is_number_integer() && sizes[k].get<int64_t>() >= 1 &&
                (k == 0 || sizes[k - 1].get<int64_t>() < sizes[k].get<int64_t>());
    if (ascending) t.sequences.push_back(sizes[k].get<int64_t>());
  }
  CONVEYOR_CHECK(ascending) << where << ": 'sequences' must be two or more increasing sizes";
  // A size each: a factor, and a capacity for each count of busy ranks.
  auto factors = [&](const nlohmann::json& given, size_t count, const std::string& what) {
    CONVEYOR_CHECK(given.is_array() && given.size() == count)
        << where << ": " << what << " must hold " << count << " factors";
    std::vector<double> out;
    for (const nlohmann::json& factor : given) {
      CONVEYOR_CHECK(factor.is_number() && factor.get<double>() > 0)
          << where << ": " << what << " must hold positive factors";
      out.push_back(factor.get<double>());
    }
    return out;
  };
  t.calibration = factors(j["calibration"], t.sequences.size(), "'calibration' (one a size)");
  const nlohmann::json& capacity = j["capacity"];
  CONVEYOR_CHECK(capacity.is_array() && capacity.size() == t.sequences.size())
      << where << ": 'capacity' must hold a list for each of the " << t.sequences.size()
      << " sizes";
  t.capacity.clear();
  for (const nlohmann::json& by_busy : capacity) {
    t.capacity.push_back(factors(by_busy, static_cast<size_t>(t.capacity_ranks),
                                 "'capacity' (at each size, one for 1 to 'capacity_ranks' busy)"));
  }
  const nlohmann::json& m = j["model"];
  const std::string model_where = where + ": model";
  // The integer at `key`, at least `least`.
  auto integer = [&](const char* key, int64_t least = 1) {
    const double value = Number(m, key, model_where);
    CONVEYOR_CHECK(value >= static_cast<double>(least) && value < 1e9 && value == std::floor(value))
        << model_where << ": '" << key << "' must be an integer of at least " << least;
    return static_cast<int64_t>(value);
  };
  t.model = TransformerSpec{.layers = integer("layers"),
                            .hidden = integer("hidden"),
                            .heads = integer("heads"),
                            .kv_heads = integer("kv_heads"),
                            .intermediate = integer("intermediate"),
                            .vocab = integer("vocab"),
                            .seq_len = integer("seq_len"),
                            .gated_mlp = m.value("gated_mlp", false)};
  if (m.contains("experts")) {
    t.model.experts = integer("experts");
    t.model.top_k = integer("top_k");
    t.model.expert_units = integer("expert_units", 0);
    t.model.shared_units = integer("shared_units", 0);
    CONVEYOR_CHECK(m.contains("dense_blocks") && m["dense_blocks"].is_array())
        << model_where << ": 'dense_blocks' must be a list of blocks";
    for (const nlohmann::json& block : m["dense_blocks"]) {
      CONVEYOR_CHECK(
          block.is_number_integer() && block.get<int64_t>() >= 0 &&
          block.get<int64_t>() < t.model.layers &&
          (t.model.dense_blocks.empty() || block.get<int64_t>() > t.model.dense_blocks.back()))
          << model_where << ": 'dense_blocks' must hold blocks of the model, ascending";
      t.model.dense_blocks.push_back(block.get<int64_t>());
    }
  }
  ReadKinds(j, t.sequences.size(), t.model.experts > 0, where, &t);
  const nlohmann::json& shards = j["tp_shards"];
  CONVEYOR_CHECK(shards.is_object()) << where << ": 'tp_shards' must be an object";
  for (const auto& [key, kinds] : shards.items()) {
    int tp = 0;
    const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), tp);
    CONVEYOR_CHECK(error == std::errc() && end == key.data() + key.size() && tp > 1)
        << where << ": 'tp_shards' is keyed by TP sizes above 1, not '" << key << "'";
    ReadKinds(kinds, t.sequences.size(), /*sparse=*/false, where + ": tp_shards." + key,
              &t.tp_shards[tp]);
  }
  return t;
}

}  // namespace conveyor
