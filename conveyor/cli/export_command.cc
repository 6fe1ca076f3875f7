#include "conveyor/cli/export_command.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "conveyor/cli/bytes_flag.h"
#include "conveyor/common/error.h"
#include "conveyor/train/checkpoint.h"
#include "conveyor/train/hf_export.h"
#include "conveyor/train/lora_export.h"

namespace conveyor {

void AddExportCommand(CLI::App& app) {
  struct ExportFlags {
    std::string checkpoint;
    std::string out;
    std::string lora;
    bool merge = false;
    std::string dtype = "fp32";
    int64_t shard_bytes = HfWriteOptions{}.shard_bytes;
  };
  auto flags = std::make_shared<ExportFlags>();
  CLI::App* cmd = app.add_subcommand(
      "export", "write a llama checkpoint (any mesh) as a Hugging Face model folder");
  cmd->add_option("--checkpoint", flags->checkpoint, "a checkpoint folder (or its parent)")
      ->required();
  cmd->add_option("--out", flags->out,
                  "the new Hugging Face folder (absent or empty); a LoRA checkpoint's adapters "
                  "merged into its weights");
  cmd->add_option("--lora", flags->lora,
                  "a LoRA checkpoint's adapters alone, in PEFT's layout, into this new folder "
                  "(adapter_config.json, adapter_model.safetensors)");
  cmd->add_flag("--merge", flags->merge,
                "with --out: the checkpoint must be a LoRA run's, its adapters merged into the "
                "weights (W + alpha / r B A, as --out writes them anyway)");
  cmd->add_option("--dtype", flags->dtype, "how the weights are stored: fp32, bf16 or fp16")
      ->capture_default_str();
  cmd->add_option("--shard-size", flags->shard_bytes,
                  "most bytes of weights per file (5GB, 500MB, 2GiB or a number)")
      ->transform(BytesFlag())
      ->capture_default_str();
  cmd->callback([flags] {
    HfWriteOptions options;
    options.shard_bytes = flags->shard_bytes;
    const std::string& d = flags->dtype;
    CONVEYOR_CHECK(d == "fp32" || d == "bf16" || d == "fp16")
        << "--dtype must be fp32, bf16 or fp16, got '" << d << "'";
    options.dtype = d == "fp32" ? at::kFloat : d == "bf16" ? at::kBFloat16 : at::kHalf;
    CONVEYOR_CHECK(!flags->out.empty() || !flags->lora.empty())
        << "export needs --out (a Hugging Face folder) or --lora (a PEFT adapter folder)";
    if (flags->merge) {
      CONVEYOR_CHECK(!flags->out.empty())
          << "--merge writes the merged model as a Hugging Face folder: give --out DIR";
      CONVEYOR_CHECK(CheckpointConfig(flags->checkpoint).model.lora_rank > 0)
          << "--merge: checkpoint " << flags->checkpoint
          << " holds no LoRA adapters to merge (its run had no --lora-rank); --out alone "
             "exports it";
    }
    const auto start = std::chrono::steady_clock::now();
    if (!flags->lora.empty()) {
      const int adapted = ExportLoraAdapter(flags->checkpoint, flags->lora, options.dtype);
      std::printf(
          "wrote %s: adapter_config.json and adapter_model.safetensors, %d adapted "
          "projections as %s\n",
          flags->lora.c_str(), adapted, d.c_str());
      if (flags->out.empty()) return;
    }
    const std::vector<std::string> files =
        ExportHfCheckpoint(flags->checkpoint, flags->out, options);
    uintmax_t bytes = 0;
    for (const std::string& file : files) {
      bytes += std::filesystem::file_size(std::filesystem::path(flags->out) / file);
    }
    const bool tokenizer =
        std::filesystem::is_regular_file(std::filesystem::path(flags->out) / kTokenizerFile);
    std::printf("wrote %s: config.json%s and %zu weight file(s), %.1f MB as %s, in %.1f s\n",
                flags->out.c_str(), tokenizer ? ", tokenizer.model" : "", files.size(),
                static_cast<double>(bytes) / 1e6, d.c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  });
}

}  // namespace conveyor
