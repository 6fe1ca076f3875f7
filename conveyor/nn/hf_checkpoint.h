// A Hugging Face model folder opened for loading: config.json (hf_config.h) and the weights,
// either model.safetensors or the shards that model.safetensors.index.json lists
// ({"weight_map": {tensor: file}}).
//
// Opening reads config.json and every weight file's header, never a tensor's data, and checks
// before anything is loaded that the folder holds exactly the model config.json describes:
// every tensor of LlamaParameterShapes present once, in the file the index names, of its
// shape, stored as F32, BF16 or F16; no other tensor; no index entry naming a file that is not
// there; no file whose header promises more bytes than it has (a truncated shard). Each
// problem throws UserError naming the tensor and the file.
//
// Read then reads one tensor alone (SafetensorsReader), ReadShard one tensor-parallel rank's
// part of it alone: a rank loading its stages reads its part of their tensors and nothing
// else, holding at most one of them beyond its own weights.
//
// Not thread-safe; the files stay open while the checkpoint lives.
#ifndef CONVEYOR_NN_HF_CHECKPOINT_H_
#define CONVEYOR_NN_HF_CHECKPOINT_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "conveyor/module/stage_module.h"
#include "conveyor/nn/llama.h"
#include "conveyor/nn/safetensors.h"
#include "conveyor/nn/tensor_parallel.h"

namespace conveyor {

class HfCheckpoint {
 public:
  // Opens the folder `dir` (checks above).
  explicit HfCheckpoint(const std::string& dir);

  const LlamaConfig& config() const { return config_; }
  // Tensors read so far (to show that a rank read only its own).
  int reads() const { return reads_; }

  // The tensor `name` in fp32 (widened from BF16 / F16), read from its file alone.
  // UserError when the model has no such tensor.
  at::Tensor Read(const std::string& name);

  // Tensor-parallel rank tp.rank's part of the tensor `name` (TensorParallelSplitOf) in fp32,
  // reading that part's bytes alone; Read(name) when the tensor is replicated.
  at::Tensor ReadShard(const std::string& name, const TensorParallel& tp);

  // Copies into each of `params` (a model's parameters, by Hugging Face name, as held by
  // tensor-parallel rank tp.rank: TensorParallelSplitOf) its part of the checkpoint's tensor;
  // nothing else is read. UserError for a name the checkpoint lacks or a shard of another
  // shape; then no parameter has changed.
  void LoadInto(const NamedTensors& params, const TensorParallel& tp);

 private:
  std::string dir_;
  LlamaConfig config_;
  std::vector<SafetensorsReader> files_;
  std::map<std::string, SafetensorsReader*> file_of_;  // tensor name -> its file
  int reads_ = 0;
};

struct HfWriteOptions {
  at::ScalarType dtype = at::kFloat;    // how the tensors are stored: fp32, bf16 or fp16
  int64_t shard_bytes = 5'000'000'000;  // most bytes of tensor data in one file
};

// Writes the Hugging Face folder `dir` for `config`: config.json (HfLlamaConfigJson) and
// every tensor of LlamaParameterShapes, asked of `tensor(name)` one at a time (fp32, full
// shape) and stored as options.dtype, in the model's order (embedding, layers, norm, head), in
// files of at most options.shard_bytes of data (a larger tensor alone in its file):
// model.safetensors when one file holds them all, else model-0000i-of-0000n.safetensors and
// model.safetensors.index.json ({"metadata": {"total_size"}, "weight_map"}). Holds one
// file's tensors at a time. `dir` must not exist or be an empty folder (UserError otherwise);
// the files are written into dir + ".tmp", renamed to `dir` once all are complete, so a
// failure leaves nothing at `dir`. Returns the weight files' names.
std::vector<std::string> WriteHfCheckpoint(
    const std::string& dir, const LlamaConfig& config, const HfWriteOptions& options,
    const std::function<at::Tensor(const std::string&)>& tensor);

}  // namespace conveyor

#endif  // CONVEYOR_NN_HF_CHECKPOINT_H_
