#include "conveyor/nn/tensor_parallel.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "conveyor/comm/transport.h"
#include "conveyor/common/error.h"
#include "conveyor/device/compute_precision.h"
#include "conveyor/nn/linear.h"
#include "conveyor/nn/parallel_group.h"
#include "conveyor/nn/weight_cast.h"

namespace conveyor {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// A contiguous copy of x summed over `group`.
at::Tensor SumOver(Transport* group, const at::Tensor& x) {
  std::vector<at::Tensor> sum = {x.clone(at::MemoryFormat::Contiguous)};
  group->AllReduceSum(sum);
  return sum[0];
}

void SaveGroup(AutogradContext* ctx, Transport* group) {
  ctx->saved_data["group"] = reinterpret_cast<int64_t>(group);
}

Transport* SavedGroup(AutogradContext* ctx) {
  return reinterpret_cast<Transport*>(ctx->saved_data["group"].toInt());
}

// x (n, T, ...) along the sequence: every rank's (n, T/p, ...) in rank order, concatenated.
at::Tensor GatherSequence(Transport* group, const at::Tensor& x) {
  return at::cat(group->AllGather(x), 1);
}

// The sum over `group` of x (n, T, ...), this rank's positions of it: (n, T/p, ...).
at::Tensor ReduceScatterSequence(Transport* group, const at::Tensor& x) {
  const int64_t p = group->world_size(), t = x.size(1);
  std::vector<int64_t> split = x.sizes().vec();  // (n, p, T/p, ...)
  split[1] = t / p;
  std::vector<int64_t> local = split;
  split.insert(split.begin() + 1, p);
  // Each rank's positions of every sequence, contiguous and in rank order.
  const at::Tensor by_rank = x.reshape(split).transpose(0, 1).contiguous();
  const at::Tensor mine =
      group->ReduceScatterSum(by_rank.view(-1), std::vector<int64_t>(p, by_rank.numel() / p));
  return mine.view(local);
}

// This rank's positions of x (n, T, ...): (n, T/p, ...), sharing x's memory.
at::Tensor PositionsOf(Transport* group, const at::Tensor& x) {
  const int64_t part = x.size(1) / group->world_size();
  return x.narrow(1, group->rank() * part, part);
}

// The autograd function of ReduceFromTensorParallel, and of ReduceOutOfTensorParallel's
// all-reduce.
struct ReduceFromRegion : public torch::autograd::Function<ReduceFromRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Transport* group) {
    return SumOver(group, x);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {grads[0], at::Tensor()};
  }
};

// ReduceOutOfTensorParallel under sequence parallelism.
struct ReduceScatterOutOfRegion : public torch::autograd::Function<ReduceScatterOutOfRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Transport* group) {
    SaveGroup(ctx, group);
    return ReduceScatterSequence(group, x);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {GatherSequence(SavedGroup(ctx), grads[0]), at::Tensor()};
  }
};

// This rank's positions: the autograd function of TokensOfTensorParallelRank.
struct TakePositions : public torch::autograd::Function<TakePositions> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Transport* group) {
    SaveGroup(ctx, group);
    return PositionsOf(group, x);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {GatherSequence(SavedGroup(ctx), grads[0]), at::Tensor()};
  }
};

// Every rank's positions: the autograd function of TokensOfEveryTensorParallelRank.
struct GatherPositions : public torch::autograd::Function<GatherPositions> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Transport* group) {
    SaveGroup(ctx, group);
    return GatherSequence(group, x);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {PositionsOf(SavedGroup(ctx), grads[0]).contiguous(), at::Tensor()};
  }
};

// The autograd function of ColumnParallelLinears (tp.size > 1). `bias_of[i]`: linear i's index
// in `biases`, or -1 without one (custom functions take no undefined tensors). With `gather`
// (sequence parallelism) x holds this rank's positions.
struct ColumnParallelFunction : public torch::autograd::Function<ColumnParallelFunction> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, at::TensorList weights,
                               at::TensorList biases, std::vector<int64_t> bias_of,
                               std::vector<double> scales, Transport* group, bool gather) {
    const std::optional<c10::ScalarType> autocast = AutocastDtype(x.device().type());
    const c10::ScalarType compute = autocast.value_or(x.scalar_type());
    const at::Tensor xc = x.to(compute);
    ctx->save_for_backward({xc});
    ctx->saved_data["weights"] = c10::List<at::Tensor>(weights);
    ctx->saved_data["bias_of"] = bias_of;
    ctx->saved_data["bias_dtype"] = biases.empty() ? int64_t{0} : int64_t(biases[0].scalar_type());
    ctx->saved_data["scales"] = scales;
    ctx->saved_data["input_dtype"] = x.scalar_type();
    ctx->saved_data["gather"] = gather;
    SaveGroup(ctx, group);
    RecordWeightGradStore(ctx);
    const at::Tensor all = gather ? GatherSequence(group, xc) : xc;
    variable_list outputs;
    for (size_t i = 0; i < weights.size(); ++i) {
      const at::Tensor bias = bias_of[i] >= 0 ? biases[bias_of[i]].to(compute) : at::Tensor();
      outputs.push_back(at::linear(all, CastWeight(weights[i], compute), bias));
    }
    return outputs;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor xc = ctx->get_saved_variables()[0];  // in the compute dtype
    Transport* group = SavedGroup(ctx);
    const bool gather = ctx->saved_data["gather"].toBool();
    const c10::List<at::Tensor> weights = ctx->saved_data["weights"].toTensorList();
    const std::vector<int64_t> bias_of = ctx->saved_data["bias_of"].toIntVector();
    const std::vector<double> scales = ctx->saved_data["scales"].toDoubleVector();
    const auto input_dtype = ctx->saved_data["input_dtype"].toScalarType();
    const at::Tensor all = gather ? GatherSequence(group, xc) : xc;  // (n, T, C)
    const at::Tensor x2d = all.reshape({-1, all.size(-1)});
    at::Tensor grad_x;  // (n, T, C) in the input's dtype, this rank's part of the sum
    variable_list grad_weights, grad_biases;
    for (size_t i = 0; i < weights.size(); ++i) {
      const at::Tensor weight = weights[i];
      const at::Tensor g = grads[i].to(xc.scalar_type());
      const at::Tensor part =
          (g.matmul(CastWeight(weight, xc.scalar_type())) * scales[i]).to(input_dtype);
      grad_x = grad_x.defined() ? grad_x.add_(part) : part;
      grad_weights.push_back(WeightGradOrDefer(ctx, weight, x2d, g.reshape({-1, weight.size(0)})));
      if (bias_of[i] >= 0) {
        grad_biases.push_back(
            grads[i]
                .reshape({-1, weight.size(0)})
                .sum(at::IntArrayRef{0}, /*keepdim=*/false,
                     static_cast<c10::ScalarType>(ctx->saved_data["bias_dtype"].toInt())));
      }
    }
    variable_list result = {gather ? ReduceScatterSequence(group, grad_x) : SumOver(group, grad_x)};
    result.insert(result.end(), grad_weights.begin(), grad_weights.end());
    result.insert(result.end(), grad_biases.begin(), grad_biases.end());
    result.resize(result.size() + 4);  // the non-tensor arguments
    return result;
  }
};

// The autograd function of SumOverKvReplicas: every rank puts its gradient in its head's slot
// of a zero buffer (heads, ...), one all-reduce over the TP group sums each slot over the
// head's replicas, and each rank takes its head's slot back.
struct SumOverReplicas : public torch::autograd::Function<SumOverReplicas> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& kv, Transport* group,
                            int64_t replicas) {
    SaveGroup(ctx, group);
    ctx->saved_data["replicas"] = replicas;
    return kv;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    Transport* group = SavedGroup(ctx);
    const int64_t replicas = ctx->saved_data["replicas"].toInt();
    const int64_t head = group->rank() / replicas;
    std::vector<int64_t> shape = grads[0].sizes().vec();
    shape.insert(shape.begin(), group->world_size() / replicas);
    std::vector<at::Tensor> slots = {at::zeros(shape, grads[0].options())};
    slots[0][head].copy_(grads[0]);
    group->AllReduceSum(slots);
    return {slots[0][head], at::Tensor(), at::Tensor()};
  }
};

// `part` followed by zero rows along `dim` up to `rows` rows (`part` itself when it has them):
// a padded split's part from its real rows.
at::Tensor PadToRows(const at::Tensor& part, int dim, int64_t rows) {
  CONVEYOR_ASSERT(part.size(dim) <= rows) << part.size(dim) << " rows cannot pad to " << rows;
  if (part.size(dim) == rows) return part;
  std::vector<int64_t> shape = part.sizes().vec();
  shape[dim] = rows - part.size(dim);
  return at::cat({part, at::zeros(shape, part.options())}, dim);
}

}  // namespace

void CheckTensorParallel(const TensorParallel& tp, int heads) {
  CheckParallelGroup("tensor-parallel", "TP", tp.size, tp.rank, tp.group);
  CONVEYOR_CHECK(heads % tp.size == 0)
      << "heads (" << heads << ") must divide by the tensor-parallel size (" << tp.size
      << "): every TP rank computes whole heads";
}

void CheckSequenceSplits(int64_t t, const TensorParallel& tp) {
  CONVEYOR_CHECK(!tp.splits_sequence() || t % tp.size == 0)
      << "a sequence of " << t << " tokens does not split over " << tp.size
      << " tensor-parallel ranks under sequence parallelism: use a sequence length divisible by "
      << tp.size;
}

ParameterSpec ReplicatedSpec(bool partial_over_tp) {
  ParameterSpec spec;
  if (partial_over_tp) spec.grad_sum.axes = {MeshAxis::kTp, MeshAxis::kDp};
  return spec;
}

at::Tensor ReduceFromTensorParallel(const at::Tensor& x, const TensorParallel& tp) {
  return tp.size == 1 ? x : ReduceFromRegion::apply(x, tp.group);
}

std::vector<at::Tensor> ColumnParallelLinears(const at::Tensor& x,
                                              const std::vector<ColumnLinear>& linears,
                                              const TensorParallel& tp) {
  std::vector<at::Tensor> outputs;
  if (tp.size == 1) {
    for (const ColumnLinear& l : linears) outputs.push_back(Linear(x, l.weight, l.bias));
    return outputs;
  }
  if (tp.splits_sequence()) CheckSequenceSplits(x.size(1) * tp.size, tp);
  std::vector<at::Tensor> weights, biases;
  std::vector<int64_t> bias_of;
  std::vector<double> scales;
  for (const ColumnLinear& l : linears) {
    weights.push_back(l.weight);
    bias_of.push_back(l.bias.defined() ? static_cast<int64_t>(biases.size()) : -1);
    if (l.bias.defined()) biases.push_back(l.bias);
    scales.push_back(l.input_grad_scale);
  }
  return ColumnParallelFunction::apply(x, at::TensorList(weights), at::TensorList(biases), bias_of,
                                       scales, tp.group, tp.splits_sequence());
}

at::Tensor ReduceOutOfTensorParallel(const at::Tensor& x, const TensorParallel& tp) {
  if (tp.size == 1) return x;
  if (!tp.splits_sequence()) return ReduceFromRegion::apply(x, tp.group);
  CheckSequenceSplits(x.size(1), tp);
  return ReduceScatterOutOfRegion::apply(x, tp.group);
}

at::Tensor TokensOfTensorParallelRank(const at::Tensor& x, const TensorParallel& tp) {
  if (tp.size == 1) return x;
  CONVEYOR_ASSERT(x.size(1) % tp.size == 0)
      << x.size(1) << " positions do not split over " << tp.size << " tensor-parallel ranks";
  return TakePositions::apply(x, tp.group);
}

at::Tensor TokensOfEveryTensorParallelRank(const at::Tensor& x, const TensorParallel& tp) {
  return tp.size == 1 ? x : GatherPositions::apply(x, tp.group);
}

at::Tensor SumOverKvReplicas(const at::Tensor& kv, const TensorParallel& tp) {
  return tp.kv_replicas == 1
             ? kv
             : SumOverReplicas::apply(kv, tp.group, static_cast<int64_t>(tp.kv_replicas));
}

at::Tensor RowParallelLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                             const TensorParallel& tp) {
  if (tp.size == 1) return Linear(x, weight, bias);
  // The partial products are summed in the weight's dtype (fp32), not autocast's.
  const at::Tensor sum =
      ReduceOutOfTensorParallel(Linear(x, weight, at::Tensor()).to(weight.scalar_type()), tp);
  return bias.defined() ? sum + bias : sum;
}

at::Tensor TakeShard(const at::Tensor& full, TensorParallelSplit split, int size, int rank) {
  CONVEYOR_CHECK(rank >= 0 && rank < size)
      << "tensor-parallel rank " << rank << " is outside [0, " << size << ")";
  if (split.replicated() || size == 1) return full;
  CONVEYOR_CHECK(split.dim < full.dim())
      << "a tensor of shape " << full.sizes() << " has no dim " << split.dim << " to split";
  const ShardRows part = ShardRowsOf(split, full.size(split.dim), size, rank);
  const int64_t block = full.size(split.dim) / split.blocks;
  std::vector<at::Tensor> parts;
  for (int b = 0; b < split.blocks; ++b) {
    parts.push_back(full.narrow(split.dim, b * block + part.begin, part.real));
  }
  const at::Tensor real = parts.size() == 1 ? parts[0] : at::cat(parts, split.dim);
  return PadToRows(real, split.dim, part.rows * split.blocks);
}

at::Tensor GatherShards(const at::Tensor& local, TensorParallelSplit split,
                        const TensorParallel& tp, int64_t extent) {
  if (split.replicated() || tp.size == 1) return local;
  const std::vector<at::Tensor> ranks = tp.group->AllGather(local);  // rank order
  std::vector<at::Tensor> parts;  // block 0 of every part, then block 1, ...
  for (int b = 0; b < split.blocks; ++b) {
    for (size_t r = 0; r < ranks.size(); r += split.replicas) {  // the first holder of each
      parts.push_back(ranks[r].chunk(split.blocks, split.dim)[b]);
    }
  }
  const at::Tensor whole = at::cat(parts, split.dim);
  CONVEYOR_ASSERT(whole.size(split.dim) >= extent)
      << "gathered " << whole.size(split.dim) << " rows of a tensor of " << extent;
  return whole.size(split.dim) == extent ? whole : whole.narrow(split.dim, 0, extent);
}

at::Tensor ShardParam(const std::string& name, const ParameterSpec& spec, const at::Tensor& full,
                      const TensorParallel& tp, ParameterSpecs& specs) {
  specs.Declare(name, spec);
  if (spec.tp.replicated() || tp.size == 1) return full;
  return TakeShard(full.detach(), spec.tp, tp.size, tp.rank)
      .clone(at::MemoryFormat::Contiguous)
      .requires_grad_(true);
}

at::Tensor UndrawnParam(const std::string& name, const ParameterSpec& spec,
                        std::vector<int64_t> shape, const TensorParallel& tp, ParameterSpecs& specs,
                        WeightInit init) {
  CONVEYOR_ASSERT(init != WeightInit::kDrawn) << name << " is to be drawn";
  specs.Declare(name, spec);
  const TensorParallelSplit split = spec.tp;
  if (!split.replicated()) {
    const ShardRows part = ShardRowsOf(split, shape[split.dim], tp.size, tp.rank);
    shape[split.dim] = part.rows * split.blocks;
  }
  const at::Device device = init == WeightInit::kShapesOnly ? at::kMeta : at::kCPU;
  return at::empty(shape, at::TensorOptions().dtype(at::kFloat).device(device))
      .requires_grad_(true);
}

}  // namespace conveyor
