#include "conveyor/formats/hf_checkpoint_testing.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "conveyor/formats/safetensors.h"
#include "conveyor/nn/hf_config.h"

namespace conveyor {

void WriteHfLlamaFolder(const std::string& dir, const LlamaConfig& c,
                        const std::map<std::string, at::Tensor>& weights, at::ScalarType dtype,
                        bool shards) {
  std::ofstream(dir + "/config.json") << HfLlamaConfigJson(c, "float32");
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

namespace {
constexpr char kPython[] = "/usr/bin/python3";
}  // namespace

bool PythonHasTorch() {
  return std::system((std::string(kPython) + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0;
}

at::Tensor ReferenceLogits(const std::string& dir, const at::Tensor& ids) {
  SaveSafetensors(dir + "/ids.safetensors", {{"ids", ids}});
  const std::string script = ReadHfModelConfig(dir + "/config.json").type + ".py ";
  const std::string command =
      std::string(kPython) + " " CONVEYOR_TESTDATA_DIR "/reference/" + script + dir + " 2>&1";
  if (std::system(command.c_str()) != 0) {
    ADD_FAILURE() << command << " failed";
    return {};
  }
  return LoadSafetensors(dir + "/logits.safetensors").tensors.at("logits");
}

std::map<std::string, at::Tensor> LlamaWeights(const LlamaConfig& config, uint64_t seed) {
  std::map<std::string, at::Tensor> named;
  for (const auto& layer : BuildLlama(config, seed)) {
    for (const auto& [name, p] : layer->NamedParameters()) named[name] = p.detach();
  }
  return named;
}

}  // namespace conveyor
