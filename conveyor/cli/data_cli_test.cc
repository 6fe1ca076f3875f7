// `conveyor data prepare` and `data check` end to end: text, blocks and JSON Lines into an
// indexed data set read back token for token; bad inputs refused with nothing written.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "conveyor/cli/cli_testing.h"
#include "conveyor/data/indexed_dataset.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;

std::string WriteInput(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// The bytes of `text` and the newline that ends a document.
std::vector<int64_t> Bytes(const std::string& text) {
  std::vector<int64_t> tokens;
  for (const unsigned char byte : text) tokens.push_back(byte);
  tokens.push_back('\n');
  return tokens;
}

TEST(CliTest, DataPrepareWritesAnIndexedDataSetThatCheckCounts) {
  const std::string dir = ScratchWithCorpus("data_prepare");
  const std::string text = WriteInput(dir, "a.txt", "first\n\nsecond one\n");
  const std::string jsonl =
      WriteInput(dir, "b.jsonl", "{\"text\": \"caf\\u00e9\"}\n{\"text\": \"x\"}\n");
  const Result prepared = Conveyor("data prepare --input " + text + " " + jsonl +
                                   " --blank-line-blocks --out " + dir + "/set");
  ASSERT_EQ(prepared.code, 0) << prepared.err;
  EXPECT_NE(prepared.out.find("4 documents, 25 tokens (uint16)"), std::string::npos)
      << prepared.out;
  const IndexedDataset data(dir + "/set");
  ASSERT_EQ(data.num_documents(), 4);
  EXPECT_EQ(data.Read(0), Bytes("first"));
  EXPECT_EQ(data.Read(1), Bytes("second one"));
  EXPECT_EQ(data.Read(2), Bytes("caf\xc3\xa9"));
  EXPECT_EQ(data.Read(3), Bytes("x"));
  const Result checked = Conveyor("data check " + dir + "/set --vocab 256");
  ASSERT_EQ(checked.code, 0) << checked.err;
  EXPECT_NE(checked.out.find("4 documents, 4 sequences, 25 tokens (uint16), every token in "
                             "[0, 256)"),
            std::string::npos)
      << checked.out;
  // 0xC3 of the 'é' is the first token past a vocabulary of 128.
  const Result outside = Conveyor("data check " + dir + "/set --vocab 128");
  EXPECT_EQ(outside.code, 1);
  EXPECT_NE(outside.err.find("document 2, sequence 2, token 3: value 195 is outside the "
                             "vocabulary [0, 128)"),
            std::string::npos)
      << outside.err;
}

TEST(CliTest, DataPrepareRefusesBadInputAndWritesNothing) {
  const std::string dir = ScratchWithCorpus("data_bad");
  const std::string good = WriteInput(dir, "good.txt", "fine");
  const std::string bad = WriteInput(dir, "bad.jsonl", "{\"text\": \"a\"}\n{\"body\": \"b\"}\n");
  const Result result =
      Conveyor("data prepare --input " + good + " " + bad + " --out " + dir + "/set");
  EXPECT_EQ(result.code, 1);
  EXPECT_NE(result.err.find("bad.jsonl, line 2: no \"text\" in this line's object"),
            std::string::npos)
      << result.err;
  EXPECT_FALSE(fs::exists(dir + "/set.bin"));
  EXPECT_FALSE(fs::exists(dir + "/set.idx"));
  for (const auto& entry : fs::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().string().find(".tmp"), std::string::npos) << entry.path();
  }
  const Result tokenizer =
      Conveyor("data prepare --input " + good + " --tokenizer gpt2 --out " + dir + "/set");
  EXPECT_EQ(tokenizer.code, 1);
  EXPECT_NE(tokenizer.err.find("tokenizer gpt2: "), std::string::npos) << tokenizer.err;
  const Result missing = Conveyor("data check " + dir + "/nothing");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("cannot open " + dir + "/nothing.idx"), std::string::npos)
      << missing.err;
}

// Train on a prepared data set: a run stopped after 3 steps and resumed on another mesh has
// the uninterrupted run's losses; eval reads the same data set and gives one loss on any mesh.
TEST(CliTest, TrainAndEvalReadAPreparedDataSet) {
  const std::string dir = ScratchWithCorpus("data_train");
  std::string blocks;
  for (int i = 0; i < 60; ++i) {
    blocks += "document " + std::to_string(i) + ": a few words of text\nand a second line\n\n";
  }
  const std::string input = WriteInput(dir, "blocks.txt", blocks);
  ASSERT_EQ(
      Conveyor("data prepare --input " + input + " --blank-line-blocks --out " + dir + "/set").code,
      0);
  const std::string job =
      "train --model llama --layers 2 --hidden 32 --heads 4 --kv-heads 2 --seq-len 16 "
      "--batch-size 4 --microbatches 2 --eval-every 0 --sample-tokens 0 --split 80,20,0 "
      "--data " +
      dir + "/set ";
  // 6 steps on pp 2, a checkpoint after 3; from it, the last 3 again on dp 2.
  const Result whole =
      Conveyor(job + "--steps 6 --pp 2 --schedule 1f1b --checkpoint-every 3 " +
               "--checkpoint-dir " + dir + "/ckpt --metrics " + dir + "/whole.json");
  ASSERT_EQ(whole.code, 0) << whole.err;
  EXPECT_NE(whole.out.find("by documents 48 / 12 / 0 train / validation / test"), std::string::npos)
      << whole.out;
  const Result rest = Conveyor(job + "--steps 6 --dp 2 --pp 1 --resume " + dir +
                               "/ckpt/step-000003 --metrics " + dir + "/rest.json");
  ASSERT_EQ(rest.code, 0) << rest.err;
  const auto a = nlohmann::json::parse(std::ifstream(dir + "/whole.json"));
  const auto b = nlohmann::json::parse(std::ifstream(dir + "/rest.json"));
  ASSERT_EQ(a["steps"].size(), 6u);
  ASSERT_EQ(b["steps"].size(), 3u);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(b["steps"][k]["step"], a["steps"][3 + k]["step"]);
    EXPECT_NEAR(b["steps"][k]["loss"].get<double>(), a["steps"][3 + k]["loss"].get<double>(),
                2e-5 * a["steps"][3 + k]["loss"].get<double>())
        << "step " << 4 + k;
  }
  const std::string eval =
      "eval --model llama --layers 2 --hidden 32 --heads 4 --seq-len 16 --batch-size 4 "
      "--microbatches 2 --format json --data " +
      dir + "/set ";
  const Result one = Conveyor(eval);
  const Result two = Conveyor(eval + "--pp 2 --schedule 1f1b");
  ASSERT_EQ(one.code, 0) << one.err;
  ASSERT_EQ(two.code, 0) << two.err;
  const auto x = nlohmann::json::parse(one.out), y = nlohmann::json::parse(two.out);
  // Every token of the data set but the first is predicted once.
  EXPECT_EQ(x["tokens"].get<int64_t>(), static_cast<int64_t>(blocks.size()) - 60 - 1);
  EXPECT_EQ(y["tokens"], x["tokens"]);
  EXPECT_NEAR(y["loss"].get<double>(), x["loss"].get<double>(), 1e-5 * x["loss"].get<double>());
  const Result bad =
      Conveyor("train --model llama --layers 2 --steps 1 --split 80,20 --data " + dir + "/set");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("--split '80,20' must be three weights"), std::string::npos) << bad.err;
}

// llm.c's and nanoGPT's token files train as data sets do, alone or blended with one; bad
// blends are refused before any rank starts.
TEST(CliTest, TrainReadsTokenFilesAndBlends) {
  const std::string dir = ScratchWithCorpus("token_files");
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 6000; ++i) tokens.push_back(static_cast<uint16_t>((i * 37 + i / 50) % 251));
  const std::string raw(reinterpret_cast<const char*>(tokens.data()), 2 * tokens.size());
  WriteInput(dir, "nano.bin", raw);
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520;
  header[1] = 1;
  header[2] = static_cast<int32_t>(tokens.size());
  WriteInput(dir, "llmc.bin",
             std::string(reinterpret_cast<const char*>(header.data()), 1024) + raw);
  std::string blocks;
  for (int i = 0; i < 40; ++i) blocks += "block " + std::to_string(i) + " of a few words\n\n";
  WriteInput(dir, "blocks.txt", blocks);
  ASSERT_EQ(Conveyor("data prepare --input " + dir + "/blocks.txt --blank-line-blocks --out " +
                     dir + "/set")
                .code,
            0);
  const std::string job =
      "train --model llama --layers 2 --hidden 32 --heads 4 --seq-len 16 --batch-size 4 "
      "--microbatches 2 --steps 2 --eval-every 0 --sample-tokens 0 --split 90,10,0 --metrics " +
      dir + "/m.json --data ";
  const Result nano = Conveyor(job + dir + "/nano.bin");
  ASSERT_EQ(nano.code, 0) << nano.err;
  EXPECT_NE(nano.out.find("nanoGPT token file " + dir + "/nano.bin: 6000 tokens (uint16"),
            std::string::npos)
      << nano.out;
  const Result llmc = Conveyor(job + dir + "/llmc.bin");
  ASSERT_EQ(llmc.code, 0) << llmc.err;
  EXPECT_NE(llmc.out.find("llm.c token file"), std::string::npos) << llmc.out;
  // The same tokens: the same losses.
  EXPECT_NE(llmc.out.find("loss"), std::string::npos);
  const auto losses = [&](const std::string& out) { return out.substr(out.find("step 2/2")); };
  EXPECT_EQ(losses(llmc.out).substr(0, 20), losses(nano.out).substr(0, 20));
  const Result blend = Conveyor(job + "0.7 " + dir + "/set 0.3 " + dir + "/llmc.bin");
  ASSERT_EQ(blend.code, 0) << blend.err;
  EXPECT_NE(blend.out.find("weight 0.7"), std::string::npos) << blend.out;
  EXPECT_NE(blend.out.find("weight 0.3"), std::string::npos) << blend.out;
  const auto metrics = nlohmann::json::parse(std::ifstream(dir + "/m.json"));
  EXPECT_GE(metrics["steps"][0]["data_s"].get<double>(), 0.0);
  for (const auto& [data, words] :
       {std::pair{"-1 " + dir + "/set 2 " + dir + "/llmc.bin", std::string("is not a number >= 0")},
        std::pair{"0 " + dir + "/set 0 " + dir + "/llmc.bin", std::string("the weights sum to 0")},
        std::pair{"1 " + dir + "/set 1 " + dir + "/missing",
                  dir + "/missing in the blend is neither a data set"}}) {
    const Result bad = Conveyor(job + data);
    EXPECT_EQ(bad.code, 1) << data;
    EXPECT_NE(bad.err.find(words), std::string::npos) << bad.err;
  }
}

}  // namespace
}  // namespace conveyor
