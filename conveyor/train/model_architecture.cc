#include "conveyor/train/model_architecture.h"

#include "conveyor/common/error.h"
#include "conveyor/formats/hf_checkpoint.h"
#include "conveyor/nn/lora.h"

namespace conveyor {

void ModelArchitecture::ReadHfConfig(const HfModelConfig&, const std::string& path,
                                     ModelSpec& spec) const {
  CONVEYOR_ASSERT(false) << path << ": a " << ModelKindName(spec.kind)
                         << " is never read from a Hugging Face folder";
}

HfModelConfig ModelArchitecture::HfConfig(const ModelSpec& spec) const {
  CONVEYOR_ASSERT(false) << "a " << ModelKindName(spec.kind) << " has no Hugging Face layout";
  return {};
}

std::vector<double> TransformerFlops(int layers, double t, double c, double head_per_token) {
  std::vector<double> flops = {t * c};  // embedding: a lookup and an add
  for (int l = 0; l < layers; ++l) flops.push_back(t * (24 * c * c + 4 * t * c));
  flops.push_back(head_per_token * t);
  return flops;
}

void ModelArchitecture::Check(const ModelSpec& spec, int) const {
  CONVEYOR_CHECK(spec.experts == 0)
      << "--experts " << spec.experts << ": Mixture-of-Experts MLPs are a llama's (--model llama)";
  CONVEYOR_CHECK(spec.lora_rank == 0 && spec.lora_alpha == 0 && spec.lora_targets.empty())
      << "--lora-rank " << spec.lora_rank << ": LoRA adapters are a llama's (--model llama or a "
      << "Llama folder), not a " << ModelKindName(spec.kind) << "'s";
}

void LoadFromFolder(const std::string& folder, const LayerList& layers, const TensorParallel& tp) {
  NamedTensors params;
  for (const auto& layer : layers) {
    for (auto& named : layer->NamedParameters()) {
      // A LoRA adapter starts from its own values; the folder holds the base.
      if (!IsLoraParameter(named.first)) params.push_back(std::move(named));
    }
  }
  HfCheckpoint(folder).LoadInto(params, ParameterSpecsOf(layers), tp);
}

}  // namespace conveyor
