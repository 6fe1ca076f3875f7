#include "conveyor/nn/llama_testing.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

namespace conveyor {

LlamaConfig TinyLlamaConfig() {
  LlamaConfig c;
  c.vocab = 48;
  c.hidden = 32;
  c.intermediate = 40;
  c.heads = 4;
  c.kv_heads = 2;
  c.layers = 2;
  c.max_seq_len = 16;
  c.rope_theta = 500000;
  return c;
}

std::map<std::string, at::Tensor> ParametersByName(const LayerList& layers) {
  std::map<std::string, at::Tensor> named;
  for (const auto& layer : layers) {
    for (const auto& [name, p] : layer->NamedParameters()) named[name] = p.detach();
  }
  return named;
}

at::Tensor LogitsOf(const LayerList& layers, const at::Tensor& ids, const at::Tensor& positions) {
  at::NoGradGuard no_grad;
  MicroBatch mb;
  mb.inputs = ids;
  mb.targets = at::zeros_like(ids);
  mb.positions = positions;
  LayerStack stack(layers);
  return stack.Forward(ids, mb);
}

at::Tensor RandomIds(const LlamaConfig& c, int64_t n, int64_t t, uint64_t seed) {
  at::Generator gen = LayerInitGenerator(seed, 0);
  return at::randint(c.vocab, {n, t}, gen, at::kLong);
}

double RelativeError(const at::Tensor& got, const at::Tensor& want) {
  return (got - want).abs().max().item<double>() / want.abs().max().item<double>();
}

}  // namespace conveyor
