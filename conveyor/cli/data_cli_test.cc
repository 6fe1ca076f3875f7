// `conveyor data prepare` and `data check` end to end: text, blocks and JSON Lines into an
// indexed data set read back token for token; bad inputs refused with nothing written; train
// and eval on data sets of conveyor's and of Megatron-Core's (the reference environment).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "conveyor/cli/cli_testing.h"
#include "conveyor/common/reference_env_testing.h"
#include "conveyor/data/indexed_dataset.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

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
  EXPECT_EQ(checked.out,
            "data set " + dir + "/set: 4 documents, 25 tokens (uint16); every token in [0, 256)\n");
  // 0xC3 of the 'é' is the first token past a vocabulary of 128, named as train names it.
  const Result outside = Conveyor("data check " + dir + "/set --vocab 128");
  EXPECT_EQ(outside.code, 1);
  EXPECT_EQ(outside.err, "conveyor: error: " + dir +
                             "/set: document 2, token 3 is 195, outside the model's vocabulary "
                             "[0, 128)\n");
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
  EXPECT_NE(missing.err.find(dir + "/nothing is neither a data set (" + dir + "/nothing.bin and " +
                             dir + "/nothing.idx) nor a token file"),
            std::string::npos)
      << missing.err;
}

// `data check` opens data as train does: every index train refuses (a dtype that is not the
// .bin's, a sequence cut to nothing, two sequences' pointers swapped), check refuses with the
// very same line; a sound set passes both.
TEST(CliTest, DataCheckRefusesWhatTrainRefusesWithItsMessage) {
  const std::string dir = ScratchWithCorpus("data_check_as_train");
  std::string blocks;
  for (int i = 0; i < 40; ++i) blocks += "block " + std::to_string(i) + " of a few words\n\n";
  WriteInput(dir, "blocks.txt", blocks);
  ASSERT_EQ(Conveyor("data prepare --input " + dir + "/blocks.txt --blank-line-blocks --out " +
                     dir + "/good")
                .code,
            0);
  const std::string bin = ReadAll(dir + "/good.bin"), idx = ReadAll(dir + "/good.idx");
  const size_t lengths = 34, pointers = 34 + 4 * 40;  // 40 sequences
  std::map<std::string, std::string> broken;
  broken["dtype1"] = idx;
  broken["dtype1"][17] = 1;  // uint8 over uint16 tokens
  broken["empty"] = idx;
  std::fill_n(broken["empty"].begin() + lengths + 4 * 3, 4, '\0');  // sequence 3: 0 tokens
  broken["swapped"] = idx;
  std::swap_ranges(broken["swapped"].begin() + pointers + 8,
                   broken["swapped"].begin() + pointers + 16,
                   broken["swapped"].begin() + pointers + 16);
  const std::string train =
      "train --model llama --layers 2 --hidden 32 --heads 4 --seq-len 16 --batch-size 4 "
      "--microbatches 2 --steps 1 --sample-tokens 0 --split 90,10,0 --data ";
  const Result good_check = Conveyor("data check " + dir + "/good");
  EXPECT_EQ(good_check.code, 0) << good_check.err;
  const Result good_train = Conveyor(train + dir + "/good");
  EXPECT_EQ(good_train.code, 0) << good_train.err;
  for (const auto& [name, bytes] : broken) {
    const std::string prefix = dir + "/" + name;
    WriteInput(dir, name + ".bin", bin);
    WriteInput(dir, name + ".idx", bytes);
    const Result check = Conveyor("data check " + prefix);
    const Result trained = Conveyor(train + prefix);
    EXPECT_EQ(check.code, 1) << name << ": " << check.out;
    EXPECT_EQ(trained.code, 1) << name << ": " << trained.out;
    EXPECT_EQ(Lines(check.err), 1) << check.err;
    EXPECT_NE(check.err.find(prefix + ": "), std::string::npos) << check.err;
    EXPECT_EQ(check.err, trained.err) << name;
  }
}

// `data prepare` never reads what it is writing: an input that is one of the outputs, under
// its own name or another (a link, a path through ..), is refused and left as it was.
TEST(CliTest, DataPrepareRefusesAnInputThatIsItsOutput) {
  const std::string dir = ScratchWithCorpus("data_prepare_self");
  ASSERT_EQ(Conveyor("data prepare --input " + dir + "/corpus.txt --out " + dir + "/set").code, 0);
  const std::string bin = ReadAll(dir + "/set.bin"), idx = ReadAll(dir + "/set.idx");
  std::filesystem::create_symlink(dir + "/set.idx", dir + "/link.txt");
  for (const auto& [input, out] :
       {std::pair{dir + "/set.bin", dir + "/set"}, std::pair{dir + "/link.txt", dir + "/set"},
        std::pair{dir + "/set.bin", dir + "/../" + fs::path(dir).filename().string() + "/set"}}) {
    const Result r =
        Conveyor("data prepare --input " + dir + "/corpus.txt " + input + " --out " + out);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_EQ(Lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("--input " + input + " is the output " + out + "."), std::string::npos)
        << r.err;
  }
  EXPECT_EQ(ReadAll(dir + "/set.bin"), bin);
  EXPECT_EQ(ReadAll(dir + "/set.idx"), idx);
}

// A folder, a loop of links or a link to nothing where a file is read: one line naming the
// flag and the path, never the standard library's "basic_filebuf::underflow" or "filesystem
// error".
TEST(CliTest, PathsThatNameNoReadableFileAreOneLineNamingTheFlag) {
  const std::string dir = ScratchWithCorpus("bad_paths");
  const std::string loop = dir + "/loop";
  std::filesystem::create_symlink(loop, loop);
  std::filesystem::create_directory(dir + "/folder");
  const std::string model = "--model llama --layers 2 --hidden 32 --heads 4 --seq-len 16 ";
  for (const auto& [args, line] : {
           std::pair{"train --steps 1 --data " + loop,
                     "--data " + loop + ": its symbolic links loop (or nest too deep)"},
           std::pair{"eval " + model + "--data " + loop,
                     "--data " + loop + ": its symbolic links loop (or nest too deep)"},
           std::pair{"data prepare --input " + dir + "/folder --out " + dir + "/x",
                     "--input " + dir + "/folder: is a directory, expected a file"},
           std::pair{"tokenizer train --input " + dir + "/folder --vocab-size 300 --out " + dir +
                         "/t.model",
                     "--input " + dir + "/folder: is a directory, expected a file"},
           std::pair{"train " + dir + "/folder --steps 1",
                     "config file " + dir + "/folder: is a directory, expected a file"},
           std::pair{"train --steps 1 --model " + loop,
                     "--model " + loop + ": its symbolic links loop (or nest too deep)"},
           std::pair{"train --steps 1 --resume " + loop,
                     "--resume " + loop + ": its symbolic links loop (or nest too deep)"},
       }) {
    const Result r = Conveyor(args);
    EXPECT_EQ(r.code, 1) << args;
    EXPECT_EQ(Lines(r.err), 1) << args << ": " << r.err;
    EXPECT_NE(r.err.find("conveyor: error: " + line), std::string::npos) << args << ": " << r.err;
  }
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

// Supervised data: prompt/completion lines prepare into a data set that stays a plain one
// (data check reads it) and a loss mask beside it; train, with packed documents kept apart,
// and eval count only the completions and their ends; bad lines are refused in one line
// naming file and line, with nothing written.
TEST(CliTest, SupervisedDataPreparesTrainsAndEvaluatesOnlyItsCompletions) {
  const std::string dir = ScratchWithCorpus("supervised");
  std::string lines;
  int64_t targets = 0;
  for (int i = 0; i < 80; ++i) {
    const std::string completion = " the answer is " + std::to_string(i * 7) + ".";
    lines += "{\"prompt\": \"What is " + std::to_string(i) + " times 7?\", \"completion\": \"" +
             completion + "\"}\n";
    targets += static_cast<int64_t>(completion.size()) + 1;  // and the document's end
  }
  const std::string input = WriteInput(dir, "sft.jsonl", lines);
  const Result prepared =
      Conveyor("data prepare --supervised --input " + input + " --out " + dir + "/sft");
  ASSERT_EQ(prepared.code, 0) << prepared.err;
  EXPECT_NE(prepared.out.find("sft_loss_mask.idx: the loss mask, " + std::to_string(targets) +
                              " of the "),
            std::string::npos)
      << prepared.out;
  const IndexedDataset mask(dir + "/sft_loss_mask");
  EXPECT_EQ(mask.dtype().code, 1);  // uint8
  EXPECT_EQ(mask.num_documents(), 80);
  const Result check = Conveyor("data check " + dir + "/sft --vocab 256");
  EXPECT_EQ(check.code, 0) << check.err;
  const std::string model =
      "--model llama --layers 2 --hidden 32 --heads 4 --kv-heads 2 --seq-len 32 --batch-size 4 "
      "--microbatches 2 --data " +
      dir + "/sft ";
  const Result train = Conveyor("train " + model +
                                "--steps 3 --pp 2 --document-mask --eval-every 0 --sample-tokens "
                                "0 --split 90,10,0 --metrics " + dir + "/m.json");
  ASSERT_EQ(train.code, 0) << train.err;
  EXPECT_NE(train.out.find("; targets by its loss mask " + dir + "/sft_loss_mask; documents kept "
                           "apart (--document-mask)"),
            std::string::npos)
      << train.out;
  for (const std::string& flags : {std::string(), std::string("--document-mask --pp 2")}) {
    const Result eval = Conveyor("eval " + model + "--format json " + flags);
    ASSERT_EQ(eval.code, 0) << flags << ": " << eval.err;
    const auto result = nlohmann::json::parse(eval.out);
    EXPECT_EQ(result["targets"].get<int64_t>(), targets) << flags;
    EXPECT_EQ(result["loss_mask"], true);
    EXPECT_EQ(result["document_mask"], !flags.empty());
  }
  const Result text = Conveyor("eval " + model);
  EXPECT_NE(text.out.find(std::to_string(targets) + " targets predicted"), std::string::npos)
      << text.out;
  // One line each for what cannot become an example.
  for (const auto& [body, error] : std::vector<std::pair<std::string, std::string>>{
           {"{\"prompt\": \"a\", \"completion\": \"b\"}\n{\"prompt\": \"q\"}\n",
            "bad.jsonl, line 2: no \"completion\" in this line's object"},
           {"{\"prompt\": \"q\", \"completion\": \"\"}\n",
            "bad.jsonl, line 1: the completion tokenizes to no token"},
           {"{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n",
            "needs a template to become tokens: --chat-template llama2"}}) {
    const std::string bad = WriteInput(dir, "bad.jsonl", body);
    const Result r = Conveyor("data prepare --supervised --input " + bad + " --out " + dir + "/bad");
    EXPECT_EQ(r.code, 1) << body;
    EXPECT_NE(r.err.find(error), std::string::npos) << r.err;
    EXPECT_EQ(Lines(r.err), 1) << r.err;
    EXPECT_FALSE(fs::exists(dir + "/bad.idx") || fs::exists(dir + "/bad_loss_mask.idx"));
  }
  const Result chat = Conveyor("data prepare --chat-template chatml --input " + input + " --out " +
                               dir + "/bad");
  EXPECT_NE(chat.err.find("--chat-template 'chatml' is not one conveyor has"), std::string::npos)
      << chat.err;
  const Result document_mask_on_text = Conveyor(
      "train --model llama --layers 2 --steps 1 --document-mask --data " + dir + "/corpus.txt");
  EXPECT_NE(document_mask_on_text.err.find("--document-mask needs a tokenized data set"),
            std::string::npos)
      << document_mask_on_text.err;
}

// eval reads every token of the data it is given: a data set too small for the default
// split's validation part (which train refuses) is evaluated whole; --split is refused there.
TEST(CliTest, EvalReadsEveryTokenOfADataSetWhateverItsSplit) {
  const std::string dir = ScratchWithCorpus("eval_whole");
  std::string blocks;
  for (int i = 0; i < 7; ++i) blocks += "document number " + std::to_string(i) + " of text\n\n";
  WriteInput(dir, "blocks.txt", blocks);
  ASSERT_EQ(Conveyor("data prepare --input " + dir + "/blocks.txt --blank-line-blocks --out " +
                     dir + "/small")
                .code,
            0);
  const std::string model =
      "--model llama --layers 2 --hidden 32 --heads 4 --seq-len 16 --batch-size 4 "
      "--microbatches 2 --data " +
      dir + "/small ";
  const Result trained = Conveyor("train " + model + "--steps 1");
  EXPECT_EQ(trained.code, 1);
  EXPECT_NE(trained.err.find("the validation split (0 of 7 documents) holds 0 tokens"),
            std::string::npos)
      << trained.err;
  const Result eval = Conveyor("eval " + model + "--format json");
  ASSERT_EQ(eval.code, 0) << eval.err;
  // 7 documents of "document number i of text" and a newline: every token but the first.
  EXPECT_EQ(nlohmann::json::parse(eval.out)["tokens"].get<int64_t>(), 7 * 26 - 1) << eval.out;
  const Result split = Conveyor("eval " + model + "--split 0,1,0");
  EXPECT_EQ(split.code, 1);
  EXPECT_EQ(split.err,
            "conveyor: error: eval reads every token of --data, not a split of it: --split 0,1,0 "
            "does not apply (to evaluate a part, prepare that part as a data set of its own)\n");
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
       {std::pair{"-1 " + dir + "/set 2 " + dir + "/llmc.bin",
                  std::string("is not a finite number >= 0")},
        std::pair{"0 " + dir + "/set 0 " + dir + "/llmc.bin", std::string("the weights sum to 0")},
        std::pair{"1e308 " + dir + "/set 1e308 " + dir + "/llmc.bin",
                  std::string("the weights sum past the largest number (inf)")},
        std::pair{"1 " + dir + "/set 1 " + dir + "/missing",
                  dir + "/missing in the blend is neither a data set"}}) {
    const Result bad = Conveyor(job + data);
    EXPECT_EQ(bad.code, 1) << data;
    EXPECT_NE(bad.err.find(words), std::string::npos) << bad.err;
  }
}

// Runs testdata/reference/megatron_core_indexed.py on the steps of `job` in `dir`; its
// results, one a step.
nlohmann::json RunMegatronCore(const std::string& dir, const nlohmann::json& job) {
  std::ofstream(dir + "/job.json") << job.dump();
  const ReferenceRun run =
      RunReferenceScript("megatron_core_indexed.py", dir + "/job.json " + dir + "/out.json");
  EXPECT_TRUE(run.ok()) << run.output;
  if (!run.ok()) return nlohmann::json::array();
  return nlohmann::json::parse(std::ifstream(dir + "/out.json"));
}

// Data sets written by Megatron-Core's IndexedDatasetBuilder in both dtypes it picks (uint16
// for a vocabulary of 256, int32 for 70000: a model for those is a Hugging Face Llama folder
// transformers saved) are checked, trained on and evaluated; their tokens are the ones
// written: data check finds the first one outside a smaller vocabulary at its place, and eval
// gives the loss of the same documents written by conveyor.
TEST(CliTest, TrainAndEvalReadDataSetsMegatronCoreWrote) {
  CONVEYOR_SKIP_WITHOUT_REFERENCE_ENV();
  const std::string dir = ScratchDir("megatron_core");
  const auto documents = [](int64_t vocab) {
    std::vector<std::vector<int64_t>> documents(60);
    for (int64_t j = 0; j < 60; ++j) {
      for (int64_t k = 0; k < 10 + j % 13; ++k) {
        documents[j].push_back((j * 7919 + k * 104729 + 3) % vocab);
      }
    }
    return documents;
  };
  nlohmann::json job = {{{"hf_llama", dir + "/llama70k"}, {"vocab", 70000}}};
  for (const auto& [name, vocab] : {std::pair{"small", 256}, std::pair{"large", 70000}}) {
    nlohmann::json theirs = nlohmann::json::array();
    IndexedDatasetWriter ours(dir + "/our_" + name, vocab);
    for (const auto& d : documents(vocab)) {
      theirs.push_back({d});
      ours.AddDocument(d);
    }
    ours.Finish();
    job.push_back({{"write", dir + "/" + name}, {"vocab", vocab}, {"documents", theirs}});
  }
  ASSERT_EQ(RunMegatronCore(dir, job).size(), 3u);
  const std::string byte_llama =
      "--model llama --layers 2 --hidden 32 --heads 4 --kv-heads 2 --seq-len 16 ";
  const std::string folder_llama = "--model " + dir + "/llama70k --seq-len 16 ";
  const std::string windows = "--batch-size 4 --microbatches 2 ";
  for (const auto& [name, vocab, model, dtype] :
       {std::tuple{"small", 256, byte_llama, "uint16"},
        std::tuple{"large", 70000, folder_llama, "int32"}}) {
    SCOPED_TRACE(name);
    const std::string prefix = dir + "/" + name;
    int64_t tokens = 0;
    for (const auto& d : documents(vocab)) tokens += static_cast<int64_t>(d.size());
    const Result checked = Conveyor("data check " + prefix + " --vocab " + std::to_string(vocab));
    ASSERT_EQ(checked.code, 0) << checked.err;
    EXPECT_EQ(checked.out, "data set " + prefix + ": 60 documents, " + std::to_string(tokens) +
                               " tokens (" + dtype + "); every token in [0, " +
                               std::to_string(vocab) + ")\n");
    const Result trained = Conveyor("train " + model + windows +
                                    "--steps 3 --eval-every 0 --sample-tokens 0 --split 80,20,0 "
                                    "--metrics " +
                                    dir + "/" + name + ".json --data " + prefix);
    ASSERT_EQ(trained.code, 0) << trained.err;
    const auto metrics = nlohmann::json::parse(std::ifstream(dir + "/" + name + ".json"));
    ASSERT_EQ(metrics["steps"].size(), 3u);
    for (const auto& step : metrics["steps"]) {
      EXPECT_TRUE(std::isfinite(step["loss"].get<double>())) << step.dump();
    }
    const Result theirs = Conveyor("eval " + model + windows + "--format json --data " + prefix);
    const Result ours =
        Conveyor("eval " + model + windows + "--format json --data " + dir + "/our_" + name);
    ASSERT_EQ(theirs.code, 0) << theirs.err;
    ASSERT_EQ(ours.code, 0) << ours.err;
    const auto a = nlohmann::json::parse(theirs.out), b = nlohmann::json::parse(ours.out);
    EXPECT_EQ(a["tokens"].get<int64_t>(), tokens - 1);  // every token but the first predicted
    EXPECT_EQ(a["tokens"], b["tokens"]);
    EXPECT_EQ(a["loss"], b["loss"]);
  }
  // The int32 tokens as written, at their place: the first one past 255 is named.
  std::string first;
  const auto large = documents(70000);
  for (size_t j = 0; j < large.size() && first.empty(); ++j) {
    for (size_t k = 0; k < large[j].size() && first.empty(); ++k) {
      if (large[j][k] >= 256) {
        first = "document " + std::to_string(j) + ", token " + std::to_string(k) + " is " +
                std::to_string(large[j][k]);
      }
    }
  }
  const Result outside = Conveyor("data check " + dir + "/large --vocab 256");
  EXPECT_EQ(outside.code, 1);
  EXPECT_NE(outside.err.find(first + ", outside the model's vocabulary [0, 256)"),
            std::string::npos)
      << outside.err;
}

}  // namespace
}  // namespace conveyor
