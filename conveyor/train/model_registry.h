// The registry of architectures: the one place that maps a ModelKind to its
// ModelArchitecture, and what every architecture shares through it (the fields every
// checkpoint records, which architecture a Hugging Face folder holds).
//
// Thread-safety: the architectures are immutable statics; every function is pure or reads
// files only.
#ifndef CONVEYOR_TRAIN_MODEL_REGISTRY_H_
#define CONVEYOR_TRAIN_MODEL_REGISTRY_H_

#include <nlohmann/json.hpp>
#include <string>

#include "conveyor/nn/hf_config.h"
#include "conveyor/sim/model_spec.h"
#include "conveyor/sim/transformer_spec.h"
#include "conveyor/train/model_architecture.h"

namespace conveyor {

const ModelArchitecture& ArchitectureOf(ModelKind kind);

// Whether a model of `kind` predicts the next token (gpt, llama): it can be evaluated by its
// held-out loss and sampled from.
bool IsLanguageModel(ModelKind kind);

// The sizes of `spec` as its architecture builds them (ModelArchitecture::Sizes).
TransformerSpec ModelSizes(const ModelSpec& spec);

// The architecture a Hugging Face config.json describes: llama, or gpt for a GPT-2.
ModelKind HfModelKind(const HfModelConfig& folder);

// What a checkpoint records of `spec` (its "model" object): the kind's name ("model"),
// layers, hidden, heads, seq_len, tie_embeddings and classes, then the architecture's own
// fields (ModelArchitecture::RecordFields). A run loads a checkpoint only when each of these
// equals its own.
nlohmann::json ModelSpecJson(const ModelSpec& spec);
// The spec ModelSpecJson recorded (model_dir empty). UserError naming `name` and the kind
// for an unknown kind; nlohmann::json's exceptions for a missing or mistyped field.
ModelSpec ModelSpecFromJson(const nlohmann::json& model, const std::string& name);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_MODEL_REGISTRY_H_
