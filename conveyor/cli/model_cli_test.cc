// `conveyor eval`, `generate` and LoRA's export end to end on a Llama: exact token counts, JSON
// alone on stdout, the same results on any mesh, from a checkpoint or a Hugging Face folder,
// refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "conveyor/cli/cli_testing.h"

namespace conveyor {
namespace {

TEST(CliTest, EvalIsExactOnAnyMeshAndReadsCheckpoints) {
  const std::string dir = ScratchWithCorpus("eval");
  const std::string corpus = dir + "/corpus.txt";
  const std::string arch =
      "--model llama --layers 2 --hidden 32 --heads 4 --kv-heads 2 --seq-len 16 "
      "--batch-size 4 --microbatches 2 ";
  const std::string model = arch + "--data " + corpus + " ";
  const Result one = Conveyor("eval " + model + "--format json");
  ASSERT_EQ(one.code, 0) << one.err;
  const auto a = nlohmann::json::parse(one.out);  // the result and nothing else
  ASSERT_EQ(a.size(), 6u) << one.out;
  EXPECT_EQ(a["targets"], a["tokens"]);
  EXPECT_EQ(a["loss_mask"], false);  // a text has none
  EXPECT_EQ(a["document_mask"], false);
  // One file is one document: every byte but the first is predicted once.
  EXPECT_EQ(a["tokens"].get<int64_t>(),
            static_cast<int64_t>(std::filesystem::file_size(corpus)) - 1);
  EXPECT_NEAR(a["perplexity"].get<double>(), std::exp(a["loss"].get<double>()), 1e-6);
  const Result mesh = Conveyor("eval " + model + "--tp 2 --pp 2 --schedule 1f1b --format json");
  ASSERT_EQ(mesh.code, 0) << mesh.err;
  const auto b = nlohmann::json::parse(mesh.out);
  EXPECT_EQ(b["tokens"], a["tokens"]);
  EXPECT_NEAR(b["loss"].get<double>(), a["loss"].get<double>(), 1e-5 * a["loss"].get<double>());
  // A trained checkpoint: its own model, another loss; the text form names it.
  const Result train = Conveyor("train " + model +
                                "--steps 3 --eval-every 0 --sample-tokens 0 "
                                "--checkpoint-dir " +
                                dir + "/ckpt");
  ASSERT_EQ(train.code, 0) << train.err;
  const Result trained = Conveyor("eval --resume " + dir + "/ckpt --data " + corpus +
                                  " --batch-size 4 --microbatches 2 --pp 2 --format json");
  ASSERT_EQ(trained.code, 0) << trained.err;
  const auto c = nlohmann::json::parse(trained.out);
  EXPECT_EQ(c["tokens"], a["tokens"]);
  EXPECT_LT(c["loss"].get<double>(), a["loss"].get<double>());
  const Result text = Conveyor("eval --resume " + dir + "/ckpt --data " + corpus +
                               " --batch-size 4 --microbatches 2");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("tokens predicted"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("perplexity"), std::string::npos) << text.out;
  const Result missing = Conveyor("eval " + arch + "--data " + dir + "/absent.txt");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find(dir + "/absent.txt"), std::string::npos) << missing.err;
  EXPECT_EQ(missing.err.find("rank"), std::string::npos) << "refused before any rank started";
  const Result classifier = Conveyor("eval --model classifier --data " + corpus);
  EXPECT_EQ(classifier.code, 1);
  EXPECT_NE(classifier.err.find("language model"), std::string::npos) << classifier.err;
}

// Greedy generation from token ids: the checkpoint and its fp32 export continue alike, on
// one rank and on tp 2 x pp 2, with the key-value cache or without; sampling flags are
// checked; tokens/s goes to stderr.
// LoRA as a user runs it: train adapters on pp 2, then export them in PEFT's layout and the
// merged model at once; --merge of a checkpoint without adapters and bad LoRA settings are
// refused in one line.
TEST(CliTest, LoraTrainsAdaptersAndExportsThemAndTheMergedModel) {
  const std::string dir = ScratchWithCorpus("lora");
  const std::string model =
      "train --model llama --layers 2 --hidden 32 --heads 4 --kv-heads 2 --seq-len 16 "
      "--batch-size 4 --microbatches 2 --steps 2 --eval-every 0 --sample-tokens 0 --data " +
      dir + "/corpus.txt ";
  const Result lora = Conveyor(model + "--pp 2 --lora-rank 4 --lora-alpha 8 --metrics " + dir +
                               "/m.json --checkpoint-dir " + dir + "/lora");
  ASSERT_EQ(lora.code, 0) << lora.err;
  EXPECT_NE(lora.out.find("trained (LoRA adapters)"), std::string::npos) << lora.out;
  const auto metrics = nlohmann::json::parse(std::ifstream(dir + "/m.json"));
  EXPECT_GT(metrics["frozen_parameters"].get<int64_t>(),
            10 * metrics["trained_parameters"].get<int64_t>());
  const Result out = Conveyor("export --checkpoint " + dir + "/lora --lora " + dir +
                              "/adapter --out " + dir + "/merged --merge");
  ASSERT_EQ(out.code, 0) << out.err;
  for (const std::string file : {"/adapter/adapter_config.json",
                                 "/adapter/adapter_model.safetensors", "/merged/config.json"}) {
    EXPECT_TRUE(std::filesystem::is_regular_file(dir + file)) << file;
  }
  const auto config = nlohmann::json::parse(std::ifstream(dir + "/adapter/adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "LORA");
  EXPECT_EQ(config["r"], 4);
  ASSERT_EQ(Conveyor(model + "--checkpoint-dir " + dir + "/full").code, 0);
  const Result merge = Conveyor("export --checkpoint " + dir + "/full --out " + dir + "/m2 --merge");
  EXPECT_EQ(merge.code, 1);
  EXPECT_NE(merge.err.find("holds no LoRA adapters to merge"), std::string::npos) << merge.err;
  for (const auto& [flags, error] : std::vector<std::pair<std::string, std::string>>{
           {"--lora-rank 4 --lora-targets q_proj,qkv", "qkv"},
           {"--lora-rank 100", "100"}}) {
    const Result bad = Conveyor(model + flags);
    EXPECT_EQ(bad.code, 1) << flags;
    EXPECT_NE(bad.err.find(error), std::string::npos) << flags << ": " << bad.err;
    EXPECT_EQ(Lines(bad.err), 1) << bad.err;
  }
}

TEST(CliTest, GenerateFromACheckpointOrAFolderWithTokenIds) {
  const std::string dir = ScratchWithCorpus("generate_ids");
  const Result train = Conveyor(
      "train --model llama --layers 2 --hidden 32 --heads 4 --kv-heads 2 --seq-len 16 "
      "--batch-size 4 --microbatches 2 --steps 2 --eval-every 0 --sample-tokens 0 --data " +
      dir + "/corpus.txt --checkpoint-dir " + dir + "/ckpt");
  ASSERT_EQ(train.code, 0) << train.err;
  ASSERT_EQ(Conveyor("export --checkpoint " + dir + "/ckpt --out " + dir + "/hf").code, 0);
  const std::string ask = "--prompt-tokens 97,98,99 --tokens 5 --temperature 0";
  const Result a = Conveyor("generate --checkpoint " + dir + "/ckpt " + ask);
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(std::count(a.out.begin(), a.out.end(), ','), 4) << a.out;
  EXPECT_NE(a.err.find("tokens/s (key-value cache)"), std::string::npos) << a.err;
  const Result whole = Conveyor("generate --checkpoint " + dir + "/ckpt --no-kv-cache " + ask);
  ASSERT_EQ(whole.code, 0) << whole.err;
  EXPECT_EQ(whole.out, a.out);
  EXPECT_NE(whole.err.find("every window computed whole"), std::string::npos) << whole.err;
  const Result b = Conveyor("generate --model " + dir + "/hf " + ask);
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(b.out, a.out);
  const Result c = Conveyor("generate --model " + dir + "/hf --tp 2 --pp 2 " + ask);
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(c.out, a.out);
  const Result sampled = Conveyor("generate --model " + dir +
                                  "/hf --prompt-tokens 97 --tokens 5 --top-k 3 --top-p 0.9");
  EXPECT_EQ(sampled.code, 0) << sampled.err;
  const Result bad_p = Conveyor("generate --model " + dir + "/hf --prompt-tokens 97 --top-p 0");
  EXPECT_EQ(bad_p.code, 1);
  EXPECT_NE(bad_p.err.find("top-p"), std::string::npos) << bad_p.err;
  const Result bad_id = Conveyor("generate --model " + dir + "/hf --prompt-tokens 97,256");
  EXPECT_EQ(bad_id.code, 1);
  EXPECT_NE(bad_id.err.find("'256' is not a token id"), std::string::npos) << bad_id.err;
  const Result none = Conveyor("generate --prompt a");
  EXPECT_EQ(none.code, 1);
  EXPECT_NE(none.err.find("needs a model"), std::string::npos) << none.err;
}

// A folder named `llama` in the working directory does not replace the built-in Llama: the
// flags size the model, one note says which was taken; `--model ./llama` reads the folder.
TEST(CliTest, ABuiltInModelNameIsNotShadowedByAFolder) {
  const std::string dir = ScratchWithCorpus("model_shadow");
  const Result train = Conveyor(
      "train --model llama --layers 1 --hidden 48 --heads 4 --seq-len 16 --batch-size 4 --pp 1 "
      "--microbatches 2 --steps 1 --eval-every 0 --sample-tokens 0 --data " +
      dir + "/corpus.txt --checkpoint-dir " + dir + "/ckpt");
  ASSERT_EQ(train.code, 0) << train.err;
  ASSERT_EQ(Conveyor("export --checkpoint " + dir + "/ckpt --out " + dir + "/llama").code, 0);
  const std::string run = "cd " + dir + " && timeout 180 " + CONVEYOR_BINARY +
                          " train --layers 2 --hidden 32 --heads 4 --seq-len 16 --batch-size 4 "
                          "--microbatches 2 --steps 1 --eval-every 0 --sample-tokens 0 --data "
                          "corpus.txt --pp 2 --model ";
  const Result builtin = Shell(run + "llama");
  ASSERT_EQ(builtin.code, 0) << builtin.err;
  EXPECT_EQ(builtin.out.rfind("llama: 2 layers, hidden 32, 4 heads", 0), 0u) << builtin.out;
  const std::string note =
      "conveyor: note: --model llama is the built-in llama, not the folder ./llama here "
      "(--model ./llama reads that folder)\n";
  const size_t at = builtin.err.find(note);
  EXPECT_NE(at, std::string::npos) << builtin.err;
  EXPECT_EQ(builtin.err.find(note, at + 1), std::string::npos) << "said once: " << builtin.err;
  const Result folder = Shell(run + "./llama");
  ASSERT_EQ(folder.code, 0) << folder.err;
  EXPECT_EQ(folder.out.rfind("llama from ./llama: 1 layers, hidden 48, 4 heads", 0), 0u)
      << folder.out;
  EXPECT_EQ(folder.err.find("note: --model"), std::string::npos) << folder.err;
}

}  // namespace
}  // namespace conveyor
