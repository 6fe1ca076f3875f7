#include "conveyor/train/model_registry.h"

#include "conveyor/common/error.h"
#include "conveyor/train/classifier_architecture.h"
#include "conveyor/train/gpt_architecture.h"
#include "conveyor/train/llama_architecture.h"

namespace conveyor {

const ModelArchitecture& ArchitectureOf(ModelKind kind) {
  static const GptArchitecture gpt;
  static const LlamaArchitecture llama;
  static const ClassifierArchitecture classifier;
  switch (kind) {
    case ModelKind::kGpt:
      return gpt;
    case ModelKind::kLlama:
      return llama;
    case ModelKind::kClassifier:
      return classifier;
  }
  CONVEYOR_ASSERT(false) << "unknown model kind " << static_cast<int>(kind);
  return gpt;
}

bool IsLanguageModel(ModelKind kind) { return ArchitectureOf(kind).language_model(); }

TransformerSpec ModelSizes(const ModelSpec& spec) { return ArchitectureOf(spec.kind).Sizes(spec); }

ModelKind HfModelKind(const HfModelConfig& folder) {
  return folder.gpt2() ? ModelKind::kGpt : ModelKind::kLlama;
}

nlohmann::json ModelSpecJson(const ModelSpec& spec) {
  nlohmann::json model = {{"model", ModelKindName(spec.kind)},
                          {"layers", spec.layers},
                          {"hidden", spec.hidden},
                          {"heads", spec.heads},
                          {"seq_len", spec.seq_len},
                          {"tie_embeddings", spec.tie_embeddings},
                          {"classes", spec.classes}};
  ArchitectureOf(spec.kind).RecordFields(spec, model);
  return model;
}

ModelSpec ModelSpecFromJson(const nlohmann::json& model, const std::string& name) {
  ModelSpec spec;
  spec.kind = ParseModelKind(model.at("model").get<std::string>(), name);
  spec.layers = model.at("layers");
  spec.hidden = model.at("hidden");
  spec.heads = model.at("heads");
  spec.seq_len = model.at("seq_len");
  spec.tie_embeddings = model.at("tie_embeddings");
  spec.classes = model.at("classes");
  ArchitectureOf(spec.kind).ReadFields(model, spec);
  return spec;
}

}  // namespace conveyor
