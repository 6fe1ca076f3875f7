#include "conveyor/nn/layer.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/common/split_mix.h"

namespace conveyor {

at::Tensor Layer::LossSum(const at::Tensor&, const MicroBatch&) {
  CONVEYOR_ASSERT(false) << "this layer has no loss; only a model's last layer does";
  return {};
}

LayerList BuildLayerRange(int count, int begin, int end,
                          const std::function<std::shared_ptr<Layer>(int)>& make) {
  if (end < 0) end = count;
  CONVEYOR_ASSERT(0 <= begin && begin <= end && end <= count)
      << "layers [" << begin << ", " << end << ") of a model of " << count;
  // On as many threads as this thread may compute on: a layer draws its weights from streams
  // of its own (TensorInitGenerator), so the values do not depend on who builds it when. At
  // most one layer a thread is in flight; the first error is rethrown here.
  const int layers = end - begin;
  const int workers = std::clamp(at::get_num_threads(), 1, std::max(layers, 1));
  std::vector<std::shared_ptr<Layer>> built(layers);
  std::atomic<int> next{0};
  std::vector<std::exception_ptr> errors(layers);
  const auto work = [&] {
    for (int i = next++; i < layers; i = next++) {
      try {
        built[i] = make(begin + i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> threads;
  for (int w = 1; w < workers; ++w) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& error : errors) {
    if (error != nullptr) std::rethrow_exception(error);  // the lowest layer's
  }
  return built;
}

LayerStack::LayerStack(LayerList layers) : layers_(std::move(layers)) {
  CONVEYOR_ASSERT(!layers_.empty()) << "a stage needs at least one layer";
}

at::Tensor LayerStack::Forward(const at::Tensor& input, const MicroBatch& mb) {
  at::Tensor x = input;
  for (auto& layer : layers_) x = layer->Forward(x, mb);
  return x;
}

at::Tensor LayerStack::LossSum(const at::Tensor& output, const MicroBatch& mb) {
  CONVEYOR_ASSERT(layers_.back()->has_loss()) << "the last stage must end with the model's head";
  return layers_.back()->LossSum(output, mb);
}

NamedTensors LayerStack::NamedParameters() {
  NamedTensors all;
  for (auto& layer : layers_) {
    for (auto& named : layer->NamedParameters()) all.push_back(std::move(named));
  }
  return all;
}

ParameterSpecs LayerStack::parameter_specs() const { return ParameterSpecsOf(layers_); }

std::vector<MoeMlp*> LayerStack::ExpertBlocks() const {
  std::vector<MoeMlp*> blocks;
  for (const auto& layer : layers_) {
    if (MoeMlp* block = layer->expert_block()) blocks.push_back(block);
  }
  return blocks;
}

ParameterSpecs ParameterSpecsOf(const LayerList& layers) {
  ParameterSpecs specs;
  for (const auto& layer : layers) specs.Add(layer->parameter_specs());
  return specs;
}

std::vector<int64_t> LayerStack::InputShape(const MicroBatch& mb) const {
  return layers_.front()->InputShape(mb);
}

std::vector<int64_t> LayerStack::OutputShape(const MicroBatch& mb) const {
  return layers_.back()->OutputShape(mb);
}

std::vector<int64_t> TokenShape(const MicroBatch& mb) { return {mb.size(), mb.seq_len()}; }

std::vector<int64_t> HiddenShape(const MicroBatch& mb, int64_t hidden, const TensorParallel& tp,
                                 const ContextParallel& cp) {
  return {mb.size(), tp.local_positions(cp.local_length(mb.seq_len())), hidden};
}

at::Generator LayerInitGenerator(uint64_t seed, int layer_index) {
  // The SplitMix64 mix of (seed, index): independent streams per layer.
  return at::detail::createCPUGenerator(
      SplitMixFinalize(seed * kSplitMixGamma + static_cast<uint64_t>(layer_index) + 1));
}

at::Generator TensorInitGenerator(uint64_t seed, std::string_view name) {
  // Every byte of the name mixed into the state in turn: distinct names, distinct streams.
  uint64_t state = SplitMixFinalize(seed * kSplitMixGamma + 1);
  for (const char byte : name) {
    state = SplitMixFinalize(state * kSplitMixGamma + static_cast<uint8_t>(byte) + 1);
  }
  return at::detail::createCPUGenerator(state);
}

}  // namespace conveyor
