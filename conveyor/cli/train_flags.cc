#include "conveyor/cli/train_flags.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <type_traits>

#include "conveyor/cli/bytes_flag.h"
#include "conveyor/common/error.h"
#include "conveyor/device/compute_device.h"
#include "conveyor/launch/launcher.h"
#include "conveyor/launch/rendezvous.h"

namespace conveyor {
namespace {

// The part of a configuration holding the fields of `Part`: the configuration itself, or its
// model (TrainConfig::model).
template <typename Part>
Part& PartOf(TrainConfig& config) {
  if constexpr (std::is_same_v<Part, ModelSpec>) {
    return config.model;
  } else {
    return config;
  }
}

// Registers `--name` bound to `given.*field` (numbers: to flags.integers or flags.reals,
// checked by the config's setters); when given, it overrides the config. `Part`: TrainConfig
// or ModelSpec (a field of the model).
template <typename T, typename Part>
void Flag(CLI::App* cmd, TrainFlags& flags, const std::string& name, T Part::*field,
          const std::string& help) {
  std::string key = name.substr(2);  // "--seq-len" -> "seq_len"
  std::replace(key.begin(), key.end(), '-', '_');
  if constexpr (std::is_integral_v<T>) {
    CONVEYOR_ASSERT(IsIntegerSetting(key)) << name;
    int64_t& value = flags.integers[key];
    flags.options.emplace_back(
        cmd->add_option(name, value, help),
        [&value, key, name](TrainConfig& c) { SetIntegerSetting(c, key, value, name); });
  } else if constexpr (std::is_floating_point_v<T>) {
    CONVEYOR_ASSERT(IsRealSetting(key)) << name;
    double& value = flags.reals[key];
    flags.options.emplace_back(
        cmd->add_option(name, value, help),
        [&value, key, name](TrainConfig& c) { SetRealSetting(c, key, value, name); });
  } else {
    CLI::Option* option = cmd->add_option(name, PartOf<Part>(flags.given).*field, help);
    flags.options.emplace_back(option, [&flags, field](TrainConfig& c) {
      PartOf<Part>(c).*field = PartOf<Part>(flags.given).*field;
    });
  }
}

// Registers `--name` bound to `flags.choices[name]`; when given, `parse` (ParseModelKind,
// ...) reads it into the config's `field`.
template <typename E>
void Choice(CLI::App* cmd, TrainFlags& flags, const std::string& name, E TrainConfig::*field,
            E (*parse)(std::string_view, std::string_view), const std::string& help) {
  std::string& text = flags.choices[name];
  flags.options.emplace_back(
      cmd->add_option(name, text, help),
      [&text, field, parse, name](TrainConfig& c) { c.*field = parse(text, name); });
}

// Registers a boolean `--name` bound to `given.*field`.
template <typename Part>
void Switch(CLI::App* cmd, TrainFlags& flags, const std::string& name, bool Part::*field,
            const std::string& help) {
  CLI::Option* option = cmd->add_flag(name, PartOf<Part>(flags.given).*field, help);
  flags.options.emplace_back(option, [&flags, field](TrainConfig& c) {
    PartOf<Part>(c).*field = PartOf<Part>(flags.given).*field;
  });
}

}  // namespace

void RegisterMeshFlags(CLI::App* cmd, TrainFlags& flags) {
  Flag(cmd, flags, "--pp", &TrainConfig::pp, "pipeline ranks per replica");
  Flag(cmd, flags, "--dp", &TrainConfig::dp,
       "data-parallel replicas (0 = world / (tp x pp); 1 when launching locally)");
  Flag(cmd, flags, "--tp", &TrainConfig::tp, "tensor-parallel ranks per stage");
  Flag(cmd, flags, "--cp", &TrainConfig::cp,
       "context-parallel ranks: each sequence split over them, attention by ring (llama)");
  Flag(cmd, flags, "--ep", &TrainConfig::ep,
       "expert-parallel ranks: each MoE layer's experts divided among this many "
       "data-parallel ranks (1 = all on every rank)");
  Flag(cmd, flags, "--mesh-order", &TrainConfig::mesh_order,
       "how ranks fill the mesh, fastest axis first (tp-dp-pp: TP on consecutive ranks)");
  Choice(cmd, flags, "--device", &TrainConfig::device, ParseDeviceKind,
         "auto (cuda when a GPU is present), cpu or cuda (rank r on cuda:local_rank)");
}

void RegisterTrainFlags(CLI::App* cmd, TrainFlags& flags) {
  // Checked as it is read (ApplyTomlFile): a folder or a loop of links is named in one line.
  cmd->add_option("config", flags.config_file, "a TOML file of settings (flags override it)");
  std::string& model = flags.choices["--model"];
  flags.options.emplace_back(
      cmd->add_option(
          "--model", model,
          "gpt, llama, classifier, or a Hugging Face Llama or GPT-2 folder (config.json and "
          "safetensors weights: the architecture and the initial weights)"),
      [&model](TrainConfig& c) { SetModel(c, model, "--model"); });
  Flag(cmd, flags, "--layers", &ModelSpec::layers, "transformer blocks");
  Flag(cmd, flags, "--hidden", &ModelSpec::hidden, "model width");
  Flag(cmd, flags, "--heads", &ModelSpec::heads, "attention heads");
  Flag(cmd, flags, "--kv-heads", &ModelSpec::kv_heads,
       "llama: key-value heads, dividing heads (0 = heads)");
  Flag(cmd, flags, "--intermediate", &ModelSpec::intermediate,
       "llama: MLP units (0 = 8/3 x hidden, rounded up to a multiple of 8)");
  Flag(cmd, flags, "--rope-theta", &ModelSpec::rope_theta, "llama: rotary embedding base");
  Flag(cmd, flags, "--seq-len", &ModelSpec::seq_len, "tokens per sample");
  Flag(cmd, flags, "--classes", &ModelSpec::classes, "classifier: the K largest fortune files");
  Flag(cmd, flags, "--experts", &ModelSpec::experts,
       "llama: experts in each Mixture-of-Experts MLP (0 = dense MLPs)");
  Flag(cmd, flags, "--top-k", &ModelSpec::top_k, "llama, MoE: experts each token is routed to");
  Flag(cmd, flags, "--expert-units", &ModelSpec::expert_units,
       "llama, MoE: each expert's SwiGLU units (0 = --intermediate)");
  Flag(cmd, flags, "--shared-expert-units", &ModelSpec::shared_expert_units,
       "llama, MoE: a shared expert every token passes through (0 = none)");
  Switch(cmd, flags, "--shared-expert-gate", &ModelSpec::shared_expert_gate,
         "llama, MoE: the shared expert scaled by a sigmoid gate (Qwen2-MoE)");
  Switch(cmd, flags, "--router-sigmoid", &ModelSpec::router_sigmoid,
         "llama, MoE: sigmoid router scores (DeepSeek-V3) instead of a softmax");
  Switch(cmd, flags, "--router-plain-gates", &ModelSpec::router_plain_gates,
         "llama, MoE: the k gates as scored, not renormalised (norm_topk_prob false)");
  Flag(cmd, flags, "--router-aux-loss-coef", &ModelSpec::router_aux_loss_coef,
       "llama, MoE: the load-balancing loss's coefficient (Switch; 0 = none)");
  Flag(cmd, flags, "--router-z-loss-coef", &ModelSpec::router_z_loss_coef,
       "llama, MoE: the router z-loss's coefficient (0 = none)");
  Flag(cmd, flags, "--router-bias-rate", &ModelSpec::router_bias_rate,
       "llama, MoE: auxiliary-loss-free balancing, the selection bias's step (0 = off)");
  Flag(cmd, flags, "--capacity-factor", &ModelSpec::capacity_factor,
       "llama, MoE: each expert's capacity factor, copies beyond it dropped (0 = dropless)");
  Switch(cmd, flags, "--drop-by-position", &ModelSpec::drop_by_position,
         "llama, MoE: over capacity drop the last copies (default: the least likely)");
  Flag(cmd, flags, "--moe-first-dense", &ModelSpec::moe_first_dense,
       "llama, MoE: the first layers keep a dense MLP");
  Flag(cmd, flags, "--moe-sparse-step", &ModelSpec::moe_sparse_step,
       "llama, MoE: every step-th layer is sparse (1 = all)");
  Switch(cmd, flags, "--mixtral-names", &ModelSpec::moe_mixtral_names,
         "llama, MoE: Mixtral's tensor names (block_sparse_moe, experts.N.w1/w2/w3), so that "
         "`conveyor export` writes a Mixtral folder");
  Flag(cmd, flags, "--lora-rank", &ModelSpec::lora_rank,
       "llama: LoRA adapters of this rank on --lora-targets, every other weight frozen "
       "(0 = none: every weight trains)");
  Flag(cmd, flags, "--lora-alpha", &ModelSpec::lora_alpha,
       "llama, LoRA: the adapters' updates scaled by alpha / rank (default: the rank)");
  Flag(cmd, flags, "--lora-targets", &ModelSpec::lora_targets,
       "llama, LoRA: the adapted projections, of q_proj,k_proj,v_proj,o_proj,gate_proj,"
       "up_proj,down_proj (default: q_proj,k_proj,v_proj,o_proj)");
  flags.options.emplace_back(
      cmd->add_option("--data", flags.data,
                      "fortunes, a text file or folder, the PREFIX of a tokenized data set "
                      "(PREFIX.bin, PREFIX.idx: conveyor data prepare, Megatron's "
                      "preprocess_data.py), an llm.c or nanoGPT token file (.bin), or a blend "
                      "of those: 0.7 A 0.3 B")
          ->expected(1, -1),
      [&flags](TrainConfig& c) {
        c.data.clear();
        for (const std::string& word : flags.data) c.data += (c.data.empty() ? "" : " ") + word;
      });
  Flag(cmd, flags, "--split", &TrainConfig::split,
       "a tokenized data set's train, validation and test weights, by documents");
  Flag(cmd, flags, "--tokenizer", &TrainConfig::tokenizer,
       "bytes, or a SentencePiece tokenizer.model (its vocabulary sizes a new gpt or llama; "
       "default: the model folder's tokenizer.model, else bytes)");
  Flag(cmd, flags, "--schedule", &TrainConfig::schedule, "pipeline schedule (conveyor list)");
  RegisterMeshFlags(cmd, flags);
  Flag(cmd, flags, "--microbatches", &TrainConfig::microbatches, "micro-batches per step");
  Flag(cmd, flags, "--chunks", &TrainConfig::chunks,
       "chunks (stages) per rank (0 = schedule default)");
  Choice(cmd, flags, "--partition", &TrainConfig::partition, ParsePartitionBy,
         "layer costs: params (a Mixture-of-Experts model's: flops), flops, uniform or profile "
         "(measured)");
  Flag(cmd, flags, "--stage-layers", &TrainConfig::stage_layers,
       "layers of each stage in pipeline order, the embedding and the head counted as layers "
       "(1,3,3,1; overrides --partition)");
  Choice(cmd, flags, "--recompute", &TrainConfig::recompute, ParseRecompute,
         "activation recomputation: none, full or selective (attention scores)");
  Choice(cmd, flags, "--dtype", &TrainConfig::dtype, ParseComputeDtype,
         "fp32, or bf16 / fp16 matrix products with fp32 master weights and gradients "
         "(fp16 with dynamic loss scaling)");
  Flag(cmd, flags, "--batch-size", &TrainConfig::batch_size, "samples per step");
  Flag(cmd, flags, "--steps", &TrainConfig::steps, "optimizer steps");
  Flag(cmd, flags, "--seed", &TrainConfig::seed, "seed of weights, data and sampling");
  Flag(cmd, flags, "--lr", &TrainConfig::lr, "peak learning rate (AdamW)");
  Flag(cmd, flags, "--warmup-steps", &TrainConfig::warmup_steps, "linear warm-up steps");
  Flag(cmd, flags, "--min-lr-ratio", &TrainConfig::min_lr_ratio, "cosine floor / lr");
  Flag(cmd, flags, "--weight-decay", &TrainConfig::weight_decay, "AdamW weight decay");
  Flag(cmd, flags, "--clip", &TrainConfig::clip, "global gradient-norm clip (0 = off)");
  Switch(cmd, flags, "--cache-weight-casts", &TrainConfig::cache_weight_casts,
         "with --dtype bf16/fp16: cast each weight once a step for every micro-batch's products "
         "(holds the copies: half the weights' bytes)");
  Choice(cmd, flags, "--adamw-kernel", &TrainConfig::adamw_kernel, ParseAdamWKernel,
         "AdamW's update: auto (fused where libtorch has it, else foreach on a GPU, loop on "
         "the CPU), fused, foreach (multi-tensor kernels) or loop (a tensor at a time)");
  Flag(cmd, flags, "--loss-scale", &TrainConfig::loss_scale,
       "initial dynamic loss scale, >= 1 (0 = 65536 with fp16, off otherwise)");
  Flag(cmd, flags, "--loss-scale-window", &TrainConfig::loss_scale_window,
       "steps without overflow before the loss scale doubles");
  Flag(cmd, flags, "--zero", &TrainConfig::zero,
       "shard the AdamW state across the data-parallel replicas (ZeRO stage 1)");
  Flag(cmd, flags, "--memory-per-rank", &TrainConfig::memory_per_rank,
       "bytes of tensors a rank may hold (2GiB, 500MB or a number): a step that needs more "
       "stops the run (0 = no limit)");
  flags.options.back().first->transform(BytesFlag());
  Flag(cmd, flags, "--dp-bucket", &TrainConfig::dp_bucket,
       "bytes of gradients the data-parallel reducer sums at once (0 = 4MiB on the CPU, 25MiB "
       "on GPUs)");
  flags.options.back().first->transform(BytesFlag());
  Flag(cmd, flags, "--eval-every", &TrainConfig::eval_every, "steps between evaluations");
  Flag(cmd, flags, "--eval-batches", &TrainConfig::eval_batches,
       "gpt, llama: held-out batches per eval");
  Flag(cmd, flags, "--metrics", &TrainConfig::metrics, "write metrics JSON here");
  Flag(cmd, flags, "--trace", &TrainConfig::trace,
       "write the last step's measured and predicted timelines here");
  Flag(cmd, flags, "--tensorboard", &TrainConfig::tensorboard,
       "write TensorBoard scalars (loss, lr, gradient norm, tokens/s, eval loss, bubble, "
       "memory, expert load) to an event file in this folder");
  Flag(cmd, flags, "--checkpoint-dir", &TrainConfig::checkpoint_dir, "save checkpoints here");
  Flag(cmd, flags, "--checkpoint-every", &TrainConfig::checkpoint_every,
       "steps between checkpoints (0 = at the end)");
  Flag(cmd, flags, "--resume", &TrainConfig::resume, "continue from this checkpoint");
  Switch(cmd, flags, "--resume-with-changes", &TrainConfig::resume_with_changes,
         "resume with another --seed, --batch-size, --dtype, --data or --split than the "
         "checkpoint's run (refused otherwise)");
  Flag(cmd, flags, "--sample-tokens", &TrainConfig::sample_tokens,
       "gpt, llama: bytes sampled at the end");
  Flag(cmd, flags, "--timeout", &TrainConfig::timeout_s, "seconds any wait between ranks may take");
  Flag(cmd, flags, "--threads", &TrainConfig::threads,
       "intra-op threads per rank (overrides OMP_NUM_THREADS; 0 = cores / local ranks)");
  Switch(cmd, flags, "--tie-embeddings", &ModelSpec::tie_embeddings,
         "gpt, llama: input embedding and LM head share weights");
  Switch(cmd, flags, "--skip-nonfinite-steps", &TrainConfig::skip_nonfinite_steps,
         "skip a step whose loss or gradient norm is NaN or infinite (default: stop the run)");
  Switch(cmd, flags, "--sequence-parallel", &TrainConfig::sequence_parallel,
         "with --tp: split each sequence over the tensor-parallel ranks outside their products "
         "(norms, residuals, messages between stages: 1 / tp of the activations)");
  Switch(cmd, flags, "--document-mask", &TrainConfig::document_mask,
         "gpt, llama on a tokenized data set: attention stays within each packed document and "
         "positions restart at each (Megatron's reset-attention-mask and "
         "reset-position-ids)");
  Switch(cmd, flags, "--sequential-pairs", &TrainConfig::sequential_pairs,
         "dualpipe, dualpipe-v: run an overlapped pair's forward and backward halves one after "
         "the other (default: at once, on the CPU with tp 1)");
  flags.launch.Register(cmd);
}

TrainConfig ResolveTrainConfig(const TrainFlags& flags) {
  TrainConfig config;
  if (!flags.config_file.empty()) ApplyTomlFile(flags.config_file, config);
  ApplyGivenFlags(flags, config);
  if (flags.auto_layout) {
    config.dp = config.tp = config.pp = config.microbatches = 1;
    config.chunks = 0;
    config.schedule = "1f1b";
    config.stage_layers.clear();
  }
  ApplyModelFolder(config);
  ApplyTokenizer(config);
  config.Validate();
  // Once, in the process that launches the ranks.
  for (const auto& [option, apply] : flags.options) {
    if (option->get_name() != "--model" || option->count() == 0 || LaunchedByConveyor()) continue;
    const std::string note = ModelFolderNote(flags.choices.at("--model"));
    if (!note.empty()) std::fprintf(stderr, "conveyor: note: %s\n", note.c_str());
  }
  return config;
}

void ApplyGivenFlags(const TrainFlags& flags, TrainConfig& config) {
  for (const auto& [option, apply] : flags.options) {
    if (option->count() > 0) apply(config);
  }
}

RanksOptions MeshRanksOptions(const TrainConfig& config, const LaunchFlags& launch) {
  const int ranks = std::max(config.dp, 1) * config.cp * config.tp * config.pp;
  launch.CheckLocalRanks(ranks, config.cp > 1 ? "--dp x --cp x --tp x --pp" : "--dp x --tp x --pp");
  launch.CheckThreads(config.threads, ranks);
  // libtorch's autograd runs the backward of every GPU tensor through one thread per GPU:
  // ranks as threads sharing a GPU queue their backwards on that one thread, and a collective
  // inside one of them waits forever for a peer's queued behind it (seen on an H200: tp 2 as
  // threads on one GPU hung in its first step). The expert-parallel all-to-all and the
  // context-parallel ring exchange inside the backward alike.
  for (const auto& [flag, size] :
       {std::pair{"--tp", config.tp}, std::pair{"--cp", config.cp}, std::pair{"--ep", config.ep}}) {
    CONVEYOR_CHECK(!launch.rank_threads || size == 1 || !UsesCuda(config.device) ||
                   VisibleGpus() >= ranks)
        << flag << " " << size << " with --rank-threads puts " << ranks << " ranks on "
        << VisibleGpus() << " GPU(s): ranks whose collectives run inside the backward would "
        << "wait for each other forever when they share a GPU as threads (libtorch runs a "
        << "GPU's backwards on one thread); use " << flag
        << " 1 there, or ranks as processes on a GPU each";
  }
  RanksOptions options;
  options.nproc = ranks;
  options.ranks_flag = "dp x tp x pp =";
  options.any_world = config.dp == 0;  // the world decides dp (Trainer checks it divides)
  options.timeout = std::chrono::seconds(config.timeout_s);
  options.threads = config.threads;
  options.device = config.device;
  options.output = LaunchOptions::Output::kRank0Direct;
  options.as_threads = launch.rank_threads;
  options.settings = SettingsThatMustAgree(config);
  // What each rank read, where another launcher started them (conveyor's own ranks all read
  // this machine's files).
  if (LaunchedAsRank() && !LaunchedByConveyor()) {
    for (auto& content : ContentsThatMustAgree(config)) options.settings.push_back(content);
  }
  return options;
}

}  // namespace conveyor
