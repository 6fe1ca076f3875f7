// End-to-end tests of the `conveyor` binary: output formats, and bad input giving one clear
// line and a non-zero exit.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "conveyor/schedule/registry.h"

namespace conveyor {
namespace {

struct Result {
  int code;
  std::string out;  // stdout
  std::string err;  // stderr
};

Result Conveyor(const std::string& args) {
  // One file per process and call: ctest runs the cases of this binary in parallel.
  static int calls = 0;
  const std::string err_path = ::testing::TempDir() + "conveyor_cli_stderr." +
                               std::to_string(::getpid()) + "." + std::to_string(calls++);
  const std::string command =
      std::string("timeout 60 ") + CONVEYOR_BINARY + " " + args + " 2>" + err_path;
  Result result{-1, "", ""};
  FILE* pipe = popen(command.c_str(), "r");
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.out.append(buffer.data(), n);
  const int status = pclose(pipe);
  result.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  result.err.assign(std::istreambuf_iterator<char>(err), {});
  return result;
}

int Lines(const std::string& text) {
  int lines = 0;
  for (char c : text) lines += c == '\n';
  return lines;
}

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
  const std::string path =
      ::testing::TempDir() + "conveyor_cli_zbv." + std::to_string(::getpid()) + ".csv";
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
      std::string(CONVEYOR_SHARED_DIR) + "/reference/pytorch-schedules/dualpipev_4rank_10mb.csv";
  if (!std::ifstream(path).good()) GTEST_SKIP() << "no " << path;
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
  EXPECT_NO_THROW(nlohmann::json::parse(chrome.out)) << chrome.out.substr(0, 200);
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

TEST(CliTest, TrainWritesMetricsAndACheckpointThatGenerateReads) {
  const std::string dir = ::testing::TempDir() + "conveyor_cli_train." + std::to_string(::getpid());
  const std::string corpus = dir + "/corpus.txt";
  std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str());
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
       {"rank", "compute_s", "comm_wait_s", "transfer_wait_s", "dependency_wait_s", "idle_s",
        "bubble_fraction", "comm_overlap", "sent_bytes", "peak_activation_bytes",
        "predicted_peak_activation_bytes"}) {
    EXPECT_TRUE(metrics["ranks"][1].contains(key)) << key;
  }
  EXPECT_TRUE(metrics["measured_bubble_fraction"].is_number());
  EXPECT_TRUE(metrics["predicted_bubble_fraction"].is_number());
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
  const Result g = Conveyor("generate --checkpoint " + dir + "/ckpt --prompt abc --tokens 4");
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_EQ(g.out.rfind("abc", 0), 0u) << g.out;
}

TEST(CliTest, BenchTrainRunsEachScheduleAndOneProcess) {
  const std::string dir = ::testing::TempDir() + "conveyor_cli_bench." + std::to_string(::getpid());
  std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str());
  {
    std::ofstream out(dir + "/run.toml");
    out << "layers = 2\nhidden = 16\nheads = 2\nseq_len = 16\nbatch_size = 4\n"
           "microbatches = 2\npp = 2\nsteps = 500\n";
    std::ofstream corpus(dir + "/corpus.txt");
    for (int i = 0; i < 100; ++i) corpus << "a small corpus for a small model, line " << i << "\n";
  }
  const Result r = Conveyor("bench train " + dir + "/run.toml --data " + dir +
                            "/corpus.txt --steps 2 --schedules 1f1b,dualpipe -f json");
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

TEST(CliTest, BenchOverheadMeasuresTracingToo) {
  const Result r = Conveyor("bench overhead --pp 1 --schedules 1f1b --steps 3 -f json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_GT(rows[0]["us_per_action"].get<double>(), 0);
  EXPECT_GT(rows[0]["traced_us_per_action"].get<double>(), 0);
}

TEST(CliTest, BenchHopMeasuresEachSize) {
  const Result r = Conveyor("bench hop --pp 2 --round-trips 3 -f json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2]["bytes"].get<int64_t>(), 256 << 10);
  for (const auto& row : rows) {
    EXPECT_EQ(row["ranks"].get<int>(), 2);
    EXPECT_GT(row["hop_us"].get<double>(), 0);
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
      {"plan --f -1", "--f must be >= 0"},
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
      {"train --threads -2", "threads must be within [0, 1024]"},
  };
  for (const auto& [args, needle] : cases) {
    const Result r = Conveyor(args);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_EQ(Lines(r.err), 1) << args << ":\n" << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << ":\n" << r.err;
  }
}

}  // namespace
}  // namespace conveyor
