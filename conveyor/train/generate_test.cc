#include "conveyor/train/generate.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "conveyor/comm/local_transport.h"
#include "conveyor/comm/rank_threads.h"
#include "conveyor/common/error.h"
#include "conveyor/data/byte_tokenizer.h"
#include "conveyor/nn/layer.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/train_testing.h"

namespace conveyor {
namespace {

class GenerateTest : public ::testing::Test {
 protected:
  void SetUp() override { at::set_num_threads(1); }
};

// Runs `body` on every rank's trainer, on threads, as built: its weights are functions of
// the seed alone, equal bit for bit whatever the partition.
void OnEveryRank(const TrainConfig& c, const std::function<void(Trainer&)>& body) {
  const auto world = LocalWorld(std::max(c.dp, 1) * c.tp * c.pp);
  const auto task = MakeTask(c);
  RunRankThreads(world, [&](int r) {
    Trainer trainer(c, task, InProcessRank(world[r].get(), c.device));
    body(trainer);
  });
}

// What every rank generates.
std::vector<std::string> GenerateOnRanks(const TrainConfig& c, const std::string& prompt,
                                         double temperature) {
  std::vector<std::string> texts(std::max(c.dp, 1) * c.tp * c.pp);
  OnEveryRank(c, [&](Trainer& t) {
    ForwardPipeline forward(t.model());
    texts[t.model().rank()] =
        Generate(forward, ByteTokenizer(), prompt, 12, temperature, 5, c.model.seq_len);
  });
  return texts;
}

// Every rank of a pipeline, and of a dp x tp x pp mesh (replica 0 samples, replica 1 receives
// its bytes), returns the text one process samples.
TEST_F(GenerateTest, TextDoesNotDependOnMeshOrDirections) {
  for (const double temperature : {0.0, 0.8}) {
    TrainConfig c = TinyGpt();
    c.batch_size = 8;  // dp x microbatches
    const std::string reference = GenerateOnRanks(c, "ab", temperature).at(0);
    EXPECT_EQ(reference.size(), 12u);
    struct Run {
      int dp, tp, pp;
      const char* schedule;
    };
    for (const Run& run : {Run{1, 1, 2, "1f1b"}, Run{1, 1, 2, "dualpipe-v"}, Run{2, 2, 2, "1f1b"},
                           Run{2, 1, 1, "gpipe"}}) {
      c.dp = run.dp;
      c.tp = run.tp;
      c.pp = run.pp;
      c.schedule = run.schedule;
      for (const std::string& text : GenerateOnRanks(c, "ab", temperature)) {
        EXPECT_EQ(text, reference) << "dp " << run.dp << " x tp " << run.tp << " x pp " << run.pp
                                   << " " << run.schedule << " at temperature " << temperature;
      }
    }
  }
}

// Only replica 0 runs the pipeline: the other replica builds no program.
TEST_F(GenerateTest, OneReplicaComputes) {
  TrainConfig c = TinyGpt();
  c.batch_size = 8;
  c.dp = 2;
  c.pp = 2;
  c.schedule = "1f1b";
  std::vector<int> built(4);
  std::vector<std::string> texts(4);
  OnEveryRank(c, [&](Trainer& t) {
    ForwardPipeline forward(t.model());
    texts[t.model().rank()] = Generate(forward, ByteTokenizer(), "x", 6, 0, 3, c.model.seq_len);
    built[t.model().coords().dp * 2 + t.model().coords().pp] = forward.built_programs();
  });
  EXPECT_EQ(built, (std::vector<int>{1, 1, 0, 0}));
  for (const std::string& text : texts) EXPECT_EQ(text, texts[0]);
  EXPECT_EQ(texts[0].size(), 6u);
}

// Every byte reuses the pipeline's one program; a second call gives the same text.
TEST_F(GenerateTest, SamplingIsRepeatableAndBuildsOneProgram) {
  TrainConfig c = TinyGpt();
  c.pp = 2;
  c.schedule = "1f1b";
  std::vector<std::string> first(2), second(2);
  std::vector<int> built(2);
  OnEveryRank(c, [&](Trainer& t) {
    ForwardPipeline forward(t.model());
    // A context shorter than the text: the window slides, its length changes.
    first[t.model().rank()] = Generate(forward, ByteTokenizer(), "", 20, 0.8, 7, 8);
    second[t.model().rank()] = Generate(forward, ByteTokenizer(), "", 20, 0.8, 7, 8);
    built[t.model().rank()] = forward.built_programs();
  });
  EXPECT_EQ(first[0].size(), 20u);
  EXPECT_EQ(first[0], first[1]) << "every rank returns the same text";
  EXPECT_EQ(second[0], first[0]);
  EXPECT_EQ(built[0], 1);
  EXPECT_EQ(built[1], 1);
}

// The key-value cache gives the tokens of recomputing the window at every step: greedy and
// sampled, a GPT and a Llama, on pipelines of every kind of layout, before and after the
// sequence outgrows the context (from there on no cache).
TEST_F(GenerateTest, TheCacheGivesTheTokensOfRecomputation) {
  struct Run {
    int tp, pp;
    const char* schedule;
  };
  for (TrainConfig c : {TinyGpt(), TinyLlama()}) {
    for (const Run& run : {Run{1, 1, "1f1b"}, Run{1, 2, "1f1b"}, Run{1, 2, "dualpipe-v"},
                           Run{2, 2, "interleaved-1f1b"}}) {
      c.tp = run.tp;
      c.pp = run.pp;
      c.schedule = run.schedule;
      for (const double temperature : {0.0, 0.8}) {
        Sampling sampling;
        sampling.temperature = temperature;
        std::vector<std::vector<int64_t>> cached(run.tp * run.pp), recomputed(run.tp * run.pp);
        OnEveryRank(c, [&](Trainer& t) {
          ForwardPipeline forward(t.model());
          const int r = t.model().rank();
          // 3 prompt tokens + 12 > a context of 10: the last 5 steps slide the window.
          cached[r] = GenerateTokens(forward, {5, 9, 2}, 12, sampling, 4, 10, true);
          recomputed[r] = GenerateTokens(forward, {5, 9, 2}, 12, sampling, 4, 10, false);
        });
        const std::string what = std::string(ModelKindName(c.model.kind)) + " tp " +
                                 std::to_string(run.tp) + " x pp " + std::to_string(run.pp) + " " +
                                 run.schedule + " at temperature " + std::to_string(temperature);
        EXPECT_EQ(cached[0].size(), 12u) << what;
        EXPECT_EQ(cached[0], recomputed[0]) << what;
        for (const auto& tokens : cached) EXPECT_EQ(tokens, cached[0]) << what;
      }
    }
  }
}

// A vocabulary tp does not divide (GPT-2's case) is padded on the last TP rank; its padded
// logits, zeros, would be drawn at a high temperature if they reached the sampler. They never
// do: tp 2 draws the tokens of one process, every one inside the vocabulary.
TEST_F(GenerateTest, APaddedVocabularyIsNeverSampled) {
  TrainConfig c = TinyGpt();
  c.model.vocab = 301;  // 151 rows a rank at tp 2, the last one padding
  Sampling sampling;
  sampling.temperature = 100;
  auto tokens = [&](const TrainConfig& run) {
    std::vector<std::vector<int64_t>> out(run.tp * run.pp);
    OnEveryRank(run, [&](Trainer& t) {
      ForwardPipeline forward(t.model());
      out[t.model().rank()] = GenerateTokens(forward, {5, 300, 2}, 400, sampling, 4, 10, true);
    });
    return out;
  };
  const std::vector<int64_t> reference = tokens(c).at(0);
  ASSERT_EQ(reference.size(), 400u);
  for (int64_t id : reference) EXPECT_LT(id, 301);
  c.tp = 2;
  c.pp = 2;
  c.schedule = "1f1b";
  for (const auto& got : tokens(c)) EXPECT_EQ(got, reference);
}

TEST_F(GenerateTest, RefusesNegativeTokensAndAnEmptyContext) {
  OnEveryRank(TinyGpt(), [&](Trainer& t) {
    ForwardPipeline forward(t.model());
    EXPECT_THROW(Generate(forward, ByteTokenizer(), "a", -1, 0, 1, 4), UserError);
    EXPECT_THROW(Generate(forward, ByteTokenizer(), "a", 1, 0, 1, 0), UserError);
    EXPECT_EQ(Generate(forward, ByteTokenizer(), "a", 0, 0, 1, 4), "");
    EXPECT_EQ(forward.built_programs(), 0);
  });
}

}  // namespace
}  // namespace conveyor

namespace conveyor {
namespace {

// The set of tokens SampleTokens draws over 4000 rows of probabilities [0.5, 0.3, 0.15, 0.05].
std::set<int64_t> Drawn(const Sampling& sampling) {
  const at::Tensor logits = at::tensor({0.5, 0.3, 0.15, 0.05}, at::kFloat).log().repeat({4000, 1});
  const at::Tensor tokens = SampleTokens(logits, sampling, LayerInitGenerator(3, 0));
  std::set<int64_t> drawn;
  for (int64_t i = 0; i < tokens.size(0); ++i) drawn.insert(tokens[i].item<int64_t>());
  return drawn;
}

TEST(SampleTokensTest, TopKAndTopPKeepOnlyTheMostProbable) {
  auto with = [](double temperature, int64_t top_k, double top_p) {
    Sampling s;
    s.temperature = temperature;
    s.top_k = top_k;
    s.top_p = top_p;
    return s;
  };
  EXPECT_EQ(Drawn(with(0, 0, 1)), (std::set<int64_t>{0}));  // greedy
  EXPECT_EQ(Drawn(with(1, 0, 1)), (std::set<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(Drawn(with(1, 1, 1)), (std::set<int64_t>{0}));
  EXPECT_EQ(Drawn(with(1, 2, 1)), (std::set<int64_t>{0, 1}));
  // Mass ahead of each token: 0, 0.5, 0.8, 0.95; kept while below top_p.
  EXPECT_EQ(Drawn(with(1, 0, 0.5)), (std::set<int64_t>{0}));
  EXPECT_EQ(Drawn(with(1, 0, 0.6)), (std::set<int64_t>{0, 1}));
  EXPECT_EQ(Drawn(with(1, 0, 0.9)), (std::set<int64_t>{0, 1, 2}));
  EXPECT_EQ(Drawn(with(1, 3, 0.6)), (std::set<int64_t>{0, 1}));  // both: the stricter wins
  EXPECT_EQ(Drawn(with(1, 0, 1e-9)), (std::set<int64_t>{0}));    // the first is always kept
  EXPECT_THROW(Drawn(with(1, -1, 1)), UserError);
  EXPECT_THROW(Drawn(with(1, 0, 0)), UserError);
  EXPECT_THROW(Drawn(with(1, 0, 1.5)), UserError);
  EXPECT_THROW(Drawn(with(1e-4, 0, 1)), UserError);
}

}  // namespace
}  // namespace conveyor
