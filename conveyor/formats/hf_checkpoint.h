// A Hugging Face model folder opened for loading: config.json (hf_config.h) and the weights,
// either model.safetensors or the shards that model.safetensors.index.json lists
// ({"weight_map": {tensor: file}}); in a folder with both, model.safetensors alone, as
// transformers' from_pretrained reads it (the index and its shards are not opened).
//
// Opening reads config.json and every weight file's header, never a tensor's data, and checks
// before anything is loaded that the folder holds exactly the model config.json describes:
// every tensor of HfTensors present once, in the file the index names, of its shape, stored
// as F32, BF16 or F16; no other tensor (but GPT-2's attention-mask buffers, which are
// skipped); no index entry naming a file that is not there; no file whose header promises
// more bytes than it has (a truncated shard). Each problem throws UserError naming the
// tensor and the file.
//
// Tensors are asked for by conveyor's parameter names; each one's name in the folder, and
// whether the folder stores it transposed, is what its layer declared (ParameterSpec::hf: a
// Llama's are its own, a GPT-2's Conv1D weights transposed on the way).
//
// Read then reads one tensor alone (SafetensorsReader), ReadShard one tensor-parallel rank's
// part of it alone (ReadTensorSlice, tensor_slice.h, through the folder's TensorSource): a
// rank loading its stages reads its part of their tensors and nothing else, holding at most
// one of them beyond its own weights. NaN or infinity in what is read throws UserError
// naming the tensor and the file.
//
// Not thread-safe; the files stay open while the checkpoint lives.
#ifndef CONVEYOR_FORMATS_HF_CHECKPOINT_H_
#define CONVEYOR_FORMATS_HF_CHECKPOINT_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "conveyor/formats/safetensors.h"
#include "conveyor/formats/tensor_source.h"
#include "conveyor/module/stage_module.h"
#include "conveyor/nn/hf_config.h"
#include "conveyor/nn/tensor_parallel.h"

namespace conveyor {

// One tensor of a Hugging Face folder: the conveyor parameter it is, and its name and shape
// in the folder, which stores it transposed against the parameter when `transposed` (GPT-2's
// Conv1D weights are (in, out)).
struct HfTensor {
  std::string param;
  std::string name;
  std::vector<int64_t> shape;
  bool transposed = false;
};

// The tensors of `config`'s model, in the model's order (embedding, layers, final norm,
// head; a layer's in order of parameter name; a tied weight once), named as the layers
// declare (ParameterSpec::hf; the layers are built as shapes alone to ask them). GPT-2's
// names but lm_head.weight carry `gpt2_prefix` ("transformer." as GPT2LMHeadModel saves
// them; some files have none).
std::vector<HfTensor> HfTensors(const HfModelConfig& config,
                                const std::string& gpt2_prefix = "transformer.");

// The folder is a TensorSource of its stored tensors (by their names in the folder).
class HfCheckpoint : public TensorSource {
 public:
  // Opens the folder `dir` (checks above).
  explicit HfCheckpoint(const std::string& dir);

  const HfModelConfig& config() const { return config_; }
  // Tensors read so far (to show that a rank read only its own).
  int reads() const { return reads_; }

  // The parameter `param` in fp32 (widened from BF16 / F16), in the parameter's layout,
  // read from its file alone. UserError when the model has no such parameter.
  at::Tensor Read(const std::string& param);

  // Tensor-parallel rank tp.rank's part of the parameter `param`, laid out as `spec`, in
  // fp32, reading that part's bytes alone; Read(param) when it is replicated.
  at::Tensor ReadShard(const std::string& param, const ParameterSpec& spec,
                       const TensorParallel& tp);

  // Copies into each of `params` (a model's parameters, by name, as held by tensor-parallel
  // rank tp.rank, laid out as `specs` says) its part of the checkpoint's tensor; nothing else
  // is read. UserError for a name the checkpoint lacks or a shard of another shape (then no
  // parameter has changed), or for NaN or infinity in a part read (then that parameter and
  // those after it have not).
  void LoadInto(const NamedTensors& params, const ParameterSpecs& specs, const TensorParallel& tp);

  // TensorSource: the folder's tensors by their names in it; Where names the folder and the
  // file; ReadRuns reads from that file alone and refuses NaN or infinity in what it read.
  const std::map<std::string, StoredTensor>& tensors() const override { return stored_; }
  std::string Where(const std::string& name) const override;
  void ReadRuns(const std::string& name, const std::vector<ByteRun>& runs, void* out) override;

 private:
  // The folder's tensor of `param`, and the file holding it; UserError when there is none.
  const HfTensor& Find(const std::string& param) const;
  // `spec` in the folder's layout of `t` (a transposed tensor's split along the other dim).
  static ParameterSpec StoredSpec(const HfTensor& t, const ParameterSpec& spec);
  // The shape of rank tp.rank's part of `t` in the parameter's layout (padding included).
  std::vector<int64_t> ShardShape(const HfTensor& t, const ParameterSpec& spec,
                                  const TensorParallel& tp) const;
  // Reads rank tp.rank's part of `t` into `dst` (ShardShape, any floating dtype): the stored
  // rows widened and transposed as they are copied, a padded vocabulary's extra rows zeroed.
  void CopyShardInto(const HfTensor& t, const ParameterSpec& spec, const TensorParallel& tp,
                     const at::Tensor& dst);

  std::string dir_;
  HfModelConfig config_;
  std::vector<SafetensorsReader> files_;
  std::map<std::string, SafetensorsReader*> file_of_;  // tensor name -> its file
  std::map<std::string, HfTensor> tensors_;            // by parameter name
  std::map<std::string, StoredTensor> stored_;         // every tensor of the files, by name
  int reads_ = 0;
};

struct HfWriteOptions {
  at::ScalarType dtype = at::kFloat;    // how the tensors are stored: fp32, bf16 or fp16
  int64_t shard_bytes = 5'000'000'000;  // most bytes of tensor data in one file
  // Other files the folder gets with the weights: a name in the folder -> the file copied.
  std::map<std::string, std::string> files;
  // And files written from text: a name in the folder -> its content.
  std::map<std::string, std::string> texts;
};

// Writes the Hugging Face folder `dir` for `config`: config.json (HfModelConfigJson) and
// every tensor of HfTensors, asked of `tensor(param)` one at a time (fp32, the parameter's
// full shape) and stored as options.dtype, in the model's order, in
// files of at most options.shard_bytes of data (a larger tensor alone in its file):
// model.safetensors when one file holds them all, else model-0000i-of-0000n.safetensors and
// model.safetensors.index.json ({"metadata": {"total_size"}, "weight_map"}). Holds one
// file's tensors at a time; then options.files and options.texts. `dir` must not exist or be an
// empty folder (UserError otherwise); the files are written into dir + ".tmp", renamed to `dir`
// once all are complete, so a failure leaves nothing at `dir`. A dir + ".tmp" left by a write that
// did not finish (a killed process: the folder holds the mark this function writes into it
// first) is removed, saying so in one line on stderr; anything else there is refused
// (UserError) and left alone. Returns the weight files' names.
std::vector<std::string> WriteHfCheckpoint(
    const std::string& dir, const HfModelConfig& config, const HfWriteOptions& options,
    const std::function<at::Tensor(const std::string&)>& tensor);

}  // namespace conveyor

#endif  // CONVEYOR_FORMATS_HF_CHECKPOINT_H_
