// End-to-end tests of the `conveyor` binary: plan, load and compare with their output
// formats, and bad input giving one clear line and a non-zero exit. Training, generation and
// the benchmarks that train: train_cli_test.cc.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "conveyor/cli/cli_testing.h"
#include "conveyor/schedule/registry.h"

namespace conveyor {
namespace {

TEST(CliTest, PlanJsonHasTheClosedFormOf1F1B) {
  const Result r = Conveyor("plan --schedule 1f1b --pp 4 --microbatches 8 --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_DOUBLE_EQ(json["makespan"].get<double>(), (8 + 4 - 1) * 3);
  EXPECT_NEAR(json["bubble_fraction"].get<double>(), 1 - 8.0 * 3 / 33, 1e-12);
  EXPECT_EQ(json["peak_activations"], nlohmann::json({4, 3, 2, 1}));
  EXPECT_EQ(json["p2p_messages"].get<int>(), 2 * 3 * 8);
}

TEST(CliTest, PlanTextShowsSummaryAndTimeline) {
  const Result r = Conveyor("plan --schedule gpipe --pp 2 --microbatches 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("makespan            9"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 1"), std::string::npos) << r.out;
}

TEST(CliTest, CsvRoundTripsThroughLoad) {
  const std::string path = ScratchDir("zbv") + "/zbv.csv";  // removed at exit
  Result r = Conveyor("plan --schedule zb-v --pp 4 --microbatches 8 --format csv --out " + path);
  ASSERT_EQ(r.code, 0) << r.err;
  const Result built = Conveyor("plan --schedule zb-v --pp 4 --microbatches 8 --format json");
  const Result loaded = Conveyor("plan --load " + path + " --format json");
  ASSERT_EQ(loaded.code, 0) << loaded.err;
  EXPECT_EQ(nlohmann::json::parse(built.out)["makespan"],
            nlohmann::json::parse(loaded.out)["makespan"]);
}

TEST(CliTest, LoadsPyTorchDualPipeV) {
  const std::string path =
      std::string(CONVEYOR_TESTDATA_DIR) + "/pytorch-schedules/dualpipev_4rank_10mb.csv";
  const Result r = Conveyor("plan --load " + path + " --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(r.out)["makespan"].get<double>(), 63);
}

TEST(CliTest, SvgAndChromeFormats) {
  const Result svg =
      Conveyor("plan --schedule interleaved-1f1b --pp 4 --microbatches 8 --format svg");
  ASSERT_EQ(svg.code, 0) << svg.err;
  EXPECT_NE(svg.out.find("<svg"), std::string::npos);
  EXPECT_NE(svg.out.find("</svg>"), std::string::npos);
  const Result chrome = Conveyor("plan --schedule 1f1b --format chrome");
  ASSERT_EQ(chrome.code, 0) << chrome.err;
  nlohmann::json trace;
  ASSERT_NO_THROW(trace = nlohmann::json::parse(chrome.out)) << chrome.out.substr(0, 200);
  EXPECT_TRUE(trace.contains("traceEvents")) << chrome.out.substr(0, 200);
}

TEST(CliTest, CompareHasOneRowPerSchedule) {
  const Result r = Conveyor("compare --pp 4 --microbatches 8 --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), AllSchedules().size());
  for (const auto& row : rows) {
    EXPECT_TRUE(row.contains("makespan")) << row.dump();
  }
  const Result text = Conveyor("compare --pp 4 --microbatches 8");
  ASSERT_EQ(text.code, 0) << text.err;
  for (const ScheduleInfo& info : AllSchedules()) {
    EXPECT_NE(text.out.find(std::string(info.name) + " "), std::string::npos) << info.name;
  }
}

// Issue 10: outputs that cannot be written were found after the whole run, bad corpora
// inside the ranks. Both are found by the launcher now, before any rank starts.
TEST(CliTest, BadFilesAreFoundBeforeAnyRankStarts) {
  const std::string dir = ScratchDir("files");
  std::filesystem::create_directories(dir + "/two");
  for (const std::string name : {"/corpus.txt", "/two/a.txt", "/two/b.txt"}) {
    std::ofstream out(dir + name);
    for (int i = 0; i < 100; ++i) out << "a small corpus for a small model, line " << i << "\n";
  }
  std::ofstream(dir + "/short.txt") << "too short\n";
  std::ofstream(dir + "/empty.txt") << "";
  const std::string small =
      "train --pp 2 --layers 2 --hidden 16 --heads 2 --seq-len 16 "
      "--batch-size 4 --microbatches 2 --steps 2 ";
  const std::pair<std::string, std::string> cases[] = {
      {small + "--data " + dir + "/corpus.txt --metrics /nonexistent/dir/m.json",
       "--metrics '/nonexistent/dir/m.json': the folder '/nonexistent/dir' does not exist"},
      {small + "--data " + dir + "/corpus.txt --metrics " + dir, "is a folder"},
      {small + "--data " + dir + "/corpus.txt --checkpoint-dir /proc/nope",
       "--checkpoint-dir '/proc/nope': cannot create files in '/proc'"},
      {small + "--data " + dir + "/empty.txt", dir + "/empty.txt"},
      {small + "--data " + dir + "/short.txt", "fewer than seq_len + 1 = 17"},
      {small + "--data " + dir + "/two --model classifier --classes 3",
       "num_classes 3 exceeds the 2 categories"},
  };
  for (const auto& [args, needle] : cases) {
    const Result r = Conveyor(args);
    EXPECT_EQ(r.code, 1) << args;
    EXPECT_EQ(Lines(r.err), 1) << args << ":\n" << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << ":\n" << r.err;
    EXPECT_EQ(r.err.find("rank "), std::string::npos) << "found inside a rank: " << r.err;
  }
}

// Issue 10: a one-cell typo made `plan --load` infer a million micro-batches and simulate
// them for minutes.
TEST(CliTest, LoadRefusesATypoedMicroBatch) {
  const std::string path = ScratchDir("typo") + "/typo.csv";  // removed at exit
  Result r = Conveyor("plan --schedule 1f1b --pp 2 --microbatches 4 --format csv --out " + path);
  ASSERT_EQ(r.code, 0) << r.err;
  std::string csv;
  {
    std::ifstream in(path);
    csv.assign(std::istreambuf_iterator<char>(in), {});
  }
  csv.replace(csv.find("1F1"), 3, "1F1000001");
  std::ofstream(path) << csv;
  r = Conveyor("plan --load " + path);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("1F1000001"), std::string::npos) << r.err;
}

TEST(CliTest, BenchOverheadMeasuresTracingToo) {
  const Result r = Conveyor("bench overhead --pp 1 --schedules 1f1b --steps 3 --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_GT(rows[0]["us_per_action"].get<double>(), 0);
  EXPECT_GT(rows[0]["traced_us_per_action"].get<double>(), 0);
}

TEST(CliTest, BenchHopMeasuresEachSize) {
  const Result r = Conveyor("bench hop --pp 2 --round-trips 3 --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2]["bytes"].get<int64_t>(), 256 << 10);
  for (const auto& row : rows) {
    EXPECT_EQ(row["ranks"].get<int>(), 2);
    EXPECT_GT(row["hop_us"].get<double>(), 0);
  }
}

// --format json: stdout holds the JSON and nothing else (status and progress lines go to
// stderr), for every command that writes JSON, so `| python3 -m json.tool` works.
TEST(CliTest, FormatJsonWritesJsonAloneOnStdout) {
  const std::string dir = ScratchWithCorpus("json");
  const std::string commands[] = {
      "plan -s 1f1b -p 2 -m 4",
      "compare -p 2 -m 4",
      "bench fidelity -p 2 -m 2 --f 0.001 --i 0.001 --w 0.001 --steps 1 --schedules 1f1b",
      "bench overhead --pp 1 --schedules 1f1b --steps 2",
      "bench hop --pp 2 --round-trips 2",
      "bench train --pp 2 --layers 2 --hidden 16 --heads 2 --seq-len 16 --batch-size 4 "
      "--microbatches 2 --steps 2 --schedules 1f1b --no-single --data " +
          dir + "/corpus.txt",
  };
  for (const std::string& command : commands) {
    const Result r = Conveyor(command + " --format json");
    ASSERT_EQ(r.code, 0) << command << ": " << r.err;
    EXPECT_NO_THROW(nlohmann::json::parse(r.out)) << command << " wrote: " << r.out.substr(0, 300);
  }
}

TEST(CliTest, BadInputGivesOneClearLineAndFails) {
  const std::pair<const char*, const char*> cases[] = {
      {"plan --pp 0", "0"},
      {"plan --microbatches 0", "0"},
      {"plan --schedule nope", "unknown schedule 'nope'"},
      {"plan --pp abc", "abc"},
      {"plan --format pdf", "pdf"},
      {"plan --schedule 1f1b --chunks 3", "--chunks 3"},
      {"plan --load /nonexistent/x.csv", "/nonexistent/x.csv"},
      {"plan --f -1", "--f must be within [0, 1e+15], got -1"},
      {"compare --pp 0", "--pp"},
      {"frobnicate", "frobnicate"},
      {"", "subcommand"},
      {"train --heads 3", "multiple of heads (3)"},
      {"train --batch-size 2", "batch-size (2) must be at least microbatches (8)"},
      {"train --schedule zb-v --layers 1", "cannot split 3 layers into 8 stages"},
      {"train --data /nonexistent/corpus", "/nonexistent/corpus"},
      {"generate --checkpoint /nonexistent", "/nonexistent"},
      {"bench train --schedules nope", "unknown schedule 'nope'"},
      {"bench train --heads 3", "multiple of heads (3)"},
      {"bench hop --pp 1", "--pp must be within [2, 64], got 1"},
      {"train --recompute some", "recompute must be none, full or selective"},
      {"train --model bert", "--model must be gpt, classifier or llama, got 'bert'"},
      {"bench train --partition size",
       "--partition must be params, flops, uniform or profile, got 'size'"},
      {"train --threads -2", "threads must be within [0, 1024]"},
  };
  for (const auto& [args, needle] : cases) {
    const Result r = Conveyor(args);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_EQ(Lines(r.err), 1) << args << ":\n" << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << ":\n" << r.err;
  }
}

// Issue 10: sizes nobody means ran for minutes, values that wrap or are not finite were
// accepted or failed deep inside; each is now one line naming the flag, value and range.
TEST(CliTest, NumbersOutOfRangeNameFlagValueAndRange) {
  const std::pair<const char*, const char*> cases[] = {
      {"plan -m 2147483647", "--microbatches must be within [1, 65536], got 2147483647"},
      {"plan -p 100000", "--pp must be within [1, 4096], got 100000"},
      {"plan -p 1024 -m 1024", "above the limit of 262144"},
      {"plan -p 4294967298", "--pp must be within [1, 4096], got 4294967298"},
      {"plan --chunks 65", "--chunks must be within [0, 64], got 65"},
      {"compare -m 1000000", "--microbatches must be within [1, 65536], got 1000000"},
      {"plan --b -2", "--b must be within [0, 1e+15], got -2"},
      {"plan --overlap -1", "--overlap must be within [0, 1e+15], got -1"},
      {"plan --f inf", "--f must be within [0, 1e+15], got inf"},
      {"plan --max-in-flight -1", "--max-in-flight must be within [0, 4194304], got -1"},
      {"plan --width -3", "--width must be within [0, 10000], got -3"},
      {"bench fidelity --timeout 0", "--timeout must be within [1, 604800], got 0"},
      {"bench fidelity --timeout -1", "--timeout must be within [1, 604800], got -1"},
      {"bench fidelity --f nan", "--f must be within [0, 60], got nan"},
      {"bench fidelity --steps 0", "--steps must be within [1, 10000], got 0"},
      {"bench fidelity -p 4096", "--pp 4096 would start 4096 local processes"},
      {"bench overhead -m 1000000", "--microbatches must be within [1, 65536], got 1000000"},
      {"bench hop --pp 4294967298", "--pp must be within [2, 64], got 4294967298"},
      {"train --microbatches 1000000 --batch-size 1000000",
       "--microbatches must be within [1, 65536], got 1000000"},
      {"train --layers 4294967298", "--layers must be within [1, 4096], got 4294967298"},
      {"train --pp 4294967298", "--pp must be within [1, 4096], got 4294967298"},
      {"train --seed -1", "--seed must be within [0, 9223372036854775807], got -1"},
      {"train --lr inf", "--lr must be within (0, 10], got inf"},
      {"train --lr 0", "--lr must be within (0, 10], got 0"},
      {"train --weight-decay nan", "--weight-decay must be within [0, 10], got nan"},
      {"train --clip -1", "--clip must be within [0, 1e+09], got -1"},
      {"train --min-lr-ratio 2", "--min-lr-ratio must be within [0, 1], got 2"},
      {"train --timeout -1", "--timeout must be within [1, 604800], got -1"},
      {"train --seq-len 1", "--seq-len must be within [2, 65536], got 1"},
      {"train --steps 0", "--steps must be within [1, 1000000000000], got 0"},
      {"train --pp 4096", "--pp 4096 would start 4096 local processes"},
      {"bench train --layers 0", "--layers must be within [1, 4096], got 0"},
      {"generate --checkpoint /nonexistent --temperature nan",
       "--temperature must be 0 (greedy) or within [0.001, 100], got nan"},
      {"generate --checkpoint /nonexistent --temperature -1",
       "--temperature must be 0 (greedy) or within [0.001, 100], got -1"},
      {"generate --checkpoint /nonexistent --tokens -1",
       "--tokens must be within [0, 1048576], got -1"},
  };
  for (const auto& [args, needle] : cases) {
    const Result r = Conveyor(args);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_EQ(Lines(r.err), 1) << args << ":\n" << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << ":\n" << r.err;
  }
}

// The 3D mesh: dp 2 x tp 2 x pp 2 on nodes of 4 (docs/SCHEDULES.md, "Planning a 3D mesh").
TEST(CliTest, PlanPrintsTheMeshWithRanksNodesAndGroups) {
  const std::string mesh = "plan -s 1f1b --dp 2 --tp 2 --pp 2 -m 4 --gpus-per-node 4";
  const Result text = Conveyor(mesh);
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("mesh                dp 2 x tp 2 x pp 2 (8 ranks, order tp-dp-pp), 2 "
                          "nodes of 4 ranks"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("     5   0   1   1     1  1\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("  TP groups   {0,1} {2,3} {4,5} {6,7}\n"), std::string::npos);
  EXPECT_NE(text.out.find("  DP groups   {0,2} {1,3} {4,6} {5,7}\n"), std::string::npos);
  EXPECT_NE(text.out.find("  PP groups   {0,4} {1,5} {2,6} {3,7}\n"), std::string::npos);
  EXPECT_EQ(text.out.find("warning:"), std::string::npos) << text.out;

  const Result json = Conveyor(mesh + " --format json");
  ASSERT_EQ(json.code, 0) << json.err;
  const auto m = nlohmann::json::parse(json.out)["mesh"];
  ASSERT_EQ(m["ranks"].size(), 8u);
  EXPECT_EQ(
      m["ranks"][6],
      nlohmann::json({{"rank", 6}, {"dp", 1}, {"tp", 0}, {"pp", 1}, {"node", 1}, {"stages", {1}}}));
  EXPECT_EQ(m["groups"]["dp"], nlohmann::json({{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(m["nodes"], 2);
  EXPECT_TRUE(m["warnings"].empty());
  // Without dp, tp or nodes there is no mesh to show.
  EXPECT_FALSE(nlohmann::json::parse(Conveyor("plan --format json").out).contains("mesh"));
}

TEST(CliTest, PlanWarnsWhenATpGroupSpansNodes) {
  const std::string inverted =
      "plan -s 1f1b --dp 2 --tp 2 --pp 2 -m 4 --gpus-per-node 4 --mesh-order pp-dp-tp";
  const Result text = Conveyor(inverted);
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("\nwarning: TP group {0,4} spans nodes 0 and 1 (4 of 4 TP groups span "
                          "nodes): TP all-reduces every layer; put TP inside a node (order "
                          "tp-dp-pp)\n"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("\nnote: pipeline neighbours {0,1} share node 0 while TP group {0,4}"),
            std::string::npos)
      << text.out;
  const Result json = Conveyor(inverted + " --format json");
  ASSERT_EQ(json.code, 0) << json.err;
  const auto m = nlohmann::json::parse(json.out)["mesh"];
  ASSERT_EQ(m["warnings"].size(), 1u);
  EXPECT_EQ(m["warnings"][0].get<std::string>().rfind("TP group {0,4} spans nodes 0 and 1", 0), 0u);
  EXPECT_EQ(m["notes"].size(), 1u);
  // A format with no room for it says it on stderr.
  const Result csv = Conveyor(inverted + " --format csv");
  ASSERT_EQ(csv.code, 0) << csv.err;
  EXPECT_NE(csv.err.find("conveyor: warning: TP group {0,4}"), std::string::npos) << csv.err;
}

TEST(CliTest, PlanAddsTensorAndDataParallelCommunication) {
  // Seconds: F = I = W = 10 ms per stage; 4 blocks per stage of a 4096-wide model.
  const std::string base =
      "plan -s 1f1b --pp 2 -m 8 --f 0.01 --i 0.01 --w 0.01 --layers-per-stage 4 --format json";
  const auto alone = nlohmann::json::parse(Conveyor(base).out);
  const Result r = Conveyor(base + " --dp 2 --tp 2 --gpus-per-node 4");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  const auto& m = json["mesh"];
  // TP: 2 all-reduces per block of 1 x 2048 x 4096 x 2 bytes within a node, in F, I and B.
  const double ring = 2 * 0.5 * (2048.0 * 4096 * 2) / 150e9 + 2 * 5e-6;
  EXPECT_NEAR(m["tp_time"][0].get<double>(), 2 * 4 * ring, 1e-12);
  EXPECT_NEAR(json["makespan"].get<double>(),
              alone["makespan"].get<double>() + (8 + 2 - 1) * 2 * 2 * 4 * ring, 1e-9);
  // DP: the step ends with the last reduction; part of the reductions hide.
  EXPECT_DOUBLE_EQ(m["step_without_dp"].get<double>(), json["makespan"].get<double>());
  EXPECT_GE(m["step"].get<double>(), m["step_without_dp"].get<double>());
  EXPECT_NEAR(m["step"].get<double>(),
              m["step_without_dp"].get<double>() + m["dp_exposed"].get<double>(), 1e-12);
  EXPECT_GT(m["dp_hidden_share"].get<double>(), 0);
  EXPECT_LT(m["dp_hidden_share"].get<double>(), 1);
}

TEST(CliTest, PlanRefusesBadMeshFlagsNamingTheValues) {
  const std::pair<const char*, const char*> cases[] = {
      {"plan --dp 2 --tp 2 --pp 2 --gpus-per-node 3",
       "3 ranks per node do not divide dp 2 x tp 2 x pp 2 (8 ranks, order tp-dp-pp) into whole "
       "nodes"},
      {"plan --inter-bandwidth -5", "--inter-bandwidth must be within (0, 1e+15], got -5"},
      {"plan --intra-bandwidth 0", "--intra-bandwidth must be within (0, 1e+15], got 0"},
      {"plan --intra-latency -1", "--intra-latency must be within [0, 1e+15], got -1"},
      {"plan --dp 0", "--dp must be within [1, 4096], got 0"},
      {"plan --tp 4294967298", "--tp must be within [1, 4096], got 4294967298"},
      {"plan --dp 4096 --tp 4096", "dp 4096 x tp 4096 x pp 4 = 67108864 ranks, above the limit"},
      {"plan --gpus-per-node -4", "--gpus-per-node must be within [0, 1048576], got -4"},
      {"plan --mesh-order tp-tp-pp", "got 'tp-tp-pp'"},
      {"plan --hidden 0", "--hidden must be within [1, 1048576], got 0"},
      {"plan --bucket-bytes 0", "--bucket-bytes must be within [1, 1e+15], got 0"},
      {"plan --element-bytes -2", "--element-bytes must be within (0, 16], got -2"},
  };
  for (const auto& [args, needle] : cases) {
    const Result r = Conveyor(args);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_EQ(Lines(r.err), 1) << args << ":\n" << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << ":\n" << r.err;
  }
}

// plan --auto: the best layouts of a model on 8 ranks, fastest first and within the memory
// cap; a cap nothing fits is an error naming the nearest miss; the sizes it chooses are
// not given beside it.
TEST(CliTest, PlanAutoChoosesLayoutsThatFitAndRefusesWhatNothingFits) {
  const std::string model =
      "plan --auto --world 8 --gpus-per-node 4 --layers 8 --hidden 1024 --heads 16 "
      "--seq-len 1024 --global-batch 64 ";
  Result r = Conveyor(model + "--memory-per-rank 40e9 --top 3");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("auto plan: GPT of 8 layers, hidden 1024"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(best)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" simulated, in "), std::string::npos) << r.out;
  r = Conveyor(model + "--memory-per-rank 40e9 --top 3 --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  ASSERT_EQ(json["best"].size(), 3u);
  double last = 0;
  for (const auto& c : json["best"]) {
    EXPECT_EQ(c["dp"].get<int>() * c["tp"].get<int>() * c["pp"].get<int>(), 8);
    EXPECT_LE(c["tp"].get<int>(), 4) << "TP stays inside a node of 4";
    EXPECT_LE(c["peak_bytes"].get<double>(), 40e9);
    EXPECT_GE(c["step_s"].get<double>(), last * (1 - 1e-6));  // ties: 7 digits
    last = c["step_s"].get<double>();
  }
  r = Conveyor(model + "--memory-per-rank 1e6");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no layout fits 1.0 MiB a rank: the smallest need is "), std::string::npos)
      << r.err;
  r = Conveyor(model + "--schedule 1f1b");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--schedule excludes --auto"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace conveyor
