// End-to-end tests of choosing the layout: `conveyor profile`, `plan --auto --costs`, and
// `train --auto` under --memory-per-rank, which the run then holds to.
#include "conveyor/cli/auto_train.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "conveyor/cli/cli_testing.h"
#include "conveyor/cli/layer_cost_json.h"

namespace conveyor {
namespace {

const char kModel[] = " --layers 4 --hidden 32 --heads 2 --seq-len 32 --batch-size 8";

// The costs profile writes are read back whole, and plan --auto plans by them.
TEST(CliTest, ProfileWritesCostsThatPlanAutoReads) {
  const std::string dir = ScratchDir("profile");
  Result r =
      Conveyor(std::string("profile") + kModel + " --rounds 1 --ranks 2 -o " + dir + "/costs.json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("block selective"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("block selective/2"), std::string::npos) << "a TP rank's shard: " << r.out;
  const LayerCostTable table = ReadLayerCostTable(dir + "/costs.json");
  EXPECT_EQ(table.model.layers, 4);
  EXPECT_EQ(table.model.hidden, 32);
  EXPECT_EQ(table.model.vocab, 256);
  EXPECT_EQ(table.threads, 1);
  EXPECT_EQ(table.sequences, (std::vector<int64_t>{1, 2, 4, 8, 16})) << "the default sizes";
  ASSERT_EQ(table.block.at.size(), 5u);
  EXPECT_GT(table.block.at[2].forward_s, 0);
  // Four sequences hold more than one does.
  EXPECT_GT(table.block.at[2].activation_bytes, table.block.at[0].activation_bytes);
  EXPECT_EQ(table.head.params, 256 * 32 + 2 * 32);  // the LM head and the final LayerNorm
  // 2 ranks may run tp 2 (2 heads): one rank's shards, read back at every size. A shard keeps
  // less than the whole block (its heads' and MLP units' part), more than half of it (the
  // norms' and residuals' activations stay whole).
  ASSERT_EQ(table.tp_shards.size(), 1u);
  const MeasuredKinds& shard = table.tp_shards.at(2);
  ASSERT_EQ(shard.block.at.size(), 5u);
  EXPECT_EQ(shard.block.params, table.block.params / 2);
  for (size_t k = 0; k < 5; ++k) {
    EXPECT_GT(shard.block.at[k].forward_s, 0);
    EXPECT_GT(shard.head.at[k].input_s, 0);
    EXPECT_LT(shard.block.at[k].activation_bytes, table.block.at[k].activation_bytes);
    EXPECT_GT(shard.block.at[k].activation_bytes, table.block.at[k].activation_bytes / 2);
  }

  r = Conveyor("plan --auto --costs " + dir +
               "/costs.json --world 4 --cores 2 --global-batch 8 --memory-per-rank 1e9 "
               "--top 1000 --format json");  // every candidate
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json plan = nlohmann::json::parse(r.out);
  bool selective = false;
  for (const auto& c : plan["best"]) {
    EXPECT_EQ(c["dp"].get<int>() * c["tp"].get<int>() * c["pp"].get<int>(), 4);
    selective |= c["recompute"] == "selective";
    int layers = 0;
    for (char ch : c["stage_layers"].get<std::string>()) layers += ch == ',' ? 0 : ch - '0';
    EXPECT_EQ(layers, 6) << "4 blocks, the embedding and the head: " << c["stage_layers"];
  }
  EXPECT_TRUE(selective) << "measured costs offer selective recomputation";
  // --pp fixes the pipeline's size.
  r = Conveyor("plan --auto --costs " + dir +
               "/costs.json --world 4 --cores 2 --global-batch 8 --pp 2 --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const auto& c : nlohmann::json::parse(r.out)["best"]) EXPECT_EQ(c["pp"], 2);

  // Ranks sharing one GPU are planned from costs measured there, not on the CPU.
  r = Conveyor("plan --auto --costs " + dir + "/costs.json --world 4 --one-gpu");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("needs layer costs measured on it (conveyor profile --device cuda"),
            std::string::npos)
      << r.err;

  std::ofstream(dir + "/bad.json") << R"({"format": "conveyor layer costs 1"})";
  r = Conveyor("plan --auto --costs " + dir + "/bad.json");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("profile again"), std::string::npos) << r.err;
}

// A cap below what the unlimited choice needs makes train --auto choose another layout, and
// the run stays under the cap (the counting allocator would stop it otherwise).
TEST(CliTest, TrainAutoChoosesALayoutThatRunsUnderTheMemoryCap) {
  const std::string dir = ScratchWithCorpus("auto-train");
  const std::string job = std::string("train --auto --world 4 --steps 2 --eval-every 0 ") +
                          "--sample-tokens 0" + kModel + " --data " + dir + "/corpus.txt";
  Result r = Conveyor(job + " --metrics " + dir + "/free.json");
  ASSERT_EQ(r.code, 0) << r.err;
  const size_t line = r.out.find("auto: dp x tp x pp ");
  ASSERT_NE(line, std::string::npos) << r.out;
  const std::string free_choice = r.out.substr(line, r.out.find('\n', line) - line);
  EXPECT_NE(r.out.find("done: 2 steps"), std::string::npos) << r.out;

  // The need of the unlimited choice, as predicted; half of it as the cap.
  const size_t peak = r.out.find("peak ", line);
  ASSERT_NE(peak, std::string::npos) << r.out;
  const double need_mib = std::stod(r.out.substr(peak + 5));
  const int64_t cap = static_cast<int64_t>(need_mib * (1 << 20) * 0.6);
  r = Conveyor(job + " --memory-per-rank " + std::to_string(cap) + " --metrics " + dir +
               "/capped.json");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const size_t capped = r.out.find("auto: dp x tp x pp ");
  ASSERT_NE(capped, std::string::npos) << r.out;
  EXPECT_NE(r.out.substr(capped, r.out.find('\n', capped) - capped), free_choice) << r.out;
  EXPECT_NE(r.out.find("done: 2 steps"), std::string::npos) << r.out;
  // Every rank's tensors stayed under the cap (the allocator would have stopped the run).
  std::ifstream metrics(dir + "/capped.json");
  const nlohmann::json m = nlohmann::json::parse(metrics);
  for (const auto& rank : m["ranks"]) {
    EXPECT_GT(rank["peak_tensor_bytes"].get<double>(), 0);
    EXPECT_LE(rank["peak_tensor_bytes"].get<double>(), static_cast<double>(cap));
  }

  r = Conveyor(job + " --memory-per-rank 10000");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no layout fits"), std::string::npos) << r.err;
  r = Conveyor(job + " --pp 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--pp excludes --auto"), std::string::npos) << r.err;
}

// Without --auto, a cap the run cannot keep stops it with one line naming rank, stage,
// micro-batch, action, step and the bytes.
TEST(CliTest, AMemoryCapStopsTheRunThatExceedsIt) {
  const std::string dir = ScratchWithCorpus("memory-cap");
  const Result r = Conveyor(std::string("train --pp 2 --microbatches 2 --steps 2 ") + kModel +
                            " --memory-per-rank 600KiB --data " + dir + "/corpus.txt");
  EXPECT_EQ(r.code, 1) << r.out;
  const std::string all = r.out + r.err;
  EXPECT_NE(all.find("memory limit: "), std::string::npos) << all;
  EXPECT_NE(all.find("over --memory-per-rank 0.6 MiB at step 1"), std::string::npos) << all;
  EXPECT_NE(all.find(", stage "), std::string::npos) << all;
  EXPECT_NE(all.find(", micro-batch "), std::string::npos) << all;
}

TEST(AutoTrainTest, RanksRunTheChosenLayoutInsteadOfAuto) {
  TrainConfig chosen;
  chosen.dp = 2, chosen.tp = 1, chosen.pp = 2;
  chosen.schedule = "zb-h1";
  chosen.microbatches = 4;
  chosen.recompute = Recompute::kSelective;
  chosen.zero = 1;
  chosen.stage_layers = "3,3";
  const std::vector<std::string> args =
      ArgsWithLayout({"train", "--auto", "--world", "4", "--costs=c.json", "--steps", "3"}, chosen);
  const std::vector<std::string> expected = {
      "train",     "--steps",    "3",     "--dp",           "2",  "--tp",     "1", "--pp",
      "2",         "--schedule", "zb-h1", "--microbatches", "4",  "--chunks", "0", "--recompute",
      "selective", "--zero",     "1",     "--stage-layers", "3,3"};
  EXPECT_EQ(args, expected);
}

}  // namespace
}  // namespace conveyor
