#include "conveyor/cli/data_command.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/common/input_path.h"
#include "conveyor/data/indexed_dataset.h"
#include "conveyor/data/load_tokenizer.h"
#include "conveyor/data/open_token_source.h"
#include "conveyor/data/supervised_documents.h"
#include "conveyor/data/text_documents.h"
#include "conveyor/data/tokenizer.h"

namespace conveyor {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Progress of a prepare on stderr: redrawn in place on a terminal, otherwise a line at every
// tenth of the input.
class PrepareProgress {
 public:
  explicit PrepareProgress(uintmax_t total_bytes)
      : total_(total_bytes), terminal_(isatty(STDERR_FILENO)), start_(Clock::now()) {}

  void Update(uintmax_t bytes, int64_t tokens, int64_t documents) {
    const int tenth = total_ > 0 ? static_cast<int>(10 * bytes / total_) : 10;
    const auto now = Clock::now();
    if (terminal_ ? now - shown_ < std::chrono::milliseconds(200) : tenth <= tenth_) return;
    shown_ = now;
    tenth_ = tenth;
    const double seconds = std::max(SecondsSince(start_), 1e-9);
    std::fprintf(stderr,
                 "%sprepare: %.1f of %.1f MB of text, %.1f MB/s, %lld tokens, %lld documents%s",
                 terminal_ ? "\r" : "", bytes / 1e6, total_ / 1e6, bytes / 1e6 / seconds,
                 static_cast<long long>(tokens), static_cast<long long>(documents),
                 terminal_ ? "   " : "\n");
  }
  void Finish() {
    if (terminal_) std::fputc('\n', stderr);
  }

 private:
  uintmax_t total_;
  bool terminal_;
  Clock::time_point start_, shown_{};
  int tenth_ = 0;
};

// Tokenizes `documents` on `threads` threads by `encode`: document i by thread i mod threads.
template <typename Document>
std::vector<MaskedTokens> EncodeAll(const std::vector<Document>& documents, int threads,
                                    const std::function<MaskedTokens(const Document&)>& encode) {
  std::vector<MaskedTokens> tokens(documents.size());
  auto encode_from = [&](size_t first) {
    for (size_t i = first; i < documents.size(); i += threads) tokens[i] = encode(documents[i]);
  };
  std::vector<std::thread> workers;
  // A failure on a worker (a document the library cannot encode) is the prepare's.
  std::vector<std::exception_ptr> errors(threads);
  for (int t = 1; t < threads; ++t) {
    workers.emplace_back([&, t] {
      try {
        encode_from(t);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  }
  try {
    encode_from(0);
  } catch (...) {
    errors[0] = std::current_exception();
  }
  for (std::thread& worker : workers) worker.join();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  return tokens;
}

struct PrepareOptions {
  TextDocumentOptions documents;
  // Supervised examples (supervised_documents.h): PREFIX_loss_mask is written beside.
  bool supervised = false;
  ChatTemplate chat_template = ChatTemplate::kNone;
  int threads = 0;
};

void Prepare(const std::vector<std::string>& inputs, const std::string& out,
             const std::string& tokenizer_spec, const PrepareOptions& options) {
  std::vector<std::string> outputs = {out + ".bin", out + ".idx"};
  if (options.supervised) {
    outputs.push_back(LossMaskPrefix(out) + ".bin");
    outputs.push_back(LossMaskPrefix(out) + ".idx");
  }
  uintmax_t total = 0;
  for (const std::string& input : inputs) {
    CheckInputPath("--input", input, PathKind::kFile);
    // The same file under another name (a link, ../x.bin) too: it would be read as it is
    // replaced.
    for (const std::string& output : outputs) {
      std::error_code error;
      CONVEYOR_CHECK(!std::filesystem::equivalent(input, output, error))
          << "--input " << input << " is the output " << output << " of --out " << out
          << ": writing it would replace what is being read; give --out another PREFIX";
    }
    std::error_code error;
    const uintmax_t size = std::filesystem::file_size(input, error);
    CONVEYOR_CHECK(!error) << "--input " << input << ": " << error.message();
    total += size;
  }
  const std::unique_ptr<Tokenizer> tokenizer = LoadTokenizer(tokenizer_spec);
  tokenizer->end_of_document();  // refuses a tokenizer without one before any work
  const int threads = options.threads > 0
                          ? options.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const auto start = Clock::now();
  IndexedDatasetWriter writer(out, tokenizer->vocab_size());
  std::optional<IndexedDatasetWriter> mask_writer;
  if (options.supervised) mask_writer.emplace(LossMaskPrefix(out), 2, ByteDtype());
  int64_t targets = 0;
  PrepareProgress progress(total);
  uintmax_t read = 0;
  // Documents are tokenized a chunk at a time (about 4 MB of text a thread), written in order.
  const size_t chunk_bytes = (size_t{4} << 20) * threads;
  size_t chunk_size = 0;
  auto write = [&](const std::vector<MaskedTokens>& encoded) {
    for (const MaskedTokens& document : encoded) {
      writer.AddDocument(document.tokens);
      if (mask_writer) {
        mask_writer->AddDocument(document.targets);
        for (int64_t t : document.targets) targets += t;
      }
    }
    read += chunk_size;
    chunk_size = 0;
    progress.Update(read, writer.tokens(), writer.documents());
  };
  if (options.supervised) {
    std::vector<SupervisedDocument> chunk;
    const std::function<MaskedTokens(const SupervisedDocument&)> encode =
        [&](const SupervisedDocument& d) { return EncodeSupervised(*tokenizer, d); };
    auto flush = [&] {
      write(EncodeAll(chunk, threads, encode));
      chunk.clear();
    };
    for (const std::string& input : inputs) {
      ForEachSupervisedDocument(input, options.chat_template, [&](SupervisedDocument&& d) {
        chunk_size += d.line_bytes;
        chunk.push_back(std::move(d));
        if (chunk_size >= chunk_bytes) flush();
      });
    }
    flush();
  } else {
    std::vector<std::string> chunk;
    const std::function<MaskedTokens(const std::string&)> encode = [&](const std::string& d) {
      return MaskedTokens{DocumentTokens(*tokenizer, d), {}};
    };
    auto flush = [&] {
      write(EncodeAll(chunk, threads, encode));
      chunk.clear();
    };
    for (const std::string& input : inputs) {
      ForEachDocument(input, options.documents, [&](std::string_view document) {
        chunk.emplace_back(document);
        chunk_size += document.size();
        if (chunk_size >= chunk_bytes) flush();
      });
    }
    flush();
  }
  CONVEYOR_CHECK(writer.documents() > 0) << "the inputs hold no document: nothing written";
  writer.Finish();
  if (mask_writer) mask_writer->Finish();
  progress.Finish();
  const double seconds = SecondsSince(start);
  std::printf(
      "wrote %s.bin and %s.idx: %lld documents, %lld tokens (%s) by %s, %.1f MB of text in "
      "%.1f s (%.1f MB/s, %d threads)\n",
      out.c_str(), out.c_str(), static_cast<long long>(writer.documents()),
      static_cast<long long>(writer.tokens()), TokenDtypeFor(tokenizer->vocab_size()).name,
      tokenizer->Describe().c_str(), read / 1e6, seconds, read / 1e6 / std::max(seconds, 1e-9),
      threads);
  if (mask_writer) {
    std::printf("wrote %s.bin and %s.idx: the loss mask, %lld of the %lld tokens are targets\n",
                LossMaskPrefix(out).c_str(), LossMaskPrefix(out).c_str(),
                static_cast<long long>(targets), static_cast<long long>(writer.tokens()));
  }
}

// Opens and reads the data as train and eval do (OpenTokenSource, CheckTokens): whatever they
// refuse, this refuses with their message.
void Check(const std::string& path, int64_t vocab) {
  const std::shared_ptr<const TokenSource> data = OpenTokenSource(path);
  if (vocab > 0) CheckEveryToken(*data, vocab);
  std::printf("%s%s\n", data->Describe().c_str(),
              vocab > 0 ? ("; every token in [0, " + std::to_string(vocab) + ")").c_str() : "");
}

}  // namespace

void AddDataCommand(CLI::App& app) {
  struct DataFlags {
    std::vector<std::string> inputs;
    std::string out, tokenizer = "bytes", prefix;
    PrepareOptions prepare;
    std::string chat_template = "none";
    int64_t vocab = 0;
  };
  auto flags = std::make_shared<DataFlags>();
  CLI::App* data = app.add_subcommand("data", "tokenized data sets: prepare and check them");
  data->require_subcommand(1);
  CLI::App* prepare = data->add_subcommand(
      "prepare", "tokenize text or JSON Lines files into a Megatron indexed data set");
  prepare->add_option("--input", flags->inputs, "text or JSON Lines (.jsonl) files, in order")
      ->required()
      ->expected(1, -1);
  prepare->add_option("--out", flags->out, "PREFIX: writes PREFIX.bin and PREFIX.idx")->required();
  prepare
      ->add_option("--tokenizer", flags->tokenizer,
                   "bytes (one token per byte), or a SentencePiece tokenizer.model")
      ->capture_default_str();
  prepare->add_option("--threads", flags->prepare.threads, "tokenizing threads (0: every core)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  prepare->add_option("--json-key", flags->prepare.documents.json_key,
                      "read every input as JSON Lines, the document under this key (default: "
                      ".jsonl files, key \"text\")");
  prepare->add_flag("--blank-line-blocks", flags->prepare.documents.blank_line_blocks,
                    "plain text: every block between blank lines is a document (default: "
                    "every file is one)");
  prepare->add_flag("--supervised", flags->prepare.supervised,
                    "JSON Lines of {\"prompt\", \"completion\"} (or, with --chat-template, "
                    "{\"messages\"}) examples: only completions are targets; writes "
                    "PREFIX_loss_mask.bin/.idx beside, which train and eval read");
  prepare
      ->add_option("--chat-template", flags->chat_template,
                   "none, or llama2: the [INST] form a \"messages\" list becomes (implies "
                   "--supervised)")
      ->capture_default_str();
  prepare->callback([flags] {
    PrepareOptions options = flags->prepare;
    options.chat_template = ParseChatTemplate(flags->chat_template);
    if (options.chat_template != ChatTemplate::kNone) options.supervised = true;
    CONVEYOR_CHECK(!options.supervised || (options.documents.json_key.empty() &&
                                           !options.documents.blank_line_blocks))
        << "--supervised reads JSON Lines of examples; --json-key and --blank-line-blocks are "
           "for text documents";
    Prepare(flags->inputs, flags->out, flags->tokenizer, options);
  });
  CLI::App* check = data->add_subcommand(
      "check",
      "check a data set (PREFIX.bin, PREFIX.idx) or token file (.bin) as train reads it, and "
      "count it");
  check
      ->add_option("prefix", flags->prefix,
                   "PREFIX of PREFIX.bin and PREFIX.idx, or an llm.c / nanoGPT token file")
      ->required();
  check->add_option("--vocab", flags->vocab, "also check every token against [0, N)")
      ->check(CLI::NonNegativeNumber);
  check->callback([flags] { Check(flags->prefix, flags->vocab); });
}

}  // namespace conveyor
