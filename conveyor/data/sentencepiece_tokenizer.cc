#include "conveyor/data/sentencepiece_tokenizer.h"

#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <thread>
#include <unordered_map>

#include "conveyor/common/atomic_file.h"
#include "conveyor/common/error.h"
#include "conveyor/data/sentencepiece_plugin.h"
#include "conveyor/data/text_documents.h"

namespace conveyor {
namespace {

// The plugin's functions (sentencepiece_plugin.h), loaded once per process.
struct Plugin {
  std::string error;  // why it could not be loaded; empty when it was
  ConveyorSpmLoad load = nullptr;
  ConveyorSpmFree free = nullptr;
  ConveyorSpmInfo info = nullptr;
  ConveyorSpmEncode encode = nullptr;
  ConveyorSpmDecode decode = nullptr;
  ConveyorSpmTrain train = nullptr;
};

// Where the plugin may be: where this build put it, else beside the running binary's
// folder (bin/../lib), for a build folder that moved.
std::vector<std::string> PluginPaths() {
  std::vector<std::string> paths;
#ifdef CONVEYOR_SENTENCEPIECE_PLUGIN
  paths.push_back(CONVEYOR_SENTENCEPIECE_PLUGIN);
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    paths.push_back((self.parent_path().parent_path() / "lib" /
                     std::filesystem::path(CONVEYOR_SENTENCEPIECE_PLUGIN).filename())
                        .string());
  }
#endif
  return paths;
}

const Plugin& LoadPlugin() {
  static const Plugin plugin = [] {
    Plugin p;
    const std::vector<std::string> paths = PluginPaths();
    if (paths.empty()) {
      p.error =
          "this conveyor was built without SentencePiece (Debian's libsentencepiece-dev was not "
          "found at build time): install it and build again";
      return p;
    }
    void* handle = nullptr;
    std::string tried;
    for (const std::string& path : paths) {
      // RTLD_DEEPBIND: the library's protobuf apart from libtorch's (the plugin's header).
      handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (handle != nullptr) break;
      const char* reason = dlerror();
      tried += "; " + path + ": " + (reason != nullptr ? reason : "cannot be loaded");
    }
    if (handle == nullptr) {
      p.error = "cannot load conveyor's SentencePiece plugin" + tried;
      return p;
    }
    auto find = [&](auto& function, const char* name) {
      function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(handle, name));
      if (function == nullptr && p.error.empty()) {
        p.error = "conveyor's SentencePiece plugin lacks ";
        p.error += name;
      }
    };
    find(p.load, "conveyor_spm_load");
    find(p.free, "conveyor_spm_free");
    find(p.info, "conveyor_spm_info");
    find(p.encode, "conveyor_spm_encode");
    find(p.decode, "conveyor_spm_decode");
    find(p.train, "conveyor_spm_train");
    return p;
  }();
  return plugin;
}

// Throws UserError naming `what` and why the plugin is missing, unless it loaded.
void CheckPlugin(const Plugin& plugin, const std::string& what) {
  CONVEYOR_CHECK(plugin.error.empty()) << what << ": " << plugin.error;
}

// A sink appending to a std::vector or std::string of the plugin's element type.
template <typename Container>
void AppendTo(void* state, const void* data, size_t size) {
  auto* out = static_cast<Container*>(state);
  const auto* first = static_cast<const typename Container::value_type*>(data);
  out->insert(out->end(), first, first + size);
}

constexpr size_t kErrorSize = 1024;

}  // namespace

bool HaveSentencePiece() { return LoadPlugin().error.empty(); }

struct SentencePieceTokenizer::Model {
  Model(const Plugin& p, ConveyorSpm* h)
      : plugin(&p), handle(h), vocab(p.info(h, 0)), bos(p.info(h, 1)), eos(p.info(h, 2)) {}
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  ~Model() { plugin->free(handle); }

  const Plugin* plugin;
  ConveyorSpm* handle;  // owned
  int64_t vocab, bos, eos;
};

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& path) : path_(path) {
  const Plugin& plugin = LoadPlugin();
  CheckPlugin(plugin, "tokenizer " + path);
  char error[kErrorSize] = "";
  ConveyorSpm* handle = plugin.load(path.c_str(), error, sizeof error);
  CONVEYOR_CHECK(handle != nullptr)
      << "tokenizer " << path << ": not a SentencePiece model that can be read (" << error << ")";
  model_ = std::make_unique<const Model>(plugin, handle);
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

int64_t SentencePieceTokenizer::vocab_size() const { return model_->vocab; }
int64_t SentencePieceTokenizer::bos_id() const { return model_->bos; }
int64_t SentencePieceTokenizer::eos_id() const { return model_->eos; }

std::vector<int64_t> SentencePieceTokenizer::Encode(std::string_view text) const {
  std::vector<int32_t> ids;
  char error[kErrorSize] = "";
  CONVEYOR_CHECK(model_->plugin->encode(model_->handle, text.data(), text.size(),
                                        AppendTo<std::vector<int32_t>>, &ids, error,
                                        sizeof error) == 0)
      << "tokenizer " << path_ << ": cannot encode " << text.size() << " bytes of text (" << error
      << ")";
  return std::vector<int64_t>(ids.begin(), ids.end());
}

std::string SentencePieceTokenizer::Decode(std::span<const int64_t> tokens) const {
  std::vector<int32_t> ids;
  ids.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    CONVEYOR_CHECK(tokens[i] >= 0 && tokens[i] < vocab_size())
        << "token " << tokens[i] << " at position " << i << " is outside the vocabulary [0, "
        << vocab_size() << ") of tokenizer " << path_;
    ids.push_back(static_cast<int32_t>(tokens[i]));
  }
  std::string text;
  char error[kErrorSize] = "";
  CONVEYOR_CHECK(model_->plugin->decode(model_->handle, ids.data(), ids.size(),
                                        AppendTo<std::string>, &text, error, sizeof error) == 0)
      << "tokenizer " << path_ << ": cannot decode " << ids.size() << " ids (" << error << ")";
  return text;
}

int64_t SentencePieceTokenizer::end_of_document() const {
  CONVEYOR_CHECK(eos_id() >= 0) << "tokenizer " << path_
                                << " has no end-of-sequence id to end documents with";
  return eos_id();
}

std::string SentencePieceTokenizer::Describe() const {
  return "SentencePiece " + path_ + " (" + std::to_string(vocab_size()) + " ids)";
}

int64_t TrainSentencePiece(const SentencePieceTrainOptions& options, const std::string& out) {
  const Plugin& plugin = LoadPlugin();
  CheckPlugin(plugin, "tokenizer train");
  CONVEYOR_CHECK(options.model_type == "bpe" || options.model_type == "unigram")
      << "--model-type '" << options.model_type << "': bpe or unigram";
  CONVEYOR_CHECK(options.vocab_size >= 260 && options.vocab_size <= (1 << 20))
      << "--vocab-size " << options.vocab_size
      << ": between 260 (the 256 byte pieces of the fallback, 3 special ids and more) and "
      << (1 << 20);
  CONVEYOR_CHECK(options.max_sentences > 0)
      << "--max-sentences " << options.max_sentences << ": must be positive";
  CONVEYOR_CHECK(!options.inputs.empty()) << "no --input to train on";
  std::vector<std::string> sentences;
  TextDocumentOptions documents;
  documents.json_key = options.json_key;
  for (const std::string& input : options.inputs) {
    ForEachDocument(input, documents, [&](std::string_view document) {
      size_t start = 0;
      while (start < document.size() &&
             static_cast<int64_t>(sentences.size()) < options.max_sentences) {
        size_t end = document.find('\n', start);
        if (end == std::string_view::npos) end = document.size();
        if (end > start) sentences.emplace_back(document.substr(start, end - start));
        start = end + 1;
      }
    });
  }
  CONVEYOR_CHECK(!sentences.empty()) << "the inputs hold no text to train a tokenizer on";
  const int threads = options.threads > 0
                          ? options.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::vector<std::pair<std::string, std::string>> spec = {
      {"model_type", options.model_type},
      {"vocab_size", std::to_string(options.vocab_size)},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"allow_whitespace_only_pieces", "true"},
      {"byte_fallback", "true"},
      {"split_digits", "true"},
      {"character_coverage", "0.9995"},
      {"unk_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"pad_id", "-1"},
      {"num_threads", std::to_string(threads)},
      {"input_sentence_size", std::to_string(sentences.size())},
      {"max_sentence_length", "1000000"},
      {"minloglevel", "2"},  // errors only: its progress log is thousands of lines
  };
  std::vector<const char*> keys, values, texts;
  std::vector<size_t> lengths;
  for (const auto& [key, value] : spec) {
    keys.push_back(key.c_str());
    values.push_back(value.c_str());
  }
  for (const std::string& sentence : sentences) {
    texts.push_back(sentence.data());
    lengths.push_back(sentence.size());
  }
  std::string model;
  char error[kErrorSize] = "";
  CONVEYOR_CHECK(plugin.train(keys.data(), values.data(), keys.size(), texts.data(), lengths.data(),
                              texts.size(), AppendTo<std::string>, &model, error,
                              sizeof error) == 0)
      << "SentencePiece refused to train a " << options.model_type << " model of "
      << options.vocab_size << " pieces on " << sentences.size() << " lines: " << error;
  WriteFileAtomically(out, model);
  return static_cast<int64_t>(sentences.size());
}

}  // namespace conveyor
