// Checkpoints: weights, optimizer state and the step, saved under global parameter names, so
// a run saved with one partition (pp = 4) resumes with another (2, 1), and with any dp, tp
// and ep. The pipeline of data-parallel replica 0 writes them (Trainer::leads_replicas: the
// replicas hold the same state; under expert parallelism its ranks first gather the experts
// their expert-parallel groups hold, so every expert is saved by name); every rank loads,
// reading only its own experts.
//
// The files (conveyor/formats/checkpoint_files.h): DIR/step-000120/rank-R.safetensors
// (pipeline rank R's parameters "param/<name>" and AdamW state
// "optim/<name>/exp_avg|exp_avg_sq", with the checksums of their bytes in 1 MiB chunks),
// DIR/step-000120/meta.json (the manifest: step, model, seed, data, schedule, pp, the dynamic
// loss scale and its count of good steps when loss scaling is on, every rank file with each
// tensor's dtype, shape and chunk checksums, and the tokenizer's checksum),
// DIR/step-000120/tokenizer.model (a copy of the run's SentencePiece tokenizer, when it has
// one) and DIR/latest naming the newest step folder. Every tensor is stored as F32 (fp32
// master weights and AdamW state). A run with loss scaling that resumes a checkpoint without
// a scale keeps its initial one.
//
// Saving: every writing rank writes its file durably (AtomicFile) into DIR/step-000120.tmp
// (a weight or an optimizer state holding NaN or infinity is not written: that rank fails,
// naming itself, the step and the tensor); the ranks agree that all succeeded (an all-reduce
// of per-rank failure flags); rank 0 then writes the manifest atomically, renames the folder
// to its final name and only then points latest at it. A failure on any rank removes the
// temporary folder on rank 0 and throws on every rank: the previous checkpoint stays intact
// and latest. A process killed while saving can leave a step-N.tmp folder, which nothing
// loads and the next save of step N replaces.
//
// Loading verifies before it changes anything and refuses, naming the file and tensor: a
// folder whose name disagrees with meta.json's step, a rank file not listed or missing, a
// file written at another step or for another model (every model field compared), a tensor
// missing, unlisted, or of another dtype or shape than the manifest says, a tensor stored as
// anything but F32 (even when the manifest agrees), NaN or infinity in any tensor the loading
// rank reads, a checksum mismatch; and (CheckpointConfig, which hands the tokenizer out) a
// tokenizer.model the manifest does not list, or lists and is missing or fails its checksum.
// Checkpoints of the format before checksums ("conveyor-checkpoint-1") cannot be verified and
// are refused; those of the formats with one checksum per whole tensor
// ("conveyor-checkpoint-3", and "-2", before the tokenizer's checksum, whose tokenizer is
// used as found) are read and verified a whole tensor at a time, as they always were.
//
// A LoRA run (nn/lora.h) saves its frozen base with the adapters (so that export and
// generation need no folder) but AdamW state for the adapters alone; its manifest names the
// base folder ("lora_base", absolute), which a resume must give again (CheckResume).
//
// Data position and randomness need no state of their own: batches and sampling are
// functions of (seed, step), so the step is the position.
//
// SaveCheckpoint is collective over `world` (every rank of the run); DIR must be on a filesystem
// they all see. LoadCheckpoint and CheckpointConfig are not collective: each rank checks every
// file's header and reads only its tensor-parallel slice of the tensors of its own stages
// (ReadTensorSlice, conveyor/formats/tensor_slice.h: the chunks covering the slice's bytes,
// each data check above made on what is read), holding its slice twice at most (the weights
// and the state it loads, until they are copied in).
#ifndef CONVEYOR_TRAIN_CHECKPOINT_H_
#define CONVEYOR_TRAIN_CHECKPOINT_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "conveyor/formats/checkpoint_files.h"
#include "conveyor/train/pipeline_model.h"
#include "conveyor/train/trainer.h"

namespace conveyor {

// Saves at trainer.step(); returns the folder written. When any rank fails (a full disk, a
// folder that cannot be written, ...) every rank throws: UserError with the reason on the
// ranks that failed, CommError caused_by_peer() naming them on the others.
std::string SaveCheckpoint(const std::string& dir, Trainer& trainer, const TrainConfig& config,
                           Transport* world);

// `path` is a step folder or a DIR holding `latest`. Verifies everything first (as above,
// then the model config against `config`, every parameter and its state present with the
// right shape) and throws UserError naming the problem without changing the trainer; then
// loads and sets the step.
void LoadCheckpoint(const std::string& path, Trainer& trainer, const TrainConfig& config);

// The weights alone into `model` (generation, evaluation): the same verification, the
// optimizer state and loss scale left aside.
void LoadWeights(const std::string& path, PipelineModel& model, const TrainConfig& config);

// The configuration a checkpoint's model was trained with (model sizes, data, seed, and as
// tokenizer its tokenizer.model, verified as above, when it has one); the other fields keep
// their defaults. For `conveyor generate`, `eval` and `export`.
TrainConfig CheckpointConfig(const std::string& path);

// Checks that config.resume continues a run rather than starting another by mistake:
// --steps beyond the checkpoint's step (else nothing would be trained), and, unless
// config.resume_with_changes, the same --seed, --batch-size, --dtype, --data and --split
// as the run that saved it (each changes which samples the rest of the run sees or how it
// computes; checkpoints older than these fields are not compared on them). UserError naming
// what differs, with both values. A LoRA checkpoint's base folder is compared always:
// another --model folder is refused naming both.
void CheckResume(const TrainConfig& config);

// A checkpoint's weights read one at a time, without a model (`conveyor export`): opening
// checks the manifest and every file's header as loading does; Read checks the data of the
// tensor it reads. Not thread-safe.
class CheckpointWeights {
 public:
  explicit CheckpointWeights(const std::string& path);
  ~CheckpointWeights();

  // CheckpointConfig(path), and the step the checkpoint was saved at.
  const TrainConfig& config() const { return config_; }
  int64_t step() const { return step_; }
  // Whether it holds the parameter `name`.
  bool Holds(const std::string& name) const;
  // A LoRA run's base folder (absolute), as its manifest names it; "" for a base drawn from
  // the seed or a run without adapters.
  const std::string& lora_base() const { return lora_base_; }
  // The parameter of global name `name`, whole (every TP shard joined), as saved (fp32).
  // UserError when the checkpoint lacks it or its data fails a check.
  at::Tensor Read(const std::string& name);
  // The model state it holds beside the weights, by stored name (the selection biases of
  // --router-bias-rate: "state/<block>.selection_bias"), sorted.
  std::vector<std::string> StateNames() const;

 private:
  TrainConfig config_;
  int64_t step_ = 0;
  std::string lora_base_;
  std::string where_;  // "checkpoint DIR", for messages
  std::unique_ptr<CheckpointFiles> files_;
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_CHECKPOINT_H_
