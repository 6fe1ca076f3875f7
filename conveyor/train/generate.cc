#include "conveyor/train/generate.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "conveyor/common/error.h"
#include "conveyor/nn/layer.h"
#include "conveyor/nn/tensor_parallel.h"
#include "conveyor/train/model_registry.h"

namespace conveyor {
namespace {

// The next token after each sample of `inputs` (n, T), the tokens from `cache_position` on
// (MicroBatch::cache_position), the same on every rank; drawn with the generator of (seed,
// window), window the length of the sequence the model sees.
at::Tensor NextTokens(ForwardPipeline& forward, const at::Tensor& inputs, int64_t cache_position,
                      int64_t window, const Sampling& sampling, uint64_t seed) {
  // Two directions need two micro-batches: the second carries a copy, its result unused.
  const int m = forward.model().program().layout.directions();
  const c10::Device device = forward.model().device();
  std::vector<MicroBatch> mbs(m);
  for (int i = 0; i < m; ++i) {
    mbs[i].index = i;
    mbs[i].inputs = inputs.to(device);
    mbs[i].cache_position = cache_position;
  }
  const Executor::Inference result = forward.Run(mbs);
  at::Tensor tokens = at::zeros({inputs.size(0)}, at::TensorOptions(at::kLong).device(device));
  auto it = result.outputs.find(0);
  if (it != result.outputs.end()) {
    at::Tensor logits = it->second.select(1, it->second.size(1) - 1);  // (n, V / tp)
    // Under tensor parallelism each rank holds a slice of the vocabulary: gather it whole.
    const TensorParallel& tp = forward.model().parallel().tp;
    // The padding of a vocabulary tp does not divide is dropped: never sampled.
    if (tp.size > 1) {
      logits = GatherShards(logits, TensorParallelSplit{1, 1, true}, tp,
                            ModelSizes(forward.model().config().model).vocab);  // (n, V)
    }
    tokens = SampleTokens(logits, sampling, LayerInitGenerator(seed, static_cast<int>(window)));
  }
  // The rank of the last stage of micro-batch 0's pipeline sampled them; the others get them.
  Transport* pipeline = forward.model().pipeline_group();
  if (pipeline != nullptr && pipeline->world_size() > 1) {
    const Layout& layout = forward.model().program().layout;
    pipeline->Broadcast(tokens, layout.rank_of(layout.pipeline_length() - 1));
  }
  return tokens;
}

}  // namespace

void CheckSampling(const Sampling& s) {
  // NaN fails every comparison.
  CONVEYOR_CHECK(s.temperature == 0 || (s.temperature >= 1e-3 && s.temperature <= 100))
      << "--temperature must be 0 (greedy) or within [0.001, 100], got " << s.temperature;
  CONVEYOR_CHECK(s.top_k >= 0) << "--top-k must be >= 0 (0: every token), got " << s.top_k;
  CONVEYOR_CHECK(s.top_p > 0 && s.top_p <= 1)
      << "--top-p must be within (0, 1] (1: every token), got " << s.top_p;
}

at::Tensor SampleTokens(const at::Tensor& logits, const Sampling& sampling, at::Generator gen) {
  CheckSampling(sampling);
  if (sampling.temperature == 0) return logits.argmax(-1);
  // On the CPU, in fp32, with its generator, whatever the device: the same tokens anywhere.
  at::Tensor scaled = logits.to(at::kCPU, at::kFloat) / sampling.temperature;  // (n, V)
  const int64_t vocab = scaled.size(-1);
  if (sampling.top_k > 0 && sampling.top_k < vocab) {
    const at::Tensor kth = std::get<0>(scaled.topk(sampling.top_k, -1)).select(-1, -1);
    scaled = scaled.masked_fill(scaled < kth.unsqueeze(-1), -INFINITY);
  }
  if (sampling.top_p < 1) {
    const auto [sorted, order] = scaled.sort(-1, /*descending=*/true);
    const at::Tensor before = sorted.softmax(-1).cumsum(-1) - sorted.softmax(-1);  // mass ahead
    // Dropped: the tokens with top_p already reached before them (never the first).
    const at::Tensor dropped_sorted = before >= sampling.top_p;
    const at::Tensor dropped = at::zeros_like(dropped_sorted).scatter(-1, order, dropped_sorted);
    scaled = scaled.masked_fill(dropped, -INFINITY);
  }
  return at::multinomial(scaled.softmax(-1), 1, false, gen).squeeze(-1).to(logits.device());
}

std::vector<int64_t> GenerateTokens(ForwardPipeline& forward, std::vector<int64_t> prompt,
                                    int tokens, const Sampling& sampling, uint64_t seed,
                                    int context, bool kv_cache) {
  CONVEYOR_CHECK(tokens >= 0) << "tokens must be >= 0, got " << tokens;
  CONVEYOR_CHECK(context >= 1) << "context must be at least 1, got " << context;
  CONVEYOR_CHECK(!prompt.empty()) << "the prompt has no token";
  CheckSampling(sampling);
  const PipelineModel& model = forward.model();
  // Every replica would sample the same tokens: replica 0 does, the others receive them; but
  // where experts are divided over replicas (expert parallelism) every replica runs the
  // forwards its expert-parallel group shares, sampling the same tokens.
  const bool samples = model.coords().dp == 0 || model.parallel().ep.size > 1;
  std::vector<int64_t> out;
  if (samples) {
    int64_t cached = 0;  // positions the attention layers' caches hold
    for (int k = 0; k < tokens; ++k) {
      const int64_t length = static_cast<int64_t>(prompt.size());
      // While the sequence fits the context: the prefill, then one token per step. Once it
      // no longer does, the window slides and every position moves: no cache, the window
      // computed whole.
      int64_t start = std::max<int64_t>(0, length - context), position = -1;
      if (kv_cache && length <= context) {
        position = cached > 0 && cached == length - 1 ? cached : 0;
        start = position;
      }
      const at::Tensor inputs =
          at::tensor(std::vector<int64_t>(prompt.begin() + start, prompt.end()), at::kLong)
              .unsqueeze(0);
      const int64_t window = std::min<int64_t>(length, context);
      const int64_t next =
          NextTokens(forward, inputs, position, window, sampling, seed + k)[0].item<int64_t>();
      cached = position >= 0 ? length : 0;
      prompt.push_back(next);
      out.push_back(next);
    }
  }
  if (model.mesh().dp() > 1 && tokens > 0) {
    // World rank 0 is at (0, 0, 0): in replica 0.
    at::Tensor ids = samples ? at::tensor(out, at::kLong) : at::empty({tokens}, at::kLong);
    model.world()->Broadcast(ids, 0);
    out.assign(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + tokens);
  }
  return out;
}

std::string Generate(ForwardPipeline& forward, const Tokenizer& tokenizer,
                     const std::string& prompt, int tokens, double temperature, uint64_t seed,
                     int context) {
  Sampling sampling;
  sampling.temperature = temperature;
  return tokenizer.Decode(
      GenerateTokens(forward, PromptTokens(tokenizer, prompt), tokens, sampling, seed, context));
}

}  // namespace conveyor
