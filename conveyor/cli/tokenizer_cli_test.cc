// A SentencePiece tokenizer end to end, as the README's recipe uses it: `tokenizer train`,
// `data prepare --tokenizer`, a Llama sized by the tokenizer trained on the data set, its
// checkpoint and export carrying the tokenizer, `generate` from both; refusals, among them a
// Hugging Face folder whose tokenizer is tokenizer.json alone.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "conveyor/cli/cli_testing.h"
#include "conveyor/common/reference_env_testing.h"
#include "conveyor/data/indexed_dataset.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;

std::string FileBytes(const std::string& path) {
  std::ostringstream bytes;
  bytes << std::ifstream(path, std::ios::binary).rdbuf();
  return bytes.str();
}

// "1,2,3" or "1 2 3\n" -> {1, 2, 3}.
std::vector<int64_t> Ids(std::string text) {
  for (char& c : text) c = c == ',' ? ' ' : c;
  std::istringstream in(text);
  std::vector<int64_t> ids;
  for (int64_t id; in >> id;) ids.push_back(id);
  return ids;
}

// Trains dir/tok.model (400 pieces) on the project's documentation; "" when this build has
// no SentencePiece.
std::string TrainTokenizer(const std::string& dir) {
  const fs::path root = CONVEYOR_SOURCE_DIR;
  std::string inputs = (root / "README.md").string();
  for (const auto& entry : fs::directory_iterator(root / "docs")) {
    if (entry.path().extension() == ".md") inputs += " " + entry.path().string();
  }
  const Result trained = Conveyor("tokenizer train --input " + inputs + " --vocab-size 400 --out " +
                                  dir + "/tok.model");
  if (trained.err.find("without SentencePiece") != std::string::npos) return "";
  EXPECT_EQ(trained.code, 0) << trained.err;
  EXPECT_NE(trained.out.find("a bpe model of 400 pieces (bos 1, eos 2)"), std::string::npos)
      << trained.out;
  return dir + "/tok.model";
}

TEST(CliTest, ATrainedTokenizerPreparesTrainsGeneratesAndExports) {
  const std::string dir = ScratchWithCorpus("tokenizer");
  const std::string tok = TrainTokenizer(dir);
  if (tok.empty()) GTEST_SKIP() << "this build has no SentencePiece";
  const bool spm = Shell("spm_encode --help").code == 0;

  // encode / decode, and the library's own encoder agreeing.
  const std::vector<std::string> docs = {"The schedule runs every micro-batch.",
                                         "Stages exchange activations and gradients.",
                                         "caf\xc3\xa9 \xf0\x9f\x9a\x82 42"};
  for (const std::string& doc : docs) {
    const Result encoded = Conveyor("tokenizer encode --tokenizer " + tok + " '" + doc + "'");
    ASSERT_EQ(encoded.code, 0) << encoded.err;
    if (spm) {
      EXPECT_EQ(Ids(encoded.out), Ids(Shell("printf '%s\\n' '" + doc +
                                            "' | spm_encode --output_format=id --model " + tok)
                                          .out))
          << doc;
    }
    const Result decoded = Conveyor("tokenizer decode --tokenizer " + tok + " " + encoded.out);
    ASSERT_EQ(decoded.code, 0) << decoded.err;
    EXPECT_EQ(decoded.out, doc + "\n");
  }

  // prepare: every document is BOS, its ids, EOS; one thread and two write the same bytes.
  std::string jsonl;
  for (int copy = 0; copy < 40; ++copy) {
    for (const std::string& doc : docs) jsonl += "{\"text\": \"" + doc + "\"}\n";
  }
  std::ofstream(dir + "/docs.jsonl") << jsonl;
  for (const std::string threads : {"1", "2"}) {
    const Result prepared =
        Conveyor("data prepare --input " + dir + "/docs.jsonl --tokenizer " + tok + " --threads " +
                 threads + " --out " + dir + "/set" + threads);
    ASSERT_EQ(prepared.code, 0) << prepared.err;
    EXPECT_NE(prepared.out.find("120 documents"), std::string::npos) << prepared.out;
  }
  EXPECT_EQ(FileBytes(dir + "/set1.bin"), FileBytes(dir + "/set2.bin"));
  EXPECT_EQ(FileBytes(dir + "/set1.idx"), FileBytes(dir + "/set2.idx"));
  const IndexedDataset data(dir + "/set2");
  ASSERT_EQ(data.num_documents(), 120);
  for (int i = 0; i < 3; ++i) {
    const std::vector<int64_t> tokens = data.Read(i);
    ASSERT_GE(tokens.size(), 3u);
    EXPECT_EQ(tokens.front(), 1);
    EXPECT_EQ(tokens.back(), 2);
    const Result encoded = Conveyor("tokenizer encode --tokenizer " + tok + " '" + docs[i] + "'");
    EXPECT_EQ(std::vector<int64_t>(tokens.begin() + 1, tokens.end() - 1), Ids(encoded.out));
  }

  // A Llama drawn from the seed takes the tokenizer's 400 ids; its checkpoint and export
  // carry the tokenizer, and generate finds it in both.
  const Result trained = Conveyor(
      "train --model llama --layers 2 --hidden 32 --heads 4 --seq-len 16 --batch-size 4 "
      "--microbatches 2 --pp 2 --steps 3 --eval-every 0 --sample-tokens 8 --split 90,10,0 "
      "--data " +
      dir + "/set2 --tokenizer " + tok + " --checkpoint-dir " + dir + "/ckpt");
  ASSERT_EQ(trained.code, 0) << trained.err;
  EXPECT_NE(trained.out.find("vocabulary 400"), std::string::npos) << trained.out;
  EXPECT_NE(trained.out.find("sample:"), std::string::npos) << trained.out;
  EXPECT_TRUE(fs::is_regular_file(dir + "/ckpt/step-000003/tokenizer.model"));
  const std::string prompt = " --prompt 'The stages' --tokens 6 --temperature 0";
  const Result from_checkpoint = Conveyor("generate --checkpoint " + dir + "/ckpt" + prompt);
  ASSERT_EQ(from_checkpoint.code, 0) << from_checkpoint.err;
  EXPECT_EQ(from_checkpoint.out.rfind("The stages", 0), 0u) << from_checkpoint.out;
  ASSERT_EQ(Conveyor("export --checkpoint " + dir + "/ckpt --out " + dir + "/hf").code, 0);
  EXPECT_EQ(FileBytes(dir + "/hf/tokenizer.model"), FileBytes(tok));
  // transformers' tokenizer of the exported folder encodes as conveyor does, the BOS id first
  // (the folder's tokenizer_config.json says so).
  if (!ReferencePython().empty()) {
    const std::vector<int64_t> ids =
        Ids(Conveyor("tokenizer encode --tokenizer " + tok + " 'The stages'").out);
    nlohmann::json job = {{"texts", {"The stages"}}, {"ids", {ids}}};
    std::ofstream(dir + "/job.json") << job.dump();
    const ReferenceRun seen = RunReferenceScript(
        "sentencepiece_tokenizers.py", dir + "/hf " + dir + "/job.json " + dir + "/seen.json");
    ASSERT_TRUE(seen.ok()) << seen.output;
    const nlohmann::json got = nlohmann::json::parse(std::ifstream(dir + "/seen.json"));
    EXPECT_TRUE(got["transformers"]["bos_added"].get<bool>());
    EXPECT_EQ(got["transformers"]["encode"][0].get<std::vector<int64_t>>(), ids);
    EXPECT_EQ(got["transformers"]["decode"][0].get<std::string>(), "The stages");
  }
  const Result from_folder = Conveyor("generate --model " + dir + "/hf" + prompt);
  ASSERT_EQ(from_folder.code, 0) << from_folder.err;
  EXPECT_EQ(from_folder.out, from_checkpoint.out);

  // Refusals: text for a run with a tokenizer; a tokenizer larger than the model's
  // vocabulary; a prompt in bytes for a model of 400 ids.
  const Result text = Conveyor("train --model llama --layers 2 --steps 1 --data " + dir +
                               "/corpus.txt --tokenizer " + tok);
  EXPECT_EQ(text.code, 1);
  EXPECT_NE(text.err.find("is text, which a run reads as bytes"), std::string::npos) << text.err;
  const std::string byte_llama = "--model llama --layers 2 --hidden 32 --heads 4 --seq-len 16 ";
  ASSERT_EQ(Conveyor("train " + byte_llama + "--steps 1 --pp 1 --sample-tokens 0 --data " + dir +
                     "/corpus.txt --checkpoint-dir " + dir + "/bytes")
                .code,
            0);
  ASSERT_EQ(Conveyor("export --checkpoint " + dir + "/bytes --out " + dir + "/hf256").code, 0);
  const Result too_big = Conveyor("train --model " + dir + "/hf256 --seq-len 16 --steps 1 --data " +
                                  dir + "/set2 --tokenizer " + tok);
  EXPECT_EQ(too_big.code, 1);
  EXPECT_NE(too_big.err.find("has 400 ids but the model's vocabulary only 256 rows"),
            std::string::npos)
      << too_big.err;
  const Result bytes = Conveyor("generate --model " + dir + "/hf --tokenizer bytes --prompt x");
  EXPECT_EQ(bytes.code, 1);
  EXPECT_NE(bytes.err.find("vocabulary of 400 tokens"), std::string::npos) << bytes.err;
}

// A Hugging Face folder with tokenizer.json and no tokenizer.model (as Llama 3 and Qwen ship):
// train, eval, generate, tokenizer encode and data prepare refuse it in one line saying what
// to pass instead, never reading its text as bytes unasked; with --tokenizer bytes they run.
TEST(CliTest, AFolderWithOnlyTokenizerJsonIsRefusedInOneLineUnlessTokenizerIsGiven) {
  const std::string dir = ScratchWithCorpus("tokenizer_json");
  ASSERT_EQ(Conveyor("train --model llama --layers 2 --hidden 32 --heads 4 --seq-len 16 "
                     "--steps 1 --pp 1 --sample-tokens 0 --data " +
                     dir + "/corpus.txt --checkpoint-dir " + dir + "/ckpt")
                .code,
            0);
  const std::string hf = dir + "/hf";
  ASSERT_EQ(Conveyor("export --checkpoint " + dir + "/ckpt --out " + hf).code, 0);
  ASSERT_FALSE(fs::exists(hf + "/tokenizer.model"));
  std::ofstream(hf + "/tokenizer.json")
      << R"({"version": "1.0", "added_tokens": [], "normalizer": null, )"
      << R"("pre_tokenizer": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {}, )"
      << R"("merges": []}})";
  const std::string advice =
      " holds tokenizer.json (a Hugging Face tokenizers tokenizer) and no tokenizer.model; "
      "conveyor reads SentencePiece models only: pass --tokenizer bytes (for data already "
      "tokenized) or --tokenizer a SentencePiece tokenizer.model\n";
  const std::string data = " --seq-len 16 --data " + dir + "/corpus.txt";
  const std::string train = "train --model " + hf + data + " --steps 1 --sample-tokens 0";
  const std::string eval = "eval --model " + hf + data;
  const std::string generate = "generate --model " + hf + " --prompt x --tokens 2";
  for (const std::string& command : {train, eval, generate}) {
    const Result refused = Conveyor(command);
    EXPECT_EQ(refused.code, 1) << command;
    EXPECT_EQ(refused.err, "conveyor: error: --model " + hf + advice) << command;
    const Result given = Conveyor(command + " --tokenizer bytes");
    EXPECT_EQ(given.code, 0) << command << ": " << given.err;
  }
  const Result encode = Conveyor("tokenizer encode --tokenizer " + hf + " x");
  EXPECT_EQ(encode.code, 1);
  EXPECT_EQ(encode.err, "conveyor: error: tokenizer " + hf + advice);
  const Result prepare = Conveyor("data prepare --input " + dir + "/corpus.txt --tokenizer " + hf +
                                  "/tokenizer.json --out " + dir + "/set");
  EXPECT_EQ(prepare.code, 1);
  EXPECT_EQ(prepare.err, "conveyor: error: tokenizer " + hf +
                             "/tokenizer.json is a Hugging Face tokenizers file, not a "
                             "SentencePiece model; conveyor reads SentencePiece models only: "
                             "pass --tokenizer bytes (for data already tokenized) or "
                             "--tokenizer a SentencePiece tokenizer.model\n");
  EXPECT_FALSE(fs::exists(dir + "/set.bin"));
}

}  // namespace
}  // namespace conveyor
