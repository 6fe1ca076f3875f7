// The classifier architecture (nn/classifier.h): an encoder telling which of the `classes`
// largest fortune files a text comes from. Fields: layers, hidden, heads, seq_len, classes;
// the byte tokenizer's 256 ids. No Hugging Face layout.
#ifndef CONVEYOR_TRAIN_CLASSIFIER_ARCHITECTURE_H_
#define CONVEYOR_TRAIN_CLASSIFIER_ARCHITECTURE_H_

#include "conveyor/train/model_architecture.h"

namespace conveyor {

class ClassifierArchitecture final : public ModelArchitecture {
 public:
  bool language_model() const override { return false; }
  TransformerSpec Sizes(const ModelSpec& spec) const override;
  // Its fields are those every checkpoint records.
  void RecordFields(const ModelSpec&, nlohmann::json&) const override {}
  void ReadFields(const nlohmann::json&, ModelSpec&) const override {}
  std::shared_ptr<const ModelTask> MakeModel(const ModelSpec& spec, bool recompute_attention,
                                             uint64_t seed) const override;
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_CLASSIFIER_ARCHITECTURE_H_
