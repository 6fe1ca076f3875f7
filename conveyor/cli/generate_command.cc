#include "conveyor/cli/generate_command.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>

#include "conveyor/cli/run_as_ranks.h"
#include "conveyor/cli/train_flags.h"
#include "conveyor/common/error.h"
#include "conveyor/common/range_check.h"
#include "conveyor/data/byte_tokenizer.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/checkpoint.h"
#include "conveyor/train/forward_pipeline.h"
#include "conveyor/train/generate.h"
#include "conveyor/train/pipeline_model.h"
#include "conveyor/train/preflight.h"

namespace conveyor {

void AddGenerateCommand(CLI::App& app, const std::vector<std::string>& args, int* exit_code) {
  // Numbers as 64 bits: a value too large for an int is refused by name, not wrapped.
  struct GenerateFlags {
    std::string checkpoint;
    std::string prompt;
    int64_t tokens = 200;
    double temperature = kDefaultTemperature;
    int64_t seed = 1;
    TrainFlags mesh;  // --pp, --dp, --tp, --mesh-order and the launch flags
  };
  auto flags = std::make_shared<GenerateFlags>();
  CLI::App* cmd = app.add_subcommand(
      "generate", "sample text from a trained language model's checkpoint (gpt, llama)");
  cmd->add_option("--checkpoint", flags->checkpoint, "a checkpoint folder (or its parent)")
      ->required();
  cmd->add_option("--prompt", flags->prompt, "text to continue");
  cmd->add_option("--tokens", flags->tokens, "bytes to generate, up to 1048576")
      ->capture_default_str();
  cmd->add_option("--temperature", flags->temperature, "0 = greedy, else within [0.001, 100]")
      ->capture_default_str();
  cmd->add_option("--seed", flags->seed, "sampling seed")->capture_default_str();
  RegisterMeshFlags(cmd, flags->mesh);
  flags->mesh.launch.Register(cmd);
  cmd->callback([flags, args, exit_code] {
    CheckInRange("--tokens", flags->tokens, 0, 1 << 20);
    // Below 0.001 the scaled logits overflow a float; NaN fails every comparison.
    const double t = flags->temperature;
    CONVEYOR_CHECK(t == 0 || (t >= 1e-3 && t <= 100))
        << "--temperature must be 0 (greedy) or within [0.001, 100], got " << t;
    CheckInRange("--seed", flags->seed, 0, std::numeric_limits<int64_t>::max());
    TrainConfig config = CheckpointConfig(flags->checkpoint);
    CONVEYOR_CHECK(IsLanguageModel(config.model))
        << "generate needs a language model's checkpoint (gpt or llama), '" << flags->checkpoint
        << "' holds a " << ModelKindName(config.model);
    CONVEYOR_CHECK(ModelVocab(config) == static_cast<int>(ByteTokenizer::kVocabSize))
        << "generate reads and writes bytes; '" << flags->checkpoint << "' holds a model of "
        << ModelVocab(config) << " tokens, whose tokenizer conveyor does not have yet";
    // One rank unless the flags say otherwise, whatever mesh trained the checkpoint.
    config.pp = 1;
    config.dp = 1;
    config.tp = 1;
    ApplyGivenFlags(flags->mesh, config);
    config.schedule = "gpipe";
    config.chunks = 0;
    config.microbatches = 1;
    config.batch_size = std::max(config.dp, 1);  // one sample per replica
    // Generation writes nothing of the run that trained the checkpoint.
    config.metrics.clear();
    config.trace.clear();
    config.checkpoint_dir.clear();
    config.resume.clear();
    // Profiling times layers on training data, which generation has none of; any partition
    // loads the checkpoint (its tensors are whole, by name).
    if (config.partition == PartitionBy::kProfile) config.partition = PartitionBy::kParams;
    const RanksOptions options = MeshRanksOptions(config, flags->mesh.launch);
    PreflightCheck(config);  // among others: no more stages than the model has layers
    *exit_code = RunAsRanks(args, options, [&](const RankContext& rank) {
      // The model alone: no corpus, no optimizer, no measurement.
      PipelineModel model(config, MakeModelTask(config), rank);
      LoadWeights(flags->checkpoint, model, config);
      ForwardPipeline forward(model);
      const std::string text =
          Generate(forward, flags->prompt, static_cast<int>(flags->tokens), flags->temperature,
                   static_cast<uint64_t>(flags->seed), config.seq_len);
      if (rank.rank == 0) {
        std::printf("%s%s\n", flags->prompt.c_str(), ByteTokenizer::Printable(text).c_str());
      }
    });
  });
}

}  // namespace conveyor
