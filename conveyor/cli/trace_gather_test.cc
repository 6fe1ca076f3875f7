#include "conveyor/cli/trace_gather.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "conveyor/comm/local_transport.h"
#include "conveyor/comm/rank_threads.h"
#include "conveyor/common/remove_tree.h"
#include "conveyor/timeline/chrome_trace.h"

namespace conveyor {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Rank `r`'s last step as its StepRecorder would hold it, starting at `start` seconds.
Timeline RankStep(int r, double start) {
  Timeline t;
  t.num_ranks = 2;
  t.time_unit = TimeUnit::kSeconds;
  t.spans.push_back(Span{r, Action{Op::kForward, r, 0}, start, start + 0.1, SpanKind::kRun});
  t.spans.push_back(
      Span{r, Action{Op::kSendF, r, 0}, start + 0.1, start + 0.1 + 0.3 / 7, SpanKind::kPost});
  t.phases.push_back(Phase{r, "sum shared grads", start + 1, start + 1.25});
  t.phases.push_back(
      Phase{r, "all-reduce 2 tensors", start + 0.5, start + 0.75, PhaseTrack::kDataParallel});
  t.counters.push_back(CounterSample{r, "bytes sent", start + 0.2, 4096});
  return t;
}

TEST(TraceGatherTest, RankZeroWritesEveryRanksTraceAndTheMergedOnes) {
  const std::string dir =
      ::testing::TempDir() + "conveyor_trace_gather." + std::to_string(::getpid());
  RemoveTree(dir);
  const std::vector<Timeline> mine = {RankStep(0, 10.1), RankStep(1, 10.05)};
  Timeline predicted;
  predicted.num_ranks = 2;
  predicted.time_unit = TimeUnit::kSeconds;
  predicted.spans.push_back(Span{0, Action{Op::kForward, 0, 0}, 0, 1, SpanKind::kRun});
  const auto world = LocalWorld(2);
  RunRankThreads(world, [&](int r) { WriteTraces(dir, mine[r], predicted, *world[r]); });

  std::set<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    files.insert(entry.path().filename().string());
  }
  EXPECT_EQ(files, (std::set<std::string>{"rank-0.json", "rank-1.json", "trace.json",
                                          "measured.svg", "predicted.svg"}));
  // Every rank's own trace, bit for bit as that rank would have rendered it.
  EXPECT_EQ(ReadFile(dir + "/rank-0.json"), RenderChromeTrace(mine[0], "rank 0"));
  EXPECT_EQ(ReadFile(dir + "/rank-1.json"), RenderChromeTrace(mine[1], "rank 1"));
  // The merged one starts at the earliest event of any rank (rank 1's first span).
  Timeline measured;
  measured.num_ranks = 2;
  measured.time_unit = TimeUnit::kSeconds;
  for (const Timeline& t : mine) {
    for (Span s : t.spans) {
      s.start -= 10.05, s.end -= 10.05;
      measured.spans.push_back(s);
    }
  }
  for (const Timeline& t : mine) {
    for (Phase p : t.phases) {
      p.start -= 10.05, p.end -= 10.05;
      measured.phases.push_back(p);
    }
  }
  for (const Timeline& t : mine) {
    for (CounterSample c : t.counters) {
      c.time -= 10.05;
      measured.counters.push_back(c);
    }
  }
  EXPECT_EQ(ReadFile(dir + "/trace.json"),
            RenderChromeTrace({{"measured", &measured}, {"predicted", &predicted}}));
  RemoveTree(dir);
}

}  // namespace
}  // namespace conveyor
