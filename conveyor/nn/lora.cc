#include "conveyor/nn/lora.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "conveyor/common/error.h"
#include "conveyor/nn/layer.h"
#include "conveyor/nn/linear.h"
#include "conveyor/nn/transformer.h"

namespace conveyor {
namespace {

// "....q_proj.weight" -> "....q_proj.lora_X.weight"
std::string AdapterName(std::string_view weight_name, const char* which) {
  constexpr std::string_view kWeight = ".weight";
  CONVEYOR_ASSERT(weight_name.size() > kWeight.size() &&
                  weight_name.substr(weight_name.size() - kWeight.size()) == kWeight)
      << weight_name << " is not a weight's name";
  return std::string(weight_name.substr(0, weight_name.size() - kWeight.size())) + ".lora_" +
         which + ".weight";
}

}  // namespace

bool LoraConfig::Targets(std::string_view projection) const {
  return std::find(targets.begin(), targets.end(), projection) != targets.end();
}

const std::vector<std::string>& LoraTargetNames() {
  static const std::vector<std::string> names = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                 "gate_proj", "up_proj", "down_proj"};
  return names;
}

std::vector<std::string> DefaultLoraTargets() { return {"q_proj", "k_proj", "v_proj", "o_proj"}; }

std::vector<std::string> ParseLoraTargets(std::string_view text, std::string_view name) {
  if (text.empty()) return DefaultLoraTargets();
  std::vector<std::string> targets;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find(',', begin), text.size());
    const std::string word(text.substr(begin, end - begin));
    const std::vector<std::string>& known = LoraTargetNames();
    CONVEYOR_CHECK(std::find(known.begin(), known.end(), word) != known.end())
        << name << " '" << text << "': '" << word
        << "' names no layer of a llama's decoder layer (q_proj, k_proj, v_proj, o_proj, "
           "gate_proj, up_proj, down_proj)";
    CONVEYOR_CHECK(std::find(targets.begin(), targets.end(), word) == targets.end())
        << name << " '" << text << "' names '" << word << "' twice";
    targets.push_back(word);
    begin = end + 1;
  }
  return targets;
}

bool IsLoraParameter(std::string_view name) {
  return name.find(".lora_A.") != std::string_view::npos ||
         name.find(".lora_B.") != std::string_view::npos;
}

std::string LoraAName(std::string_view weight_name) { return AdapterName(weight_name, "A"); }
std::string LoraBName(std::string_view weight_name) { return AdapterName(weight_name, "B"); }

LoraAdapter::LoraAdapter(const std::string& weight_name, int64_t out, int64_t in, bool row_parallel,
                         const ParameterSpec& base_spec, const LoraConfig& config, uint64_t seed,
                         const TensorParallel& tp, ParameterSpecs& specs, WeightInit init)
    : weight_name_(weight_name), scale_(config.scale()) {
  const int64_t r = config.rank;
  // A replicated under a column-parallel base, B under a row-parallel one: each rank's
  // gradient of it is partial (the header), summed over tp x dp.
  const ParameterSpec a_spec = row_parallel ? RowParallel() : ReplicatedSpec(tp.size > 1);
  const ParameterSpec b_spec = row_parallel ? ReplicatedSpec(tp.size > 1) : base_spec;
  const std::string a_name = LoraAName(weight_name), b_name = LoraBName(weight_name);
  // Drawn also where the model's weights are read next (a base folder holds no adapters: they
  // start from these values; a checkpoint's overwrite them), but for shapes alone.
  if (init == WeightInit::kShapesOnly) {
    a_ = UndrawnParam(a_name, a_spec, {r, in}, tp, specs, init);
    b_ = UndrawnParam(b_name, b_spec, {out, r}, tp, specs, init);
    return;
  }
  // Kaiming-uniform with a = sqrt(5), as torch.nn.Linear's weights: bounds 1 / sqrt(in).
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  at::Generator gen = TensorInitGenerator(seed, a_name);
  const at::Tensor a = at::empty({r, in}).uniform_(-bound, bound, gen).requires_grad_(true);
  a_ = ShardParam(a_name, a_spec, a, tp, specs);
  b_ = ShardParam(b_name, b_spec, ZerosParam({out, r}), tp, specs);
}

NamedTensors LoraAdapter::NamedParameters() const {
  if (!defined()) return {};
  return {{LoraAName(weight_name_), a_}, {LoraBName(weight_name_), b_}};
}

std::vector<at::Tensor> LoraColumnParallelLinears(const at::Tensor& x,
                                                  const std::vector<ColumnLinear>& linears,
                                                  const std::vector<const LoraAdapter*>& adapters,
                                                  const TensorParallel& tp) {
  CONVEYOR_ASSERT(adapters.size() == linears.size())
      << adapters.size() << " adapters for " << linears.size() << " linears";
  // The A products join the base's: x (gathered under sequence parallelism) once, and x's
  // gradient through them summed over the group with the base's.
  std::vector<ColumnLinear> all = linears;
  std::vector<size_t> adapted;  // the linears with an adapter, in order
  for (size_t i = 0; i < adapters.size(); ++i) {
    if (adapters[i] == nullptr || !adapters[i]->defined()) continue;
    all.push_back({adapters[i]->a(), at::Tensor(), linears[i].input_grad_scale});
    adapted.push_back(i);
  }
  std::vector<at::Tensor> out = ColumnParallelLinears(x, all, tp);
  for (size_t j = 0; j < adapted.size(); ++j) {
    const size_t i = adapted[j];
    const LoraAdapter& adapter = *adapters[i];
    // (n, T, r) -> (n, T, out_i / p)
    out[i] = out[i] + Linear(out[linears.size() + j], adapter.b(), at::Tensor()) * adapter.scale();
  }
  out.resize(linears.size());
  return out;
}

at::Tensor LoraRowParallelLinear(const at::Tensor& x, const at::Tensor& weight,
                                 const LoraAdapter& adapter, const TensorParallel& tp) {
  if (!adapter.defined()) return RowParallelLinear(x, weight, at::Tensor(), tp);
  // This rank's partial products (n, T, out), summed over the group together.
  const at::Tensor partial = Linear(x, weight, at::Tensor());
  const at::Tensor update =
      Linear(Linear(x, adapter.a(), at::Tensor()), adapter.b(), at::Tensor()) * adapter.scale();
  if (tp.size == 1) return partial + update;
  // Summed in the weight's dtype, as RowParallelLinear's.
  return ReduceOutOfTensorParallel((partial + update).to(weight.scalar_type()), tp);
}

at::Tensor MergeLora(const at::Tensor& weight, const at::Tensor& a, const at::Tensor& b,
                     double scale) {
  return weight + scale * b.mm(a);
}

}  // namespace conveyor
