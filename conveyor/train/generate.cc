#include "conveyor/train/generate.h"

#include <ATen/ATen.h>

#include "conveyor/common/error.h"
#include "conveyor/data/byte_tokenizer.h"
#include "conveyor/nn/layer.h"
#include "conveyor/nn/tensor_parallel.h"

namespace conveyor {
namespace {

// The next token after each sample of `inputs` (n, T), the same on every rank.
at::Tensor NextTokens(ForwardPipeline& forward, const at::Tensor& inputs, double temperature,
                      uint64_t seed) {
  // Two directions need two micro-batches: the second carries a copy, its result unused.
  const int m = forward.model().program().layout.directions();
  const c10::Device device = forward.model().device();
  std::vector<MicroBatch> mbs(m);
  for (int i = 0; i < m; ++i) {
    mbs[i].index = i;
    mbs[i].inputs = inputs.to(device);
  }
  const Executor::Inference result = forward.Run(mbs);
  at::Tensor tokens = at::zeros({inputs.size(0)}, at::TensorOptions(at::kLong).device(device));
  auto it = result.outputs.find(0);
  if (it != result.outputs.end()) {
    at::Tensor logits = it->second.select(1, it->second.size(1) - 1);  // (n, V / tp)
    // Under tensor parallelism each rank holds a slice of the vocabulary: gather it whole.
    const TensorParallel& tp = forward.model().tensor_parallel();
    if (tp.size > 1) logits = GatherShards(logits, TensorParallelSplit{1, 1}, tp);  // (n, V)
    if (temperature <= 0) {
      tokens = logits.argmax(-1);
    } else {
      at::Generator gen = LayerInitGenerator(seed, static_cast<int>(inputs.size(1)));
      // Sampled on the CPU, with its generator, whatever the device: the same tokens anywhere.
      const at::Tensor probs = (logits / temperature).softmax(-1).to(at::kCPU);
      tokens = at::multinomial(probs, 1, false, gen).squeeze(-1).to(device);
    }
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

std::string Generate(ForwardPipeline& forward, const std::string& prompt, int tokens,
                     double temperature, uint64_t seed, int context) {
  CONVEYOR_CHECK(tokens >= 0) << "tokens must be >= 0, got " << tokens;
  CONVEYOR_CHECK(context >= 1) << "context must be at least 1, got " << context;
  const ByteTokenizer tokenizer;
  const PipelineModel& model = forward.model();
  // Every replica would sample the same bytes: replica 0 does, the others receive them.
  const bool samples = model.coords().dp == 0;
  std::vector<int64_t> out;
  if (samples) {
    std::vector<int64_t> ids = tokenizer.Encode(prompt.empty() ? std::string("\n") : prompt);
    for (int k = 0; k < tokens; ++k) {
      const int64_t start = std::max<int64_t>(0, static_cast<int64_t>(ids.size()) - context);
      const at::Tensor window =
          at::tensor(std::vector<int64_t>(ids.begin() + start, ids.end()), at::kLong).unsqueeze(0);
      const int64_t next = NextTokens(forward, window, temperature, seed + k)[0].item<int64_t>();
      ids.push_back(next);
      out.push_back(next);
    }
  }
  if (model.mesh().dp() > 1 && tokens > 0) {
    // World rank 0 is at (0, 0, 0): in replica 0.
    at::Tensor bytes = samples ? at::tensor(out, at::kLong) : at::empty({tokens}, at::kLong);
    model.world()->Broadcast(bytes, 0);
    out.assign(bytes.data_ptr<int64_t>(), bytes.data_ptr<int64_t>() + tokens);
  }
  return tokenizer.Decode(out);
}

}  // namespace conveyor
