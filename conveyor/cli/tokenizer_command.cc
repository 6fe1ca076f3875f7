#include "conveyor/cli/tokenizer_command.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "conveyor/common/error.h"
#include "conveyor/data/byte_tokenizer.h"
#include "conveyor/data/load_tokenizer.h"
#include "conveyor/data/sentencepiece_tokenizer.h"
#include "conveyor/data/tokenizer.h"

namespace conveyor {

void AddTokenizerCommand(CLI::App& app) {
  struct TokenizerFlags {
    SentencePieceTrainOptions train;
    std::string out, tokenizer, text;
  };
  auto flags = std::make_shared<TokenizerFlags>();
  CLI::App* tokenizer =
      app.add_subcommand("tokenizer", "SentencePiece tokenizers: train one, encode, decode");
  tokenizer->require_subcommand(1);

  CLI::App* train = tokenizer->add_subcommand(
      "train", "train a SentencePiece tokenizer on text or JSON Lines files");
  train->add_option("--input", flags->train.inputs, "text or JSON Lines (.jsonl) files")
      ->required()
      ->expected(1, -1);
  train->add_option("--vocab-size", flags->train.vocab_size, "pieces in the vocabulary")
      ->capture_default_str();
  train->add_option("--model-type", flags->train.model_type, "bpe or unigram")
      ->check(CLI::IsMember({"bpe", "unigram"}))
      ->capture_default_str();
  train->add_option("--out", flags->out, "the model file to write (tokenizer.model)")->required();
  train->add_option("--json-key", flags->train.json_key,
                    "read every input as JSON Lines, the document under this key");
  train
      ->add_option("--max-sentences", flags->train.max_sentences,
                   "train on at most this many lines (the first ones)")
      ->capture_default_str();
  train->add_option("--threads", flags->train.threads, "trainer threads (0: every core)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  train->callback([flags] {
    const auto start = std::chrono::steady_clock::now();
    const int64_t sentences = TrainSentencePiece(flags->train, flags->out);
    const SentencePieceTokenizer trained(flags->out);
    std::printf(
        "wrote %s: a %s model of %lld pieces (bos %lld, eos %lld) from %lld lines in "
        "%.1f s\n",
        flags->out.c_str(), flags->train.model_type.c_str(),
        static_cast<long long>(trained.vocab_size()), static_cast<long long>(trained.bos_id()),
        static_cast<long long>(trained.eos_id()), static_cast<long long>(sentences),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  });

  CLI::App* encode = tokenizer->add_subcommand("encode", "print the token ids of a text");
  encode->add_option("--tokenizer", flags->tokenizer, "bytes, or a SentencePiece model")
      ->required();
  encode->add_option("text", flags->text, "the text")->required();
  encode->callback([flags] {
    const std::unique_ptr<Tokenizer> tokenizer = LoadTokenizer(flags->tokenizer);
    std::string ids;
    for (int64_t id : tokenizer->Encode(flags->text)) {
      ids += (ids.empty() ? "" : ",") + std::to_string(id);
    }
    std::printf("%s\n", ids.c_str());
  });

  CLI::App* decode = tokenizer->add_subcommand("decode", "print the text of token ids");
  decode->add_option("--tokenizer", flags->tokenizer, "bytes, or a SentencePiece model")
      ->required();
  decode->add_option("ids", flags->text, "comma-separated ids")->required();
  decode->callback([flags] {
    const std::unique_ptr<Tokenizer> tokenizer = LoadTokenizer(flags->tokenizer);
    const std::vector<int64_t> ids = ParseTokenIds(flags->text, tokenizer->vocab_size(), "ids");
    std::printf("%s\n", ByteTokenizer::Printable(tokenizer->Decode(ids)).c_str());
  });
}

}  // namespace conveyor
