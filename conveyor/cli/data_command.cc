#include "conveyor/cli/data_command.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/common/input_path.h"
#include "conveyor/data/indexed_dataset.h"
#include "conveyor/data/load_tokenizer.h"
#include "conveyor/data/open_token_source.h"
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

// Tokenizes `documents` on `threads` threads: document i by thread i mod threads.
std::vector<std::vector<int64_t>> EncodeAll(const Tokenizer& tokenizer,
                                            const std::vector<std::string>& documents,
                                            int threads) {
  std::vector<std::vector<int64_t>> tokens(documents.size());
  auto encode = [&](size_t first) {
    for (size_t i = first; i < documents.size(); i += threads) {
      tokens[i] = DocumentTokens(tokenizer, documents[i]);
    }
  };
  std::vector<std::thread> workers;
  // A failure on a worker (a document the library cannot encode) is the prepare's.
  std::vector<std::exception_ptr> errors(threads);
  for (int t = 1; t < threads; ++t) {
    workers.emplace_back([&, t] {
      try {
        encode(t);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  }
  try {
    encode(0);
  } catch (...) {
    errors[0] = std::current_exception();
  }
  for (std::thread& worker : workers) worker.join();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  return tokens;
}

void Prepare(const std::vector<std::string>& inputs, const std::string& out,
             const std::string& tokenizer_spec, const TextDocumentOptions& options, int threads) {
  uintmax_t total = 0;
  for (const std::string& input : inputs) {
    CheckInputPath("--input", input, PathKind::kFile);
    // The same file under another name (a link, ../x.bin) too: it would be read as it is
    // replaced.
    for (const std::string& output : {out + ".bin", out + ".idx"}) {
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
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const auto start = Clock::now();
  IndexedDatasetWriter writer(out, tokenizer->vocab_size());
  PrepareProgress progress(total);
  uintmax_t read = 0;
  // Documents are tokenized a chunk at a time (about 4 MB of text a thread), written in order.
  const size_t chunk_bytes = (size_t{4} << 20) * threads;
  std::vector<std::string> chunk;
  size_t chunk_size = 0;
  auto flush = [&] {
    for (const std::vector<int64_t>& tokens : EncodeAll(*tokenizer, chunk, threads)) {
      writer.AddDocument(tokens);
    }
    read += chunk_size;
    chunk.clear();
    chunk_size = 0;
    progress.Update(read, writer.tokens(), writer.documents());
  };
  for (const std::string& input : inputs) {
    ForEachDocument(input, options, [&](std::string_view document) {
      chunk.emplace_back(document);
      chunk_size += document.size();
      if (chunk_size >= chunk_bytes) flush();
    });
  }
  flush();
  CONVEYOR_CHECK(writer.documents() > 0) << "the inputs hold no document: nothing written";
  writer.Finish();
  progress.Finish();
  const double seconds = SecondsSince(start);
  std::printf(
      "wrote %s.bin and %s.idx: %lld documents, %lld tokens (%s) by %s, %.1f MB of text in "
      "%.1f s (%.1f MB/s, %d threads)\n",
      out.c_str(), out.c_str(), static_cast<long long>(writer.documents()),
      static_cast<long long>(writer.tokens()), TokenDtypeFor(tokenizer->vocab_size()).name,
      tokenizer->Describe().c_str(), read / 1e6, seconds, read / 1e6 / std::max(seconds, 1e-9),
      threads);
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
    TextDocumentOptions documents;
    int64_t vocab = 0;
    int threads = 0;
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
  prepare->add_option("--threads", flags->threads, "tokenizing threads (0: every core)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  prepare->add_option("--json-key", flags->documents.json_key,
                      "read every input as JSON Lines, the document under this key (default: "
                      ".jsonl files, key \"text\")");
  prepare->add_flag("--blank-line-blocks", flags->documents.blank_line_blocks,
                    "plain text: every block between blank lines is a document (default: "
                    "every file is one)");
  prepare->callback([flags] {
    Prepare(flags->inputs, flags->out, flags->tokenizer, flags->documents, flags->threads);
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
