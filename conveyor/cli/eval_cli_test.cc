// `conveyor eval` end to end: exact token counts, JSON alone on stdout, the same loss on any
// mesh, a checkpoint's model, refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

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
  ASSERT_EQ(a.size(), 3u) << one.out;
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
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace conveyor
