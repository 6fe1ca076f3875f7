// One architecture conveyor trains (gpt, llama, classifier), all it knows of it in one place:
// which of ModelSpec's fields apply and the sizes they give, the relations its fields must
// keep, how a Hugging Face config.json sets them, which of them a checkpoint records, and
// the model (ModelTask) it builds. The registry (model_registry.h) holds one per ModelKind;
// a new architecture is a new subclass there, a new field of one a field of ModelSpec
// (sim/model_spec.h), its flag (cli/train_flags.cc) and the methods here that read it.
//
// Thread-safety: implementations are stateless; one instance serves every rank.
#ifndef CONVEYOR_TRAIN_MODEL_ARCHITECTURE_H_
#define CONVEYOR_TRAIN_MODEL_ARCHITECTURE_H_

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "conveyor/nn/hf_config.h"
#include "conveyor/nn/layer.h"
#include "conveyor/nn/tensor_parallel.h"
#include "conveyor/sim/model_spec.h"
#include "conveyor/sim/transformer_spec.h"
#include "conveyor/train/model_task.h"

namespace conveyor {

class ModelArchitecture {
 public:
  virtual ~ModelArchitecture() = default;

  // Whether the model predicts the next token: evaluated by its held-out loss, sampled from.
  virtual bool language_model() const = 0;

  // The sizes a model of `spec` has, every derived one resolved: key-value heads (kv()),
  // MLP units (mlp()) and the vocabulary.
  virtual TransformerSpec Sizes(const ModelSpec& spec) const = 0;

  // UserError naming the fields when `spec` (each field within its range, hidden a multiple
  // of heads that tp divides) cannot be built, or split over `tp` tensor-parallel ranks. The
  // default refuses Mixture-of-Experts fields (an architecture without them).
  virtual void Check(const ModelSpec& spec, int tp) const;

  // The most positions a model of `spec` can attend over (a position table's rows), or
  // INT_MAX when it has no bound (rotary positions).
  virtual int ContextLimit(const ModelSpec& spec) const { return spec.seq_len; }

  // Sets the fields of `spec` the Hugging Face config `folder` (read from `path`, of this
  // architecture) describes, each checked against its range and named by the file's key
  // ("DIR/config.json: hidden_size must be within ..."); UserError too when spec.seq_len
  // exceeds the folder's positions. Precondition: language_model() (the others have no
  // Hugging Face layout).
  virtual void ReadHfConfig(const HfModelConfig& folder, const std::string& path,
                            ModelSpec& spec) const;
  // The Hugging Face config of `spec` (checked as the model built from it is).
  // Precondition: an architecture with such folders (language_model()).
  virtual HfModelConfig HfConfig(const ModelSpec& spec) const;

  // Adds to `model` the fields of `spec` a checkpoint records beyond those every
  // architecture shares (model_registry.h, ModelSpecJson), resolved so that defaults never
  // drift apart.
  virtual void RecordFields(const ModelSpec& spec, nlohmann::json& model) const = 0;
  // Reads those fields back into `spec`; throws nlohmann::json's exceptions when a field
  // every checkpoint records is missing or of the wrong type.
  virtual void ReadFields(const nlohmann::json& model, ModelSpec& spec) const = 0;

  // The model `spec` describes, its weights drawn from `seed` (or read from spec.model_dir);
  // recomputing the attention scores in backward when `recompute_attention`. UserError for
  // an impossible configuration.
  virtual std::shared_ptr<const ModelTask> MakeModel(const ModelSpec& spec,
                                                     bool recompute_attention,
                                                     uint64_t seed) const = 0;
};

// What the architectures share.

// Forward FLOPs per sample of a transformer stack of `layers` blocks over `t` tokens of
// width `c`: the embedding, the blocks, then `head_per_token` per token.
std::vector<double> TransformerFlops(int layers, double t, double c, double head_per_token);

// Reads the parameters of `layers` from the Hugging Face folder `folder` (the part of
// tensor-parallel rank tp.rank) and nothing else of it.
void LoadFromFolder(const std::string& folder, const LayerList& layers, const TensorParallel& tp);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_MODEL_ARCHITECTURE_H_
