#include "conveyor/nn/hf_checkpoint_testing.h"

#include <ATen/ATen.h>

#include <fstream>

#include "conveyor/nn/safetensors.h"

namespace conveyor {

void WriteHfLlamaFolder(const std::string& dir, const LlamaConfig& c,
                        const std::map<std::string, at::Tensor>& weights, at::ScalarType dtype,
                        bool shards) {
  std::ofstream(dir + "/config.json")
      << "{\"model_type\": \"llama\", \"hidden_size\": " << c.hidden
      << ", \"intermediate_size\": " << c.intermediate << ", \"num_attention_heads\": " << c.heads
      << ", \"num_key_value_heads\": " << c.kv_heads << ", \"num_hidden_layers\": " << c.layers
      << ", \"vocab_size\": " << c.vocab << ", \"max_position_embeddings\": " << c.max_seq_len
      << ", \"rms_norm_eps\": " << c.rms_norm_eps << ", \"rope_theta\": " << c.rope_theta
      << ", \"tie_word_embeddings\": " << (c.tie_embeddings ? "true" : "false") << "}\n";
  std::map<std::string, std::map<std::string, at::Tensor>> files;
  for (const auto& [name, t] : weights) {
    const bool second = shards && name.find("layers.1.") != std::string::npos;
    const char* file = !shards  ? "model.safetensors"
                       : second ? "model-00002-of-00002.safetensors"
                                : "model-00001-of-00002.safetensors";
    files[file][name] = t.to(dtype);
  }
  std::string map;
  for (const auto& [file, tensors] : files) {
    SaveSafetensors(dir + "/" + file, tensors);
    for (const auto& [name, t] : tensors) {
      map += (map.empty() ? "\"" : ", \"") + name + "\": \"" + file + "\"";
    }
  }
  if (shards) {
    std::ofstream(dir + "/model.safetensors.index.json")
        << "{\"metadata\": {}, \"weight_map\": {" << map << "}}\n";
  }
}

std::map<std::string, at::Tensor> LlamaWeights(const LlamaConfig& config, uint64_t seed) {
  std::map<std::string, at::Tensor> named;
  for (const auto& layer : BuildLlama(config, seed)) {
    for (const auto& [name, p] : layer->NamedParameters()) named[name] = p.detach();
  }
  return named;
}

}  // namespace conveyor
