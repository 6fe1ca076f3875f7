// conveyor's checkpoint files: the file format of one step folder. Saving it collectively,
// agreeing on failures and loading it into a model are train/checkpoint.h's.
//
//   DIR/step-000120/rank-R.safetensors   pipeline rank R's tensors, all F32; its metadata:
//                                        "step", "rank", "model" (the JSON of the model's
//                                        fields), "chunk_bytes" and per tensor
//                                        "fnv1a64-chunks/<tensor>" (its chunks' checksums)
//   DIR/step-000120/meta.json            the manifest: the run's fields (step, model, seed,
//                                        ...), "format", "chunk_bytes", "files" (each rank
//                                        file's tensors: dtype, shape, "fnv1a64_chunks") and
//                                        "tokenizer" ({"fnv1a64"}) when the folder has one
//   DIR/step-000120/tokenizer.model      the run's SentencePiece tokenizer, when it has one
//   DIR/latest                           the newest step folder's name
//
// Checksums are 64-bit FNV-1a (common/checksum.h) of fixed-size chunks of a tensor's bytes:
// chunk i is bytes [i C, (i + 1) C) of the tensor (the last one shorter), C = chunk_bytes
// (kCheckpointChunkBytes, 1 MiB, recorded in the manifest). A rank reading a slice of a
// tensor (tensor_slice.h) reads and verifies only the chunks covering the bytes it needs: a
// dim-0 split's contiguous rows cover a few chunks; a strided slice (a split along dim 1)
// covers most, often all, of the tensor, which is then read whole.
//
// Formats: "conveyor-checkpoint-4" (chunk checksums) is written. "-3" and "-2" (one checksum
// "fnv1a64" of each whole tensor) still load as they always did: every read of such a tensor
// reads it whole and checks it whole; "-2" has no checksum of the tokenizer, which is used
// as found. "-1" (no checksums) is refused.
//
// Thread-safety: functions are safe from any thread on distinct folders; CheckpointFiles is
// not thread-safe.
#ifndef CONVEYOR_FORMATS_CHECKPOINT_FILES_H_
#define CONVEYOR_FORMATS_CHECKPOINT_FILES_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "conveyor/formats/safetensors.h"
#include "conveyor/formats/tensor_source.h"

namespace conveyor {

// The file name of the tokenizer in a step folder (and in a Hugging Face folder).
inline constexpr const char* kTokenizerFile = "tokenizer.model";
// The bytes of each checksummed chunk of a tensor, in the checkpoints written.
inline constexpr uint64_t kCheckpointChunkBytes = uint64_t{1} << 20;

// "step-000120", the folder of the checkpoint at `step`.
std::string CheckpointStepName(int64_t step);
// "rank-3.safetensors", pipeline rank `rank`'s file.
std::string CheckpointRankFile(int rank);

// Writes a rank file at `path` (SaveSafetensors: atomic and durable): `tensors` (each F32,
// any device) with `metadata` (the file's origin: "step", "rank", "model") and the chunk
// checksums of each tensor. UserError as SaveSafetensors.
void WriteCheckpointRankFile(const std::string& path,
                             const std::map<std::string, at::Tensor>& tensors,
                             std::map<std::string, std::string> metadata);

// The manifest of the step folder `folder` whose rank files 0 .. ranks - 1 are written: the
// run's fields `run` (step, model, seed, ...) with the format, the chunk size, every rank
// file's tensors with their dtypes, shapes and chunk checksums as its header records them,
// and the checksum of the folder's tokenizer.model when it has one.
nlohmann::json CheckpointManifest(const std::filesystem::path& folder, int ranks,
                                  nlohmann::json run);

// The step folder `path` names: `path` itself when it holds meta.json, else the folder its
// `latest` file names. UserError when neither is a checkpoint.
std::filesystem::path ResolveCheckpointFolder(const std::string& path);

// meta.json of `folder`, checked for what every use needs: a format that loads (above), the
// step (agreeing with a folder named after a step), the model and the list of files.
// UserError naming the folder and the problem.
nlohmann::json ReadCheckpointManifest(const std::filesystem::path& folder);

// The path of the tokenizer saved in `folder`, "" when it has none, checked against the
// manifest `meta`: listed if and only if present, its bytes giving the listed checksum (a
// "conveyor-checkpoint-2" has its tokenizer returned unverified). UserError otherwise.
std::string VerifiedCheckpointTokenizer(const std::filesystem::path& folder,
                                        const nlohmann::json& meta);

// The rank files of the checkpoint in `folder`, opened and checked against its manifest
// `meta` (ReadCheckpointManifest's) before any data is read: every rank file listed and
// present, its step and model the manifest's, its tensors' names, dtypes and shapes the
// manifest's, every dtype F32, the checksums well-formed. As a TensorSource (the tensors by
// their stored names, "param/<name>", "optim/<name>/exp_avg", ...; a tensor in several
// files, a tied embedding, from the first) it reads a tensor's runs through the chunks
// covering them, each read once and checked: finite, then its checksum. Throws UserError
// naming the file and the tensor.
class CheckpointFiles : public TensorSource {
 public:
  CheckpointFiles(const std::filesystem::path& folder, const nlohmann::json& meta);
  ~CheckpointFiles() override;

  const std::map<std::string, StoredTensor>& tensors() const override { return stored_; }
  std::string Where(const std::string& name) const override;
  void ReadRuns(const std::string& name, const std::vector<ByteRun>& runs, void* out) override;

  // Bytes of tensor data read from the rank files so far.
  uint64_t bytes_read() const;

 private:
  struct Located {
    SafetensorsReader* reader;
    std::string file;  // "checkpoint DIR: rank-R.safetensors: ", for messages
    uint64_t bytes;    // the tensor's
    uint64_t chunk_bytes;
    std::vector<std::string> checksums;  // one per chunk
  };
  std::vector<std::unique_ptr<SafetensorsReader>> readers_;
  std::map<std::string, Located> located_;
  std::map<std::string, StoredTensor> stored_;
};

}  // namespace conveyor

#endif  // CONVEYOR_FORMATS_CHECKPOINT_FILES_H_
