#include "conveyor/cli/eval_command.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "conveyor/cli/progress_bar.h"
#include "conveyor/cli/run_as_ranks.h"
#include "conveyor/cli/train_flags.h"
#include "conveyor/common/error.h"
#include "conveyor/common/input_path.h"
#include "conveyor/data/blended_lm_stream.h"
#include "conveyor/data/byte_tokenizer.h"
#include "conveyor/data/open_token_source.h"
#include "conveyor/launch/launcher.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/checkpoint.h"
#include "conveyor/train/evaluation_run.h"
#include "conveyor/train/forward_pipeline.h"
#include "conveyor/train/model_registry.h"
#include "conveyor/train/preflight.h"

namespace conveyor {

void AddEvalCommand(CLI::App& app, const std::vector<std::string>& args, int* exit_code) {
  struct EvalFlags {
    TrainFlags train;
    std::string format = "text";
  };
  auto flags = std::make_shared<EvalFlags>();
  CLI::App* cmd = app.add_subcommand(
      "eval", "mean next-token loss and perplexity of a language model over a data set");
  RegisterTrainFlags(cmd, flags->train);
  cmd->add_option("--format", flags->format, "text or json (the result alone on stdout)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->callback([flags, args, exit_code, cmd] {
    // eval reads the whole stream (token_windows.h); --split cuts a training run's data.
    CONVEYOR_CHECK(cmd->get_option("--split")->count() == 0)
        << "eval reads every token of --data, not a split of it: --split "
        << flags->train.given.split
        << " does not apply (to evaluate a part, prepare that part as a data set of its own)";
    TrainConfig config = ResolveTrainConfig(flags->train);
    const std::string checkpoint = config.resume;
    if (!checkpoint.empty()) {
      CheckInputPath("--resume", checkpoint, PathKind::kFolder);
      // The checkpoint's model, with the flags given over it (data, windows, mesh).
      config = CheckpointConfig(checkpoint);
      ApplyGivenFlags(flags->train, config);
      config.resume.clear();
      config.Validate();
    }
    CONVEYOR_CHECK(IsLanguageModel(config.model.kind))
        << "eval measures a language model (gpt or llama), not a "
        << ModelKindName(config.model.kind);
    const bool token_data = IsTokenSource(config.data);
    CONVEYOR_CHECK(token_data || !IsTokenData(config.data))
        << "eval reads one data set or token file; --data '" << config.data << "' is a blend";
    const int64_t vocab = ModelSizes(config.model).vocab;
    CONVEYOR_CHECK(token_data || vocab == static_cast<int64_t>(ByteTokenizer::kVocabSize))
        << "eval reads a text as bytes; this model has a vocabulary of " << vocab
        << " tokens, whose tokenizer conveyor does not have yet (a tokenized data set, "
           "--data PREFIX, holds token ids)";
    ConfigureForwardOnly(config);
    const RanksOptions options = MeshRanksOptions(config, flags->train.launch);
    // Checked once, before any rank starts (the data found and opened, a model folder's
    // tensors against its config.json), as train checks them, but for the split.
    if (!LaunchedByConveyor()) {
      PreflightCheck(config);
      PreflightFiles(config, DataUse::kEvaluateAll);
    }
    const auto start = std::chrono::steady_clock::now();
    *exit_code = RunAsRanks(args, options, [&](const RankContext& rank) {
      // Progress on stderr from rank 0, at most every two seconds: stdout keeps the result.
      double last_s = 0;
      EvaluationProgress progress;
      if (rank.rank == 0) {
        progress = [&](int64_t done, int64_t total, double seconds) {
          if (seconds - last_s < 2 || done == total) return;
          last_s = seconds;
          std::fprintf(stderr, "eval: %lld/%lld batches, eta %s\n", static_cast<long long>(done),
                       static_cast<long long>(total),
                       FormatDuration(seconds * static_cast<double>(total - done) / done).c_str());
        };
      }
      const EvaluationRun run = RunEvaluation(config, checkpoint, rank, progress);
      const TokenEvalMetrics& m = run.metrics;
      if (rank.rank != 0) return;
      if (flags->format == "json") {
        // "targets": the predictions counted, as "tokens" (kept for earlier readers) says.
        const nlohmann::json result = {{"tokens", m.tokens},
                                       {"targets", m.tokens},
                                       {"loss_mask", run.loss_mask},
                                       {"document_mask", config.document_mask},
                                       {"loss", m.loss},
                                       {"perplexity", m.perplexity}};
        std::printf("%s\n", result.dump().c_str());
        return;
      }
      std::printf(
          "%s: %lld %s predicted (%s; %s, in windows of %lld%s): loss %.6f, "
          "perplexity %.4f, %.0f tokens/s\n",
          checkpoint.empty() ? MakeModelTask(config)->Describe().c_str() : checkpoint.c_str(),
          static_cast<long long>(m.tokens), run.loss_mask ? "targets" : "tokens",
          run.source.c_str(),
          run.loss_mask ? "the tokens its loss mask marks" : "every token",
          static_cast<long long>(config.model.seq_len),
          config.document_mask ? ", documents kept apart" : "", m.loss, m.perplexity,
          static_cast<double>(m.tokens) /
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    });
  });
}

}  // namespace conveyor
