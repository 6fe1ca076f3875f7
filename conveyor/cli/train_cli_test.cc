// End-to-end tests of the `conveyor` binary that train: as threads and on a mesh, generate
// from its checkpoints, bench train, and two simulated nodes (devices and precision:
// device_cli_test.cc).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "conveyor/cli/cli_testing.h"
#include "conveyor/device/torch_compat.h"

namespace conveyor {
namespace {

TEST(CliTest, TrainWritesMetricsAndACheckpointThatGenerateReads) {
  const std::string dir = ScratchDir("train");
  const std::string corpus = dir + "/corpus.txt";
  {
    std::ofstream out(corpus);
    for (int i = 0; i < 100; ++i) out << "a small corpus for a small model, line " << i << "\n";
  }
  const Result r = Conveyor(
      "train --pp 2 --schedule zb-v --layers 2 --hidden 16 --heads 2 "
      "--seq-len 16 --batch-size 4 --microbatches 2 --steps 3 --data " +
      corpus + " --metrics " + dir + "/m.json --checkpoint-dir " + dir +
      "/ckpt --sample-tokens 5 --eval-every 2 --trace " + dir + "/trace");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("done: 3 steps"), std::string::npos) << r.out;
  std::ifstream metrics_file(dir + "/m.json");
  const auto metrics = nlohmann::json::parse(metrics_file);
  ASSERT_EQ(metrics["steps"].size(), 3u);
  for (const char* key : {"step", "loss", "lr", "tokens_per_s"}) {
    EXPECT_TRUE(metrics["steps"][0].contains(key)) << key;
  }
  EXPECT_TRUE(metrics["final_loss"].is_number());
  ASSERT_EQ(metrics["ranks"].size(), 2u);
  for (const char* key :
       {"rank", "compute_s", "work_s", "comm_wait_s", "transfer_wait_s", "dependency_wait_s",
        "idle_s", "bubble_fraction", "comm_overlap", "sent_bytes", "peak_activation_bytes",
        "predicted_peak_activation_bytes"}) {
    EXPECT_TRUE(metrics["ranks"][1].contains(key)) << key;
  }
  // Each rank's start-up phase by phase (two processes: every phase but --resume's), summing
  // to its total, more than its time to the first step.
  for (const auto& rank : metrics["ranks"]) {
    const auto& startup = rank["startup"];
    double sum = 0;
    for (const char* phase :
         {"process_s", "rendezvous_s", "device_s", "data_s", "model_s", "first_step_s"}) {
      ASSERT_TRUE(startup.contains(phase)) << phase << " " << startup.dump();
      EXPECT_GT(startup[phase].get<double>(), 0) << phase << " " << startup.dump();
      sum += startup[phase].get<double>();
    }
    EXPECT_EQ(startup["resume_s"].get<double>(), 0) << startup.dump();
    EXPECT_NEAR(startup["total_s"].get<double>(), sum, 1e-9);
    EXPECT_GT(startup["total_s"].get<double>(), rank["startup_s"].get<double>());
  }
  EXPECT_NE(r.out.find("start-up of rank "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rendezvous "), std::string::npos) << r.out;
  const std::string kernel = kHasFusedAdamW ? "fused" : "loop";  // auto on the CPU
  EXPECT_NE(r.out.find("AdamW " + kernel + " kernels"), std::string::npos) << r.out;
  EXPECT_EQ(metrics["adamw_kernel"], kernel);
  EXPECT_EQ(metrics["cache_weight_casts"], false);
  EXPECT_EQ(metrics["dtype"], "fp32");
  EXPECT_TRUE(metrics["measured_bubble_fraction"].is_number());
  EXPECT_TRUE(metrics["predicted_bubble_fraction"].is_number());
  EXPECT_GT(metrics["measured_pipeline_s"].get<double>(), 0);
  EXPECT_GT(metrics["predicted_pipeline_s"].get<double>(), 0);
  EXPECT_TRUE(metrics["transfer_wait_fraction"].is_number());
  std::ifstream trace_file(dir + "/trace/trace.json");
  const auto trace = nlohmann::json::parse(trace_file);
  // Both ranks' waits, phases and counters made it into the merged trace.
  std::set<std::string> categories, counters;
  for (const auto& event : trace["traceEvents"]) {
    if (event.contains("cat")) categories.insert(event["cat"].get<std::string>());
    if (event["ph"] == "C") counters.insert(event["name"].get<std::string>());
  }
  for (const char* cat : {"F", "I", "W", "post", "wait", "phase"}) {
    EXPECT_TRUE(categories.count(cat)) << cat;
  }
  EXPECT_EQ(counters, (std::set<std::string>{"activation bytes", "bytes sent"}));
  EXPECT_TRUE(std::ifstream(dir + "/trace/measured.svg").good());
  // Generation needs the checkpoint alone: the training corpus is gone.
  std::filesystem::remove(corpus);
  const Result g = Conveyor("generate --checkpoint " + dir + "/ckpt --prompt abc --tokens 4");
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_EQ(g.out.rfind("abc", 0), 0u) << g.out;
  // 2 blocks, an embedding and a head: 4 layers cannot fill 8 stages; refused before any
  // of the 8 processes starts.
  const Result wide = Conveyor("generate --checkpoint " + dir + "/ckpt --pp 8");
  EXPECT_EQ(wide.code, 1);
  EXPECT_NE(wide.err.find("cannot split 4 layers into 8 stages"), std::string::npos) << wide.err;
  EXPECT_EQ(wide.err.find("rank "), std::string::npos) << wide.err;
}

// A Llama from the command line (grouped-query attention, tied embeddings, tp 2 x pp 2):
// it trains, its checkpoint keeps its shape (a resume with other key-value heads is
// refused), and generate reads it without the corpus.
TEST(CliTest, LlamaTrainsResumesAndGenerates) {
  const std::string dir = ScratchWithCorpus("llama");
  const std::string job =
      "train --model llama --tp 2 --pp 2 --layers 2 --hidden 32 --heads 4 "
      "--rope-theta 500000 --tie-embeddings --seq-len 16 --batch-size 4 --microbatches 2 "
      "--eval-every 0 --sample-tokens 4 --data " +
      dir + "/corpus.txt ";
  const Result r = Conveyor(job + "--kv-heads 2 --steps 2 --checkpoint-dir " + dir + "/ckpt");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("llama: 2 layers, hidden 32, 4 heads (2 key-value), MLP 88"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("done: 2 steps"), std::string::npos) << r.out;
  const Result resumed = Conveyor(job + "--kv-heads 2 --steps 3 --resume " + dir + "/ckpt");
  EXPECT_EQ(resumed.code, 0) << resumed.err;
  const Result other = Conveyor(job + "--kv-heads 4 --steps 3 --resume " + dir + "/ckpt");
  EXPECT_NE(other.code, 0);
  EXPECT_NE(other.err.find("kv_heads"), std::string::npos) << other.err;
  const Result bad = Conveyor(job + "--kv-heads 3 --steps 1");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("kv-heads (3) must divide heads (4)"), std::string::npos) << bad.err;
  std::filesystem::remove(dir + "/corpus.txt");
  const Result g = Conveyor("generate --checkpoint " + dir + "/ckpt --prompt ab --tokens 3");
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_EQ(g.out.rfind("ab", 0), 0u) << g.out;
  // Exported as a Hugging Face folder, it is a model to start from.
  const Result e = Conveyor("export --checkpoint " + dir + "/ckpt --out " + dir +
                            "/hf --dtype bf16 --shard-size 20kB");
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_NE(e.out.find("as bf16"), std::string::npos) << e.out;
  EXPECT_TRUE(std::filesystem::exists(dir + "/hf/model.safetensors.index.json"));
  const Result again = Conveyor("export --checkpoint " + dir + "/ckpt --out " + dir + "/hf");
  EXPECT_EQ(again.code, 1);
  EXPECT_NE(again.err.find("not an empty folder"), std::string::npos) << again.err;
  const std::string data = ScratchWithCorpus("llama_from_hf");
  const Result from = Conveyor("train --model " + dir +
                               "/hf --seq-len 16 --batch-size 4 --microbatches 2 --steps 1 "
                               "--eval-every 0 "
                               "--sample-tokens 0 --data " +
                               data + "/corpus.txt");
  EXPECT_EQ(from.code, 0) << from.err;
  EXPECT_NE(from.out.find("llama from " + dir + "/hf"), std::string::npos) << from.out;
}

// --rank-threads: the same job as threads of one process over the in-process transport has
// the losses of the processes over Gloo, and its checkpoint is read like theirs.
TEST(CliTest, RankThreadsTrainLikeRankProcesses) {
  const std::string dir = ScratchWithCorpus("threads");
  const std::string job =
      "train --dp 2 --pp 2 --schedule zb-h1 --layers 2 --hidden 16 --heads 2 --seq-len 16 "
      "--batch-size 8 --microbatches 2 --steps 3 --eval-every 0 --sample-tokens 0 --data " +
      dir + "/corpus.txt ";
  const Result processes = Conveyor(job + "--metrics " + dir + "/p.json");
  ASSERT_EQ(processes.code, 0) << processes.err;
  const Result threads = Conveyor(job + "--rank-threads --metrics " + dir +
                                  "/t.json --checkpoint-dir " + dir + "/ckpt");
  ASSERT_EQ(threads.code, 0) << threads.out << threads.err;
  EXPECT_NE(threads.out.find("mesh: dp 2 x tp 1 x pp 2"), std::string::npos) << threads.out;
  EXPECT_TRUE(SameLosses(dir + "/p.json", dir + "/t.json", 3, 1e-5));
  const Result g = Conveyor("generate --checkpoint " + dir + "/ckpt --prompt ab --tokens 3");
  EXPECT_EQ(g.code, 0) << g.err;
  // Under a launcher every process is one rank: threads are refused, naming why.
  const Result launched =
      Shell("RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 " +
            std::string("timeout 60 ") + CONVEYOR_BINARY + " " + job + "--rank-threads");
  EXPECT_NE(launched.code, 0);
  EXPECT_NE(launched.err.find("--rank-threads runs every rank in this process"), std::string::npos)
      << launched.err;
}

// --dp-bucket sets how many gradient bytes the data-parallel reducer sums at once: smaller
// buckets, more of them, the same sums (the same losses).
TEST(CliTest, DataParallelBucketsAreASetting) {
  const std::string dir = ScratchWithCorpus("dp-bucket");
  const std::string job =
      "train --dp 2 --pp 1 --layers 2 --hidden 32 --heads 2 --seq-len 16 --batch-size 8 "
      "--microbatches 2 --steps 3 --eval-every 0 --sample-tokens 0 --data " +
      dir + "/corpus.txt --metrics " + dir;
  const Result whole = Conveyor(job + "/whole.json");
  ASSERT_EQ(whole.code, 0) << whole.err;
  EXPECT_NE(whole.out.find("of gradients in 1.0 buckets"), std::string::npos) << whole.out;
  const Result small = Conveyor(job + "/small.json --dp-bucket 16KiB");
  ASSERT_EQ(small.code, 0) << small.err;
  EXPECT_EQ(small.out.find("of gradients in 1.0 buckets"), std::string::npos) << small.out;
  EXPECT_NE(small.out.find(" buckets, reduced in "), std::string::npos) << small.out;
  EXPECT_TRUE(SameLosses(dir + "/whole.json", dir + "/small.json", 3, 1e-6));
}

// The 3D mesh across real processes over Gloo: dp 2 x tp 2 x pp 2 (8 processes) trains
// with the per-step losses of the plain 2-rank pipeline, checkpoints whole tensors that a
// 1-rank run resumes from, and reports its data-parallel reduction.
TEST(CliTest, MeshOfEightProcessesTrainsLikeThePipeline) {
  const std::string dir = ScratchWithCorpus("mesh");
  const std::string common =
      "train --layers 2 --hidden 16 --heads 2 --seq-len 16 --batch-size 8 --microbatches 2 "
      "--steps 3 --eval-every 0 --sample-tokens 0 --tie-embeddings --data " +
      dir + "/corpus.txt ";
  const Result pipeline = Conveyor(common + "--pp 2 --schedule 1f1b --metrics " + dir + "/p.json");
  ASSERT_EQ(pipeline.code, 0) << pipeline.err;
  const Result mesh = Conveyor(common + "--dp 2 --tp 2 --pp 2 --schedule zb-h1 --metrics " + dir +
                               "/m.json --checkpoint-dir " + dir + "/ckpt");
  ASSERT_EQ(mesh.code, 0) << mesh.out << mesh.err;
  EXPECT_NE(mesh.out.find("mesh: dp 2 x tp 2 x pp 2 (8 ranks, order tp-dp-pp)"), std::string::npos)
      << mesh.out;
  EXPECT_NE(mesh.out.find("mesh dp 2 x tp 2 x pp 2"), std::string::npos) << mesh.out;
  EXPECT_NE(mesh.out.find("data parallel: per step"), std::string::npos) << mesh.out;
  EXPECT_EQ(mesh.out.find("nan"), std::string::npos) << mesh.out;  // no held-out data is said
  // The mesh table: one row per rank with its coordinates (rank 7 is dp 1, tp 1, pp 1).
  EXPECT_NE(mesh.out.find("\n   7   1   1   1 "), std::string::npos) << mesh.out;
  EXPECT_TRUE(SameLosses(dir + "/p.json", dir + "/m.json", 3, 1e-5));
  std::ifstream metrics_file(dir + "/m.json");
  const auto metrics = nlohmann::json::parse(metrics_file);
  EXPECT_TRUE(metrics["dp_hidden_fraction"].is_number());
  EXPECT_TRUE(metrics["steps"][0]["dp_comm_s"].is_number());
  // Replica 0's pipeline wrote one file per pipeline rank, whole tensors: pp = 1 reads them.
  const Result g = Conveyor("generate --checkpoint " + dir + "/ckpt --prompt ab --tokens 3");
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_EQ(g.out.rfind("ab", 0), 0u) << g.out;
  // Refused before any of the ranks starts, naming the numbers.
  const Result heads = Conveyor(common + "--tp 3");
  EXPECT_EQ(heads.code, 1);
  EXPECT_NE(heads.err.find("heads (2) must divide by tp (3)"), std::string::npos) << heads.err;
  EXPECT_EQ(heads.err.find("conveyor: rank"), std::string::npos) << heads.err;
  const Result small = Conveyor(common + "--dp 5 --pp 2");
  EXPECT_EQ(small.code, 1);
  EXPECT_NE(small.err.find("batch-size (8) must be at least dp x microbatches (5 x 2)"),
            std::string::npos)
      << small.err;
}

// A Mixture-of-Experts Llama across real processes: dp 2 x ep 2 x pp 2 (8 processes, the
// tokens travelling to their experts by Gloo's all-to-all) trains with one process's losses,
// says its expert load, and checkpoints every expert, which one process resumes and
// generate reads.
TEST(CliTest, MixtureOfExpertsOverProcessesTrainsLikeOneProcess) {
  const std::string dir = ScratchWithCorpus("moe");
  const std::string common =
      "train --model llama --layers 2 --hidden 16 --heads 2 --seq-len 16 --batch-size 8 "
      "--experts 4 --top-k 2 --expert-units 16 --router-aux-loss-coef 0.01 "
      "--router-bias-rate 0.01 --eval-every 0 --sample-tokens 0 --data " +
      dir + "/corpus.txt ";
  // Micro-batches of 2 samples in both: the auxiliary loss is a micro-batch's.
  const Result one = Conveyor(common + "--steps 3 --microbatches 4 --metrics " + dir + "/one.json");
  ASSERT_EQ(one.code, 0) << one.err;
  const Result mesh = Conveyor(common +
                               "--steps 3 --microbatches 2 --dp 2 --ep 2 --pp 2 "
                               "--schedule 1f1b --metrics " +
                               dir + "/mesh.json --checkpoint-dir " + dir + "/ckpt");
  ASSERT_EQ(mesh.code, 0) << mesh.out << mesh.err;
  EXPECT_NE(mesh.out.find("expert load"), std::string::npos) << mesh.out;
  EXPECT_TRUE(SameLosses(dir + "/one.json", dir + "/mesh.json", 3, 1e-5));
  const Result resumed = Conveyor(common + "--steps 4 --microbatches 4 --resume " + dir + "/ckpt");
  EXPECT_EQ(resumed.code, 0) << resumed.err;
  const Result g = Conveyor("generate --checkpoint " + dir + "/ckpt --prompt ab --tokens 3");
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_EQ(g.out.rfind("ab", 0), 0u) << g.out;
  // Its selection biases have no place in a Hugging Face folder: refused. Without them and
  // with Qwen-style names no layout holds it either, and the refusal says how to train one
  // that exports: Mixtral's names, experts as wide as the MLP.
  const Result biased = Conveyor("export --checkpoint " + dir + "/ckpt --out " + dir + "/none");
  EXPECT_EQ(biased.code, 1);
  EXPECT_NE(biased.err.find("--router-bias-rate"), std::string::npos) << biased.err;
  const std::string plain =
      "train --model llama --layers 2 --hidden 16 --heads 2 --seq-len 16 --batch-size 8 "
      "--experts 4 --top-k 2 --expert-units 16 --eval-every 0 --sample-tokens 0 --steps 1 "
      "--microbatches 4 --data " +
      dir + "/corpus.txt --checkpoint-dir " + dir;
  ASSERT_EQ(Conveyor(plain + "/plain").code, 0);
  const Result none = Conveyor("export --checkpoint " + dir + "/plain --out " + dir + "/none");
  EXPECT_EQ(none.code, 1);
  EXPECT_NE(none.err.find("--mixtral-names"), std::string::npos) << none.err;
  const Result mixtral = Conveyor(plain + "/mixtral --intermediate 16 --mixtral-names");
  ASSERT_EQ(mixtral.code, 0) << mixtral.err;
  const Result exported =
      Conveyor("export --checkpoint " + dir + "/mixtral --out " + dir + "/mixtral_hf");
  ASSERT_EQ(exported.code, 0) << exported.err;
  std::ifstream config(dir + "/mixtral_hf/config.json");
  EXPECT_EQ(nlohmann::json::parse(config)["model_type"], "mixtral");
}

TEST(CliTest, BenchTrainRunsEachScheduleAndOneProcess) {
  const std::string dir = ScratchDir("bench");
  {
    std::ofstream out(dir + "/run.toml");
    out << "layers = 2\nhidden = 16\nheads = 2\nseq_len = 16\nbatch_size = 4\n"
           "microbatches = 2\npp = 2\nsteps = 500\n";
    std::ofstream corpus(dir + "/corpus.txt");
    for (int i = 0; i < 100; ++i) corpus << "a small corpus for a small model, line " << i << "\n";
  }
  const Result r = Conveyor("bench train " + dir + "/run.toml --data " + dir +
                            "/corpus.txt --steps 2 --schedules 1f1b,dualpipe --format json");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const auto rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), 3u) << r.out;
  EXPECT_EQ(rows[0]["schedule"], "1f1b");
  for (const char* key :
       {"step_s", "tokens_per_s", "measured_bubble_fraction", "predicted_bubble_fraction",
        "transfer_wait_fraction", "peak_activation_bytes", "predicted_peak_activation_bytes"}) {
    EXPECT_TRUE(rows[0][key].is_number()) << key;
  }
  EXPECT_EQ(rows[0]["ranks"].size(), 2u);
  // DualPipe needs an even number of micro-batches >= 2: 2 is fine, so it ran too.
  EXPECT_FALSE(rows[1].contains("skipped")) << rows[1];
  EXPECT_EQ(rows[2]["schedule"], "single process");
  EXPECT_EQ(rows[2]["pp"], 1);
  EXPECT_GT(rows[2]["tokens_per_s"].get<double>(), 0);
}

// generate on a mesh of real processes (4 each: replica 0 samples, replica 1 receives; TP
// ranks load their shards of the global checkpoint) prints what one process prints, once.
TEST(CliTest, GenerateOnAMeshPrintsWhatOneProcessPrints) {
  const std::string dir = ScratchWithCorpus("gen");
  const Result t = Conveyor(
      "train --pp 2 --layers 2 --hidden 16 --heads 2 --seq-len 16 --batch-size 4 "
      "--microbatches 2 --steps 2 --eval-every 0 --sample-tokens 0 --data " +
      dir + "/corpus.txt --checkpoint-dir " + dir + "/ckpt");
  ASSERT_EQ(t.code, 0) << t.out << t.err;
  const std::string generate = "generate --checkpoint " + dir + "/ckpt --prompt ab --tokens 8 ";
  const Result one = Conveyor(generate + "--pp 1");
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_EQ(Lines(one.out), 1) << one.out;
  EXPECT_EQ(one.out.rfind("ab", 0), 0u) << one.out;
  for (const char* mesh : {"--dp 2 --tp 2 --pp 1", "--dp 2 --pp 2 --mesh-order pp-dp-tp"}) {
    const Result r = Conveyor(generate + mesh);
    ASSERT_EQ(r.code, 0) << mesh << ": " << r.err;
    EXPECT_EQ(r.out, one.out) << mesh;
  }
}

TEST(CliTest, BenchTrainRunsOnAMesh) {
  const std::string dir = ScratchDir("bench_mesh");
  {
    std::ofstream corpus(dir + "/corpus.txt");
    for (int i = 0; i < 100; ++i) corpus << "a small corpus for a small model, line " << i << "\n";
  }
  const Result r = Conveyor(
      "bench train --dp 2 --pp 2 --layers 2 --hidden 16 --heads 2 --seq-len 16 --batch-size 4 "
      "--microbatches 2 --steps 2 --schedules 1f1b --data " +
      dir + "/corpus.txt --format json");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const auto rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), 2u) << r.out;
  EXPECT_EQ(rows[0]["schedule"], "1f1b");
  EXPECT_EQ(rows[0]["dp"], 2);
  EXPECT_EQ(rows[0]["tp"], 1);
  EXPECT_EQ(rows[0]["pp"], 2);
  EXPECT_EQ(rows[0]["ranks"].size(), 4u);
  EXPECT_GT(rows[0]["tokens_per_s"].get<double>(), 0);
  EXPECT_EQ(rows[1]["schedule"], "single process");
  EXPECT_EQ(rows[1]["dp"], 1);
  EXPECT_EQ(rows[1]["threads"].get<int>() % 4, 0) << "the threads of the mesh's 4 ranks";
}

// Two simulated nodes (bench/nodes --test: network namespaces joined by a rate-limited veth,
// 2 ranks each, GPT dp 1 x tp 2 x pp 2 with TP inside and across the nodes): both layouts
// train with the same losses, and the namespaces are gone afterwards. Skipped where
// namespaces cannot be made (not root, a container without them).
TEST(CliTest, TwoNodesInNetworkNamespacesTrainAlikeAndCleanUp) {
  // Those of other runs (a test process beside this one, or one killed outright) are not
  // this run's to remove.
  const std::string before = Shell("ip netns list 2>/dev/null").out;
  const Result r = Shell(std::string("timeout 280 ") + CONVEYOR_SOURCE_DIR +
                         "/bench/nodes --test --conveyor " + CONVEYOR_BINARY);
  if (r.code == 77) GTEST_SKIP() << r.err;
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("\"losses_equal\": true"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("nodes: OK"), std::string::npos) << r.err;
  std::istringstream after(Shell("ip netns list").out);
  for (std::string line; std::getline(after, line);) {
    const std::string name = line.substr(0, line.find(' '));
    EXPECT_TRUE(name.rfind("cvnode-", 0) != 0 || before.find(name + " ") != std::string::npos)
        << "left behind: " << line;
  }
}

// A --resume that would not continue its run is refused before any rank starts, naming
// both values; --resume-with-changes when it is meant.
TEST(CliTest, AResumeThatChangesTheRunIsRefused) {
  const std::string dir = ScratchWithCorpus("resume_changes");
  const std::string job =
      "train --layers 2 --hidden 16 --heads 2 --seq-len 16 "
      "--microbatches 2 --pp 1 --eval-every 0 --sample-tokens 0 --data " +
      dir + "/corpus.txt ";
  ASSERT_EQ(Conveyor(job + "--batch-size 4 --steps 3 --checkpoint-dir " + dir + "/ckpt").code, 0);
  const std::string resume = job + "--resume " + dir + "/ckpt ";
  const Result done = Conveyor(resume + "--batch-size 4 --steps 3");
  EXPECT_EQ(done.code, 1);
  EXPECT_NE(done.err.find("--steps 3 is not past the checkpoint's step 3"), std::string::npos)
      << done.err;
  const Result seed = Conveyor(resume + "--steps 5 --seed 7 --batch-size 8");
  EXPECT_EQ(seed.code, 1);
  EXPECT_NE(seed.err.find("--seed 7 (the checkpoint's run: 1234), --batch-size 8 (the "
                          "checkpoint's run: 4)"),
            std::string::npos)
      << seed.err;
  EXPECT_NE(seed.err.find("--resume-with-changes"), std::string::npos) << seed.err;
  const Result meant = Conveyor(resume + "--batch-size 4 --steps 5 --seed 7 --resume-with-changes");
  EXPECT_EQ(meant.code, 0) << meant.err;
  EXPECT_EQ(Conveyor(resume + "--batch-size 4 --steps 5").code, 0);
}

// Settings that would be silently wrong: oversubscribed threads, ZeRO without replicas;
// TOML values named by file and key; the version.
TEST(CliTest, SettingsThatDoNothingOrHurtAreSaid) {
  const std::string dir = ScratchWithCorpus("said");
  const std::string job =
      "train --layers 2 --hidden 16 --heads 2 --seq-len 16 --batch-size 4 "
      "--microbatches 2 --steps 1 --eval-every 0 --sample-tokens 0 --data " +
      dir + "/corpus.txt ";
  const Result threads = Conveyor(job + "--pp 2 --threads 1000");
  EXPECT_EQ(threads.code, 1);
  EXPECT_NE(threads.err.find("--threads 1000 x 2 local ranks = 2000 threads"), std::string::npos)
      << threads.err;
  const Result zero = Conveyor(job + "--pp 1 --dp 1 --zero 1");
  EXPECT_EQ(zero.code, 0) << zero.err;
  EXPECT_NE(zero.err.find("--zero 1 with --dp 1 shards nothing"), std::string::npos) << zero.err;
  std::ofstream(dir + "/bad.toml") << "mesh_order = \"tp-tp-pp\"\n";
  const Result order = Conveyor("train " + dir + "/bad.toml");
  EXPECT_EQ(order.code, 1);
  EXPECT_NE(order.err.find(dir + "/bad.toml: mesh_order: "), std::string::npos) << order.err;
  std::ofstream(dir + "/scale.toml") << "loss_scale = 0.5\n";
  const Result scale = Conveyor("train " + dir + "/scale.toml");
  EXPECT_EQ(scale.code, 1);
  EXPECT_NE(scale.err.find(dir + "/scale.toml: loss_scale must be 0"), std::string::npos)
      << scale.err;
  const Result version = Conveyor("--version");
  EXPECT_EQ(version.code, 0);
  EXPECT_EQ(version.out.rfind("0.", 0), 0u) << version.out;
}

// A memory cap that stops a run outside an action names what the rank was doing instead:
// building a stage's layers (before the first step), or the optimizer's update, whose first
// call creates AdamW's state (no micro-batch or action runs there).
TEST(CliTest, AMemoryCapOutsideTheActionsNamesTheRankStageAndWork) {
  const std::string dir = ScratchWithCorpus("memory_outside");
  const std::string job = "train --pp 2 --steps 2 --eval-every 0 --sample-tokens 0 --data " + dir +
                          "/corpus.txt --memory-per-rank ";
  const Result build = Conveyor(job + "300KB");
  EXPECT_EQ(build.code, 1) << build.out;
  EXPECT_TRUE(std::regex_search(
      build.err,
      std::regex("conveyor: rank [01], stage [01], building its layers: memory limit: [0-9]+ "
                 "bytes more would make 0\\.[0-9] MiB, over --memory-per-rank 0\\.3 MiB before "
                 "the first step \\(300000 bytes\\)\n")))
      << build.err;
  const Result update = Conveyor(job + "1500KB --batch-size 2 --microbatches 2 --seq-len 8");
  EXPECT_EQ(update.code, 1) << update.out;
  EXPECT_TRUE(std::regex_search(
      update.err,
      std::regex("conveyor: rank [01], stage [01], the optimizer's update: memory limit: [0-9]+ "
                 "bytes more would make 1\\.[0-9] MiB, over --memory-per-rank 1\\.4 MiB at "
                 "step 1 \\(1500000 bytes\\)\n")))
      << update.err;
}

}  // namespace
}  // namespace conveyor
