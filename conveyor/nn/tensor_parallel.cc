#include "conveyor/nn/tensor_parallel.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>
#include <string>
#include <vector>

#include "conveyor/comm/transport.h"
#include "conveyor/common/error.h"
#include "conveyor/nn/linear.h"

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

// The autograd function of CopyToTensorParallel (the group is not a tensor: no gradient).
struct CopyToRegion : public torch::autograd::Function<CopyToRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Transport* group) {
    SaveGroup(ctx, group);
    return x;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {SumOver(SavedGroup(ctx), grads[0]), at::Tensor()};
  }
};

// The autograd function of ReduceFromTensorParallel.
struct ReduceFromRegion : public torch::autograd::Function<ReduceFromRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Transport* group) {
    return SumOver(group, x);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {grads[0], at::Tensor()};
  }
};

// Rows [rank N / p, (rank + 1) N / p) of x (N, ...): the autograd function of
// TokensOfTensorParallelRank.
struct TakeRows : public torch::autograd::Function<TakeRows> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Transport* group) {
    SaveGroup(ctx, group);
    const int64_t part = x.size(0) / group->world_size();
    return x.narrow(0, group->rank() * part, part);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {at::cat(SavedGroup(ctx)->AllGather(grads[0])), at::Tensor()};
  }
};

// Every rank's rows, in rank order: the autograd function of TokensOfEveryTensorParallelRank.
struct GatherRows : public torch::autograd::Function<GatherRows> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Transport* group) {
    SaveGroup(ctx, group);
    return at::cat(group->AllGather(x));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    Transport* group = SavedGroup(ctx);
    const int64_t part = grads[0].size(0) / group->world_size();
    return {grads[0].narrow(0, group->rank() * part, part).contiguous(), at::Tensor()};
  }
};

// The autograd function of ScaleToKvReplicas.
struct ScaleGradient : public torch::autograd::Function<ScaleGradient> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, double factor) {
    ctx->saved_data["factor"] = factor;
    return x;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {grads[0] * ctx->saved_data["factor"].toDouble(), at::Tensor()};
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
  CONVEYOR_CHECK(tp.size >= 1) << "the tensor-parallel size must be at least 1, got " << tp.size;
  CONVEYOR_CHECK(tp.rank >= 0 && tp.rank < tp.size)
      << "tensor-parallel rank " << tp.rank << " is outside [0, " << tp.size << ")";
  CONVEYOR_CHECK(tp.size == 1 || tp.group != nullptr)
      << "tensor-parallel size " << tp.size << " needs the TP group's transport, got none";
  if (tp.group != nullptr) {
    CONVEYOR_CHECK(tp.group->world_size() == tp.size && tp.group->rank() == tp.rank)
        << "the tensor-parallel group is rank " << tp.group->rank() << " of "
        << tp.group->world_size() << ", but the model is built for rank " << tp.rank << " of "
        << tp.size;
  }
  CONVEYOR_CHECK(heads % tp.size == 0)
      << "heads (" << heads << ") must divide by the tensor-parallel size (" << tp.size
      << "): every TP rank computes whole heads";
}

at::Tensor CopyToTensorParallel(const at::Tensor& x, const TensorParallel& tp) {
  return tp.size == 1 ? x : CopyToRegion::apply(x, tp.group);
}

at::Tensor ReduceFromTensorParallel(const at::Tensor& x, const TensorParallel& tp) {
  return tp.size == 1 ? x : ReduceFromRegion::apply(x, tp.group);
}

at::Tensor TokensOfTensorParallelRank(const at::Tensor& x, const TensorParallel& tp) {
  if (tp.size == 1) return x;
  CONVEYOR_ASSERT(x.size(0) % tp.size == 0)
      << x.size(0) << " tokens do not split over " << tp.size << " tensor-parallel ranks";
  return TakeRows::apply(x, tp.group);
}

at::Tensor TokensOfEveryTensorParallelRank(const at::Tensor& x, const TensorParallel& tp) {
  return tp.size == 1 ? x : GatherRows::apply(x, tp.group);
}

at::Tensor ScaleToKvReplicas(const at::Tensor& x, const TensorParallel& tp) {
  return tp.kv_replicas == 1 ? x : ScaleGradient::apply(x, 1.0 / tp.kv_replicas);
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
      ReduceFromTensorParallel(Linear(x, weight, at::Tensor()).to(weight.scalar_type()), tp);
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
