// The specification of the model a run trains: its architecture (ModelKind) and the fields
// that size it, with their defaults and allowed ranges. One field list for every
// architecture: flags and TOML keys set any field before the kind is known, and each
// architecture reads the fields that apply to it (train/model_architecture.h), which also
// derives its sizes (key-value heads, MLP units, vocabulary: a TransformerSpec).
//
// Pure; a plain value.
#ifndef CONVEYOR_SIM_MODEL_SPEC_H_
#define CONVEYOR_SIM_MODEL_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace conveyor {

// The architecture: a byte-level GPT (or a GPT-2), a Llama, or a classifier of fortune
// categories.
enum class ModelKind : uint8_t { kGpt, kClassifier, kLlama };

// `text` ("gpt", "classifier", "llama") as a ModelKind. Throws UserError naming `name` (the flag,
// or the file and key), the text and the allowed values.
ModelKind ParseModelKind(std::string_view text, std::string_view name);
// The spelling ParseModelKind reads: "gpt" / "classifier" / "llama".
std::string_view ModelKindName(ModelKind kind);
// Whether `text` is a kind's spelling.
bool IsModelKindName(std::string_view text);

struct ModelSpec {
  ModelKind kind = ModelKind::kGpt;
  int layers = 4;
  int hidden = 64;
  int heads = 4;
  int seq_len = 64;             // tokens per sample
  bool tie_embeddings = false;  // gpt, llama: input embedding and LM head share weights
  int classes = 4;              // classifier: the largest fortune categories
  int kv_heads = 0;             // llama: key-value heads (0 = heads: no grouping)
  int intermediate = 0;         // llama: the MLP's units (0 = GatedMlpUnits(hidden))
  double rope_theta = 10000;    // llama: the rotary embeddings' base
  double rms_norm_eps = 1e-5;   // llama
  int vocab = 0;                // gpt, llama: 0 = the byte tokenizer's 256 ids
  int positions = 0;       // gpt: rows of the position table (0 = seq_len); GPT-2's n_positions
  bool gelu_tanh = false;  // gpt: GPT-2's gelu_new, GELU's tanh approximation
  // A Hugging Face folder (--model DIR): its config.json sets the architecture's fields, its
  // weights are the initial ones. Empty: weights drawn from the seed.
  std::string model_dir;

  bool operator==(const ModelSpec&) const = default;
};

// Calls visit(key, field, lo, hi) for every integer field of `spec` (a ModelSpec, const or
// not): its setting's key (TOML; the flag is "--" + key with '-' for '_'), the field and its
// allowed range [lo, hi]. The one table of the model's integer ranges.
template <typename Spec, typename Visit>
void ForEachModelInteger(Spec& spec, Visit&& visit) {
  visit("layers", spec.layers, 1, 4096);
  visit("hidden", spec.hidden, 1, 65536);
  visit("heads", spec.heads, 1, 4096);
  visit("seq_len", spec.seq_len, 2, 65536);
  visit("classes", spec.classes, 2, 4096);
  visit("kv_heads", spec.kv_heads, 0, 4096);
  visit("intermediate", spec.intermediate, 0, 1 << 20);
}

// The same for the real fields; lo = nullopt means (0, hi]: zero itself is refused
// (CheckInRange's optional form, common/range_check.h).
template <typename Spec, typename Visit>
void ForEachModelReal(Spec& spec, Visit&& visit) {
  visit("rope_theta", spec.rope_theta, std::optional<double>(), 1e12);
}

// Sets the integer field with key `key` to `value` after checking it against its range; the
// message calls it `name` (a flag, or a file and its key). UserError when out of range.
// Precondition: `key` is one of ForEachModelInteger's.
void SetModelInteger(ModelSpec& spec, std::string_view key, int64_t value, std::string_view name);
// The same for the real fields (NaN and infinities refused too).
void SetModelReal(ModelSpec& spec, std::string_view key, double value, std::string_view name);

}  // namespace conveyor

#endif  // CONVEYOR_SIM_MODEL_SPEC_H_
