#include "conveyor/cli/generate_command.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <sstream>
#include <string>

#include "conveyor/cli/run_as_ranks.h"
#include "conveyor/cli/train_flags.h"
#include "conveyor/common/error.h"
#include "conveyor/common/input_path.h"
#include "conveyor/common/range_check.h"
#include "conveyor/data/byte_tokenizer.h"
#include "conveyor/data/load_tokenizer.h"
#include "conveyor/data/tokenizer.h"
#include "conveyor/train/checkpoint.h"
#include "conveyor/train/generate.h"
#include "conveyor/train/generation_run.h"
#include "conveyor/train/model_registry.h"
#include "conveyor/train/preflight.h"

namespace conveyor {

void AddGenerateCommand(CLI::App& app, const std::vector<std::string>& args, int* exit_code) {
  // Numbers as 64 bits: a value too large for an int is refused by name, not wrapped.
  struct GenerateFlags {
    std::string checkpoint;
    std::string model;  // a Hugging Face folder
    std::string prompt;
    std::string prompt_tokens;
    std::string tokenizer;
    int64_t tokens = 200;
    int64_t context = 0;
    Sampling sampling;
    int64_t seed = 1;
    bool no_kv_cache = false;
    TrainFlags mesh;  // --pp, --dp, --tp, --mesh-order and the launch flags
  };
  auto flags = std::make_shared<GenerateFlags>();
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "continue a prompt with a language model (a checkpoint or a Hugging Face folder)");
  CLI::Option* checkpoint =
      cmd->add_option("--checkpoint", flags->checkpoint, "a checkpoint folder (or its parent)");
  cmd->add_option("--model", flags->model, "a Hugging Face Llama or GPT-2 folder")
      ->excludes(checkpoint);
  CLI::Option* prompt = cmd->add_option(
      "--prompt", flags->prompt,
      "text to continue, encoded by the model's tokenizer (its BOS first, when it has one)");
  cmd->add_option("--tokenizer", flags->tokenizer,
                  "bytes or a SentencePiece model (default: the checkpoint's or the folder's "
                  "tokenizer.model, else bytes)");
  cmd->add_option("--prompt-tokens", flags->prompt_tokens,
                  "token ids to continue (\"1,2,3\"); the continuation is printed as ids")
      ->excludes(prompt);
  cmd->add_option("--tokens", flags->tokens, "tokens to generate, up to 1048576")
      ->capture_default_str();
  cmd->add_option("--context", flags->context,
                  "most tokens the model sees (0: its sequence length: a checkpoint's "
                  "--seq-len, a folder's max_position_embeddings)")
      ->capture_default_str();
  cmd->add_option("--temperature", flags->sampling.temperature,
                  "0 = greedy, else within [0.001, 100]")
      ->capture_default_str();
  cmd->add_option("--top-k", flags->sampling.top_k, "sample among the k most probable (0: all)")
      ->capture_default_str();
  cmd->add_option("--top-p", flags->sampling.top_p,
                  "sample among the most probable tokens holding this much probability (1: all)")
      ->capture_default_str();
  cmd->add_option("--seed", flags->seed, "sampling seed")->capture_default_str();
  cmd->add_flag("--no-kv-cache", flags->no_kv_cache,
                "run the whole window for every token instead of keeping each layer's keys and "
                "values (slower; the same tokens)");
  RegisterMeshFlags(cmd, flags->mesh);
  flags->mesh.launch.Register(cmd);
  cmd->callback([flags, args, exit_code] {
    CONVEYOR_CHECK(!flags->checkpoint.empty() || !flags->model.empty())
        << "generate needs a model: --checkpoint CKPT, or --model DIR (a Hugging Face folder)";
    CheckInRange("--tokens", flags->tokens, 0, 1 << 20);
    CheckInRange("--context", flags->context, 0, 65536);
    CheckSampling(flags->sampling);
    CheckInRange("--seed", flags->seed, 0, std::numeric_limits<int64_t>::max());
    TrainConfig config;
    if (!flags->checkpoint.empty()) {
      CheckInputPath("--checkpoint", flags->checkpoint, PathKind::kFolder);
      config = CheckpointConfig(flags->checkpoint);
    } else {
      const std::string note = ModelFolderNote(flags->model);
      if (!note.empty()) std::fprintf(stderr, "conveyor: note: %s\n", note.c_str());
      SetModel(config, flags->model, "--model");
      CONVEYOR_CHECK(!config.model.model_dir.empty())
          << "--model: '" << flags->model << "' is not a Hugging Face folder (for gpt or "
          << "llama, train one and pass its --checkpoint)";
      config.model = ModelFolderSpec(config.model.model_dir);
    }
    if (!flags->tokenizer.empty()) config.tokenizer = flags->tokenizer;
    ApplyTokenizer(config);
    const int context =
        flags->context > 0 ? static_cast<int>(flags->context) : config.model.seq_len;
    // A GPT's position table has seq_len rows; a Llama's rotary positions have no bound.
    CONVEYOR_CHECK(context <= ArchitectureOf(config.model.kind).ContextLimit(config.model))
        << "--context " << context << " exceeds the " << config.model.seq_len
        << " positions this GPT has";
    config.model.seq_len = std::max(config.model.seq_len, context);
    CONVEYOR_CHECK(IsLanguageModel(config.model.kind))
        << "generate needs a language model (gpt or llama), '" << flags->checkpoint << "' holds a "
        << ModelKindName(config.model.kind);
    const bool as_text = flags->prompt_tokens.empty();
    const int vocab = static_cast<int>(ModelSizes(config.model).vocab);
    const std::shared_ptr<const Tokenizer> tokenizer = LoadTokenizer(config.tokenizer);
    CONVEYOR_CHECK(!as_text || dynamic_cast<const ByteTokenizer*>(tokenizer.get()) == nullptr ||
                   vocab == static_cast<int>(ByteTokenizer::kVocabSize))
        << "this model has a vocabulary of " << vocab << " tokens, not the byte tokenizer's "
        << ByteTokenizer::kVocabSize << ": give its SentencePiece model (--tokenizer; a "
        << "tokenizer.model beside the weights is found by itself), or --prompt-tokens and read "
        << "the ids it prints";
    const std::vector<int64_t> prompt =
        as_text ? PromptTokens(*tokenizer, flags->prompt)
                : ParseTokenIds(flags->prompt_tokens, vocab, "--prompt-tokens");
    // One rank unless the flags say otherwise, whatever mesh trained the checkpoint.
    config.pp = 1;
    config.dp = 1;
    config.tp = 1;
    ApplyGivenFlags(flags->mesh, config);
    // The tokens generated one at a time do not split over the TP or CP ranks.
    config.sequence_parallel = false;
    config.cp = 1;
    ConfigureGeneration(config);
    const RanksOptions options = MeshRanksOptions(config, flags->mesh.launch);
    PreflightCheck(config);  // among others: no more stages than the model has layers
    const GenerationRequest request{.checkpoint = flags->checkpoint,
                                    .prompt = prompt,
                                    .tokens = static_cast<int>(flags->tokens),
                                    .sampling = flags->sampling,
                                    .seed = static_cast<uint64_t>(flags->seed),
                                    .context = context,
                                    .kv_cache = !flags->no_kv_cache};
    *exit_code = RunAsRanks(args, options, [&](const RankContext& rank) {
      const GenerationRun run = RunGeneration(config, rank, request);
      const std::vector<int64_t>& out = run.tokens;
      const double seconds = run.seconds;
      if (rank.rank != 0) return;
      if (as_text) {
        std::printf("%s%s\n", flags->prompt.c_str(),
                    ByteTokenizer::Printable(DecodeContinuation(*tokenizer, prompt, out)).c_str());
      } else {
        std::string ids;
        for (int64_t id : out) ids += (ids.empty() ? "" : ",") + std::to_string(id);
        std::printf("%s\n", ids.c_str());
      }
      // On stderr: stdout holds the continuation alone.
      std::fprintf(stderr, "generated %zu tokens in %.2f s: %.1f tokens/s (%s)\n", out.size(),
                   seconds, seconds > 0 ? static_cast<double>(out.size()) / seconds : 0.0,
                   flags->no_kv_cache ? "every window computed whole" : "key-value cache");
    });
  });
}

}  // namespace conveyor
