// Everything `conveyor train` needs, with defaults that make a sensible first run on a
// 2-core CPU machine: a 4-layer byte-level GPT on the fortunes corpus across 4 local ranks.
//
// Sources, later ones winning: the defaults, a TOML file (keys as below, e.g.
// `schedule = "zb-v"`), command-line flags. Validate() names the first bad value.
#ifndef CONVEYOR_TRAIN_TRAIN_CONFIG_H_
#define CONVEYOR_TRAIN_TRAIN_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "conveyor/device/compute_device.h"
#include "conveyor/device/compute_precision.h"
#include "conveyor/mesh/mesh.h"
#include "conveyor/optim/adamw_kernel.h"
#include "conveyor/sim/model_spec.h"
#include "conveyor/sim/recompute.h"

namespace conveyor {

// What a layer's cost is when the layers are partitioned over the stages: its parameter
// count, its forward FLOPs, 1 for every layer, or its measured time.
enum class PartitionBy : uint8_t { kParams, kFlops, kUniform, kProfile };

// `text` ("params", "flops", "uniform", "profile") as a PartitionBy. Throws UserError naming
// `name` (the flag, or the file and key), the text and the allowed values.
PartitionBy ParsePartitionBy(std::string_view text, std::string_view name);
std::string_view PartitionByName(PartitionBy partition);

struct TrainConfig;

// The data-parallel reducer's bucket under `config` on a GPU (`gpu`) or the CPU: dp_bucket,
// or DefaultBucketBytes (sim/mesh_costs.h).
int64_t DpBucketBytes(const TrainConfig& config, bool gpu);

// `text` as --model (or the TOML key `name`): a kind ("gpt", "classifier", "llama"), or a
// Hugging Face folder (a path holding config.json), which sets model_dir and model = llama
// or, for a GPT-2, gpt (model_registry.h, HfModelKind). A kind's name is the kind even when a
// folder of that name is in the working directory (that folder is `./llama`); any other name
// without a '/' is a path when something of that name exists. UserError naming `name` and the text
// otherwise (CheckInputPath for a path that names no folder).
void SetModel(TrainConfig& config, std::string_view text, std::string_view name);

// When `text` is a kind's name and a folder of that name is in the working directory: one
// line saying that SetModel takes the kind, and how to read the folder. "" otherwise.
std::string ModelFolderNote(std::string_view text);

// With config.model.model_dir set: the architecture's fields from its config.json
// (nn/hf_config.h; which fields: ModelArchitecture::ReadHfConfig), whatever flags said;
// UserError when the file is refused, a size is out of its setting's range (named by the file
// and its key: "DIR/config.json: hidden_size must be within ..."), seq_len exceeds its
// positions, or its vocabulary cannot hold the byte tokenizer's 256 ids.
void ApplyModelFolder(TrainConfig& config);

// Resolves config.tokenizer: "" becomes the model folder's tokenizer.model when there is one
// (a tokenizer given by the user is kept), and is refused when the folder holds a Hugging
// Face tokenizer.json instead (FolderTokenizer). With a SentencePiece tokenizer, a gpt or llama
// drawn from the seed (vocab 0) gets its vocabulary; a model with a vocabulary (a folder's,
// a checkpoint's) is checked against it (CheckTokenizerFits). UserError naming the model
// file when it cannot be loaded, or both sizes when they do not fit.
void ApplyTokenizer(TrainConfig& config);

// config.stage_layers as numbers; UserError naming `name` and the text unless it is a
// comma-separated list of positive integers (or empty: an empty list).
std::vector<int> ParseStageLayers(std::string_view text, std::string_view name);

// The settings every rank of a run must share (launch/rank_settings.h), by flag name: the
// model, data, schedule, mesh, optimisation, precision, checkpoints. Not those a rank may
// hold alone: its threads, its outputs of rank 0 (--metrics, --trace, --tensorboard), the
// timeout.
std::vector<std::pair<std::string, std::string>> SettingsThatMustAgree(const TrainConfig& config);

// What every rank must have read the same of, for the same comparison: a fingerprint of the
// contents (common/file_fingerprint.h) of the model folder, each data source, the tokenizer
// and the checkpoint resumed, named "--data (contents)" and so on (a blend's sources' in
// its order): ranks on other machines may hold other files under the same paths. Reads
// those files' samples.
std::vector<std::pair<std::string, std::string>> ContentsThatMustAgree(const TrainConfig& config);

// The model of the Hugging Face folder `dir` at its whole context: seq_len its positions (a
// Llama's max_position_embeddings, a GPT-2's n_positions; at most 65536), the rest as
// ApplyModelFolder reads it (UserError likewise).
ModelSpec ModelFolderSpec(const std::string& dir);

struct TrainConfig {
  // The model (sim/model_spec.h): its architecture and sizes, and the Hugging Face folder it
  // may come from.
  ModelSpec model;
  // Data.
  std::string data = "fortunes";   // "fortunes", a text file / directory, or the PREFIX of a
                                   // tokenized data set (PREFIX.bin + PREFIX.idx)
  std::string split = "969,30,1";  // a tokenized data set's train, validation, test weights
  // Packed documents kept apart (microbatch.h): a token attends only to its own document's
  // tokens, positions restart at each. A tokenized data set and a language model.
  bool document_mask = false;
  // The tokenizer (data/tokenizer.h) of the text the run shows and reads: "" = the model
  // folder's tokenizer.model when it has one, else bytes; "bytes"; or a SentencePiece model.
  // Its vocabulary sizes a model drawn from the seed (ApplyTokenizer).
  std::string tokenizer;
  // Pipeline.
  std::string schedule = "1f1b";
  int pp = 4;
  int microbatches = 8;
  int chunks = 0;  // 0 = the schedule's default
  // The mesh (mesh.h): world = dp x tp x pp ranks. dp 0 = world / (tp x pp) (1 when this
  // process launches the ranks itself).
  int dp = 0;
  int tp = 1;
  // Context parallelism (nn/context_parallel.h): each sequence split over this many ranks
  // (2 chunks each, balanced for causal attention), attention by ring; the mesh is then
  // dp x cp x tp x pp. A Llama without experts.
  int cp = 1;
  // Sequence parallelism (nn/tensor_parallel.h): outside the tensor-parallel regions each TP
  // rank holds seq_len / (cp x tp) positions of every sequence (norms, residuals, the messages
  // between stages). Needs tp > 1.
  bool sequence_parallel = false;
  // Expert-parallel ranks: each Mixture-of-Experts layer's experts are divided among this
  // many data-parallel ranks, its tokens sent to them and back by all-to-all (moe_mlp.h); the
  // expert layers' mesh folds over the dense one (Mesh::FoldExperts). 1 = every expert on
  // every rank.
  int ep = 1;
  std::string mesh_order = "tp-dp-pp";  // fastest-varying axis first
  PartitionBy partition = PartitionBy::kParams;
  // Layers per stage in pipeline order ("1,3,3,1": the embedding and the head count as
  // layers), overriding `partition`; empty = cut by `partition`.
  std::string stage_layers;
  Recompute recompute = Recompute::kNone;
  DeviceKind device = DeviceKind::kAuto;
  ComputeDtype dtype = ComputeDtype::kFp32;
  // Optimisation.
  int batch_size = 16;
  int64_t steps = 200;
  uint64_t seed = 1234;
  double lr = 3e-3;
  int64_t warmup_steps = 20;
  double min_lr_ratio = 0.1;
  double weight_decay = 0.1;
  double clip = 1.0;  // global gradient norm; 0 = off
  // The kernels of AdamW's update (adamw_kernel.h): auto = fused where libtorch has it,
  // else foreach on a GPU and loop on the CPU.
  AdamWKernel adamw_kernel = AdamWKernel::kAuto;
  // With bf16 or fp16 products: each weight's low-precision copy made once after each update
  // and read by every micro-batch's forward and backward (nn/weight_cast.h), at the cost of
  // holding the copies (half the weights' bytes); false: cast by each product.
  bool cache_weight_casts = false;
  // Dynamic loss scaling (loss_scaler.h): the initial scale, >= 1 to turn it on for any
  // dtype; 0 = the dtype's default, 65536 for fp16 and off for fp32 and bf16. The scale
  // doubles after loss_scale_window steps without overflow.
  double loss_scale = 0;
  int64_t loss_scale_window = 2000;
  // ZeRO stage: 1 shards the AdamW state across the data-parallel replicas (no effect with
  // dp = 1); 0 keeps it whole on every replica.
  int zero = 0;
  // A hard limit on the bytes of tensors each rank holds (the CPU's counting allocator; on a
  // GPU the caching allocator's peak, checked after each step): the run stops with an error
  // naming rank, stage, step and bytes. 0 = no limit. Rank threads share one process: their
  // limit is the sum of theirs.
  int64_t memory_per_rank = 0;
  // Bytes of gradients the data-parallel reducer sums at once (0 = 4 MiB on the CPU, 25 MiB
  // on GPUs: DpBucketBytes).
  int64_t dp_bucket = 0;
  // Evaluation, output, checkpoints.
  int64_t eval_every = 50;  // 0 = only at the end
  int eval_batches = 4;
  std::string metrics;           // JSON file; empty = none
  std::string trace;             // folder for the last step's traces; empty = none
  std::string tensorboard;       // folder for rank 0's TensorBoard event file; empty = none
  std::string checkpoint_dir;    // empty = no checkpoints
  int64_t checkpoint_every = 0;  // 0 = only at the end (when checkpoint_dir is set)
  std::string resume;            // a checkpoint directory to continue from
  // Resume with another seed, batch size, dtype, data or split than the checkpoint's run
  // (CheckResume refuses them otherwise).
  bool resume_with_changes = false;
  int sample_tokens = 200;  // gpt: text sampled at the end; 0 = none
  int timeout_s = 300;      // bound on any wait between ranks
  int threads = 0;          // intra-op threads per rank; 0 = OMP_NUM_THREADS, else the
                            // machine's cores shared by the local ranks
  // A step whose loss or gradient norm is NaN or infinite stops the run (UserError naming
  // the step); with this set, the step is skipped instead: no update, the next batch.
  bool skip_nonfinite_steps = false;
  // DualPipe's and DualPipeV's overlapped pairs (OVERLAP_F_B) run their halves one after the
  // other instead of at once (runtime/executor.h; at once on the CPU with tp 1 only): the
  // same results, for comparison.
  bool sequential_pairs = false;

  // Checks every numeric setting against its range (docs/TRAINING.md, "Limits"), named as
  // its flag ("--layers must be within [1, 4096], got 0"), the pipeline's size
  // (pipeline_limits.h) and the relations between settings, the model's architecture's
  // among them (ModelArchitecture::Check). UserError for the first bad one.
  void Validate() const;
};

// The dense mesh's axes in the order config.mesh_order names them: dp, tp and pp, and with
// cp > 1 cp too, placed after tp where the order does not name it ("tp-dp-pp" lays out
// tp-cp-dp-pp, Megatron's order). UserError naming the order when it does not parse.
Mesh::Order MeshOrderOf(const TrainConfig& config);
// The mesh of `world` ranks the config lays out (dp 0: the ranks the other axes leave).
// UserError naming the numbers when they do not fill the world (Mesh::Make).
Mesh MeshOf(const TrainConfig& config, int world);

// Sets the integer setting with TOML key `key` ("layers", "seq_len", ...) to `value` after
// checking it against the setting's range; the message calls the setting `name` (the flag,
// or the file and key). Throws UserError when out of range. Precondition: IsIntegerSetting.
void SetIntegerSetting(TrainConfig& config, std::string_view key, int64_t value,
                       std::string_view name);
// The same for the real-valued settings ("lr", "clip", ...): also refuses NaN and infinities.
void SetRealSetting(TrainConfig& config, std::string_view key, double value, std::string_view name);
bool IsIntegerSetting(std::string_view key);
bool IsRealSetting(std::string_view key);

// Applies the keys of a TOML file onto `config`. Throws UserError naming the file, the key
// and the problem (a file that cannot be read: ReadInputFile, unknown key, wrong type, a
// number out of its range, parse error with line). Integers are read as 64-bit and range-checked,
// never wrapped.
void ApplyTomlFile(const std::string& path, TrainConfig& config);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_TRAIN_CONFIG_H_
