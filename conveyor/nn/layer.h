// Models as lists of layers, so a partitioner can cut them into stages.
//
// A Layer maps the previous layer's output to its own ((n, T) int64 token ids into the
// first layer, activations after). Its parameters carry global names ("blocks.3.attn.qkv.
// weight") that do not depend on the partition, and are initialised from (seed, global
// layer index), so any split of the same model starts from the same weights.
//
// LayerStack runs a contiguous slice of layers as one pipeline stage.
#ifndef CONVEYOR_NN_LAYER_H_
#define CONVEYOR_NN_LAYER_H_

#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "conveyor/module/stage_module.h"
#include "conveyor/nn/context_parallel.h"
#include "conveyor/nn/parameter_spec.h"
#include "conveyor/nn/tensor_parallel.h"

namespace conveyor {

class MoeMlp;

class Layer {
 public:
  virtual ~Layer() = default;
  virtual at::Tensor Forward(const at::Tensor& x, const MicroBatch& mb) = 0;
  virtual NamedTensors NamedParameters() = 0;
  // The shapes Forward takes and returns for micro-batch mb.
  virtual std::vector<int64_t> InputShape(const MicroBatch& mb) const = 0;
  virtual std::vector<int64_t> OutputShape(const MicroBatch& mb) const = 0;
  // Only a model's last layer has a loss: summed over mb's counted targets.
  virtual bool has_loss() const { return false; }
  virtual at::Tensor LossSum(const at::Tensor& output, const MicroBatch& mb);
  // The layouts of its parameters by global name (parameter_spec.h), as it declared them
  // when it created them (ShardParam, UndrawnParam); a parameter not declared is replicated.
  const ParameterSpecs& parameter_specs() const { return specs_; }
  // Its Mixture-of-Experts block (moe_mlp.h), whose expert load the trainer reads and
  // balances; null for a layer without one. Owned by the layer.
  virtual MoeMlp* expert_block() { return nullptr; }

 protected:
  ParameterSpecs specs_;  // filled by the constructor
};

using LayerList = std::vector<std::shared_ptr<Layer>>;

// Every layer's parameter specs (Layer::parameter_specs).
ParameterSpecs ParameterSpecsOf(const LayerList& layers);

// Parameters by global name, as (unsharded) shapes: what a layer holds, without its values.
using ParameterShapes = std::map<std::string, std::vector<int64_t>>;

class LayerStack : public StageModule {
 public:
  // Precondition: layers non-empty.
  explicit LayerStack(LayerList layers);

  at::Tensor Forward(const at::Tensor& input, const MicroBatch& mb) override;
  at::Tensor LossSum(const at::Tensor& output, const MicroBatch& mb) override;
  NamedTensors NamedParameters() override;
  std::vector<int64_t> InputShape(const MicroBatch& mb) const override;
  std::vector<int64_t> OutputShape(const MicroBatch& mb) const override;
  // Every layer's parameter specs.
  ParameterSpecs parameter_specs() const;
  // Every layer's expert block (Layer::expert_block), in layer order.
  std::vector<MoeMlp*> ExpertBlocks() const;

 private:
  LayerList layers_;
};

// Layers [begin, end) of a model of `count` layers (end < 0: through the last), make(l)
// building the layer of global index l, in order. The layers are built on up to
// at::get_num_threads() threads at once: make must be safe to call from several threads for
// different l, and give a layer that does not depend on which thread built it or when (a
// layer draws its weights from streams of its own). The first error of the lowest layer
// that threw is rethrown. Precondition 0 <= begin <= end <= count.
LayerList BuildLayerRange(int count, int begin, int end,
                          const std::function<std::shared_ptr<Layer>(int)>& make);

// The shapes between layers: token ids (n, T) and hidden states (n, T, C) of micro-batch mb;
// a rank's share of the sequence under context parallelism (T/N: context_parallel.h), and of
// that where tp splits the sequence (T/(N p): tensor_parallel.h).
std::vector<int64_t> TokenShape(const MicroBatch& mb);
std::vector<int64_t> HiddenShape(const MicroBatch& mb, int64_t hidden,
                                 const TensorParallel& tp = {}, const ContextParallel& cp = {});

// A CPU generator seeded from (seed, global layer index): the only source of randomness a
// layer's initialisation may use.
at::Generator LayerInitGenerator(uint64_t seed, int layer_index);

// A CPU generator seeded from (seed, a parameter's global name): one independent stream per
// tensor, so that a tensor's initial value depends on nothing but the seed and its name
// (not on which other tensors a rank builds, or in which order).
at::Generator TensorInitGenerator(uint64_t seed, std::string_view name);

}  // namespace conveyor

#endif  // CONVEYOR_NN_LAYER_H_
