// End-to-end tests of choosing the layout: `conveyor profile`, `plan --auto --costs`, and
// `train --auto` under --memory-per-rank, which the run then holds to.
#include "conveyor/cli/auto_train.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "conveyor/cli/cli_testing.h"
#include "conveyor/cli/layer_cost_json.h"
#include "conveyor/common/process_stats.h"

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
  const nlohmann::json fixed = nlohmann::json::parse(r.out);  // outlives the loop
  for (const auto& c : fixed["best"]) EXPECT_EQ(c["pp"], 2);

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

// A Mixture-of-Experts llama: its sparse blocks timed as their own kind and read back, the
// plan spreading its experts over data-parallel ranks (ep) and pricing their all-to-alls;
// from FLOP counts too.
TEST(CliTest, PlanAutoSpreadsAMixtureOfExpertsOverExpertParallelRanks) {
  const std::string dir = ScratchDir("profile_moe");
  Result r = Conveyor(std::string("profile --model llama") + kModel +
                      " --experts 4 --top-k 2 --expert-units 32 --moe-first-dense 1 --rounds 1 "
                      "--ranks 2 --sizes 1,2 -o " +
                      dir + "/costs.json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("sparse block"), std::string::npos) << r.out;
  const LayerCostTable table = ReadLayerCostTable(dir + "/costs.json");
  EXPECT_EQ(table.model.experts, 4);
  EXPECT_EQ(table.model.top_k, 2);
  EXPECT_EQ(table.model.expert_units, 32);
  EXPECT_EQ(table.model.dense_blocks, (std::vector<int64_t>{0}));
  ASSERT_EQ(table.sparse_block.at.size(), 2u);
  EXPECT_GT(table.sparse_block.at[1].forward_s, 0);
  EXPECT_TRUE(table.tp_shards.empty()) << "experts at tp 1";

  r = Conveyor("plan --auto --costs " + dir +
               "/costs.json --world 4 --cores 2 --global-batch 8 --memory-per-rank 1e9 "
               "--top 1000 --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<int> eps;
  const nlohmann::json candidates = nlohmann::json::parse(r.out);
  for (const auto& c : candidates["best"]) {
    EXPECT_EQ(c["tp"], 1);
    const int ep = c["ep"].get<int>();
    EXPECT_EQ(c["dp"].get<int>() % ep, 0);
    EXPECT_EQ(c["ep_comm_s"].get<double>() > 0, ep > 1) << c.dump();
    eps.push_back(ep);
  }
  for (int ep : {1, 2, 4}) EXPECT_NE(std::count(eps.begin(), eps.end(), ep), 0) << "ep " << ep;
  r = Conveyor("plan --auto --costs " + dir +
               "/costs.json --world 4 --cores 2 --global-batch 8 "
               "--ep 2 --top 3");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(", ep 2  "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("3 of them sparse (4 experts, top 2)"), std::string::npos) << r.out;

  // From FLOP counts: Mixtral's shape on 64 GPUs of 80 GB.
  r = Conveyor(
      "plan --auto --model llama --layers 32 --hidden 4096 --heads 32 --kv-heads 8 "
      "--intermediate 14336 --vocab 32000 --seq-len 4096 --experts 8 --top-k 2 --world 64 "
      "--pp 4 --global-batch 256 --format json --top 20");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json plan = nlohmann::json::parse(r.out);
  EXPECT_NEAR(plan["params"].get<double>() / 1e9, 46.7, 0.05);
  EXPECT_GT(plan["best"][0]["ep"].get<int>(), 1) << "46.7 B parameters fit 80 GB only spread";
  r = Conveyor("plan --auto --model gpt --experts 8");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("llama"), std::string::npos) << r.err;
}

// Writes to `path` costs of kModel whose bytes `conveyor profile` counted (what the memory
// cap is checked against) and whose times are fixed: the layers' a made-up function of the
// micro-batch, the cores' capacity 2 ranks' worth (a busy machine measures other times,
// which once made the unlimited choice one that nothing under 0.6 of its need replaced).
void WriteFixedCosts(const std::string& path) {
  const std::string measured = path + ".measured";
  const Result r = Conveyor(std::string("profile") + kModel +
                            " --rounds 1 --ranks 4 --sizes 1,2,4,8 -o " + measured);
  ASSERT_EQ(r.code, 0) << r.err;
  LayerCostTable table = ReadLayerCostTable(measured);
  // Seconds a sequence of each kind's forward (embedding, block, selective block, head),
  // plus a fixed cost an operation that makes small micro-batches dear.
  constexpr double kPerSequence[] = {20e-6, 200e-6, 200e-6, 400e-6};
  constexpr double kFixed = 50e-6;
  auto fix = [&](MeasuredKinds& kinds, double share) {
    for (int kind = 0; kind < 4; ++kind) {
      MeasuredLayer& layer = kinds.*kMeasuredKinds[kind];
      for (size_t k = 0; k < layer.at.size(); ++k) {
        LayerSample& s = layer.at[k];
        const double f =
            share * (kFixed + kPerSequence[kind] * static_cast<double>(table.sequences[k]));
        s.forward_s = f;
        s.infer_s = f;
        s.input_s = kind == 2 ? 1.3 * f : f;  // selective recomputes part of the forward
        s.weight_s = f;
        s.backward_s = s.input_s + s.weight_s;
      }
    }
  };
  fix(table, 1);
  for (auto& [tp, shard] : table.tp_shards) fix(shard, 0.7);
  table.optimizer_s = 2e-9;
  table.calibration.assign(table.sequences.size(), 1);
  // train --auto scales the capacity by its cores over the table's: the same on any machine.
  table.cores = AvailableCores();
  for (std::vector<double>& by_busy : table.capacity) {
    for (size_t k = 0; k < by_busy.size(); ++k) by_busy[k] = std::min<double>(k + 1, 2);
  }
  std::ifstream in(measured);
  const std::string describe = nlohmann::json::parse(in)["describe"].get<std::string>();
  std::ofstream(path) << LayerCostTableJson(table, describe).dump(2) << "\n";
}

// The line of `out` that starts with `prefix` ("" when none).
std::string LineOf(const std::string& out, const std::string& prefix) {
  const size_t line = out.find(prefix);
  return line == std::string::npos ? "" : out.substr(line, out.find('\n', line) - line);
}

// A cap below what the unlimited choice needs makes train --auto choose another layout, and
// the run stays under the cap (the counting allocator would stop it otherwise). The choices
// are planned from fixed costs (--costs): a choice made from timings is the machine's load's.
TEST(CliTest, TrainAutoChoosesALayoutThatRunsUnderTheMemoryCap) {
  const std::string dir = ScratchWithCorpus("auto-train");
  const std::string job = std::string("train --auto --world 4 --steps 2 --eval-every 0 ") +
                          "--sample-tokens 0" + kModel + " --data " + dir + "/corpus.txt";
  // Timing the layers itself, train --auto chooses some layout and runs it.
  Result r = Conveyor(job);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("auto: timing the model's layers here for 4 ranks"), std::string::npos)
      << r.out;
  EXPECT_NE(LineOf(r.out, "auto: dp x tp x pp "), "") << r.out;
  EXPECT_NE(r.out.find("done: 2 steps"), std::string::npos) << r.out;

  ASSERT_NO_FATAL_FAILURE(WriteFixedCosts(dir + "/costs.json"));
  const std::string fixed = job + " --costs " + dir + "/costs.json";
  r = Conveyor(fixed + " --metrics " + dir + "/free.json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("auto: from --costs " + dir + "/costs.json"), std::string::npos) << r.out;
  const std::string free_choice = LineOf(r.out, "auto: dp x tp x pp ");
  ASSERT_NE(free_choice, "") << r.out;
  EXPECT_NE(r.out.find("done: 2 steps"), std::string::npos) << r.out;

  // The need of the unlimited choice, as predicted; 0.6 of it as the cap.
  const size_t peak = r.out.find("peak ", r.out.find(free_choice));
  ASSERT_NE(peak, std::string::npos) << r.out;
  const double need_mib = std::stod(r.out.substr(peak + 5));
  const int64_t cap = static_cast<int64_t>(need_mib * (1 << 20) * 0.6);
  r = Conveyor(fixed + " --memory-per-rank " + std::to_string(cap) + " --metrics " + dir +
               "/capped.json");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::string capped_choice = LineOf(r.out, "auto: dp x tp x pp ");
  ASSERT_NE(capped_choice, "") << r.out;
  EXPECT_NE(capped_choice, free_choice) << r.out;
  EXPECT_NE(r.out.find("done: 2 steps"), std::string::npos) << r.out;
  // Every rank's tensors stayed under the cap (the allocator would have stopped the run).
  std::ifstream metrics(dir + "/capped.json");
  const nlohmann::json m = nlohmann::json::parse(metrics);
  ASSERT_FALSE(m["ranks"].empty());
  for (const auto& rank : m["ranks"]) {
    EXPECT_GT(rank["peak_tensor_bytes"].get<double>(), 0);
    EXPECT_LE(rank["peak_tensor_bytes"].get<double>(), static_cast<double>(cap));
  }

  r = Conveyor(fixed + " --memory-per-rank 10000");
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
      "train", "--steps",  "3", "--dp",        "2",         "--cp",       "1",     "--tp",
      "1",     "--ep",     "1", "--pp",        "2",         "--schedule", "zb-h1", "--microbatches",
      "4",     "--chunks", "0", "--recompute", "selective", "--zero",     "1",     "--stage-layers",
      "3,3"};
  EXPECT_EQ(args, expected);
  // The experts spread, the sequences split: said too.
  chosen.ep = 2, chosen.cp = 2, chosen.tp = 2, chosen.sequence_parallel = true;
  const std::vector<std::string> more = ArgsWithLayout({"train", "--auto"}, chosen);
  EXPECT_EQ(more.back(), "--sequence-parallel");
  EXPECT_EQ(more[4], "2");  // --cp
  EXPECT_EQ(more[8], "2");  // --ep
}

}  // namespace
}  // namespace conveyor
