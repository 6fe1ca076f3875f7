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

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
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

at::Tensor RowParallelLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                             const TensorParallel& tp) {
  if (tp.size == 1) return Linear(x, weight, bias);
  // The partial products are summed in the weight's dtype (fp32), not autocast's.
  const at::Tensor sum =
      ReduceFromTensorParallel(Linear(x, weight, at::Tensor()).to(weight.scalar_type()), tp);
  return bias.defined() ? sum + bias : sum;
}

TensorParallelSplit TensorParallelSplitOf(std::string_view name) {
  struct Rule {
    std::string_view suffix;
    TensorParallelSplit split;
  };
  static constexpr Rule kRules[] = {
      {".attn.qkv.weight", {0, 3}},
      {".attn.qkv.bias", {0, 3}},
      {".attn.proj.weight", {1, 1}},
      {".mlp.fc.weight", {0, 1}},
      {".mlp.fc.bias", {0, 1}},
      {".mlp.proj.weight", {1, 1}},
      {"embed.wte", {0, 1}},
      {"head.lm.weight", {0, 1}},
      // Llama, in Hugging Face's names.
      {".self_attn.q_proj.weight", {0, 1}},
      {".self_attn.k_proj.weight", {0, 1}},
      {".self_attn.v_proj.weight", {0, 1}},
      {".self_attn.o_proj.weight", {1, 1}},
      {".mlp.gate_proj.weight", {0, 1}},
      {".mlp.up_proj.weight", {0, 1}},
      {".mlp.down_proj.weight", {1, 1}},
      {"model.embed_tokens.weight", {0, 1}},
      {"lm_head.weight", {0, 1}},
  };
  for (const Rule& rule : kRules) {
    if (EndsWith(name, rule.suffix)) return rule.split;
  }
  return {};
}

at::Tensor TakeShard(const at::Tensor& full, TensorParallelSplit split, int size, int rank) {
  CONVEYOR_CHECK(rank >= 0 && rank < size)
      << "tensor-parallel rank " << rank << " is outside [0, " << size << ")";
  if (split.replicated() || size == 1) return full;
  CONVEYOR_CHECK(split.dim < full.dim() && full.size(split.dim) % (split.blocks * size) == 0)
      << "a tensor of shape " << full.sizes() << " cannot be split along dim " << split.dim
      << " into " << split.blocks << " block(s) of " << size << " tensor-parallel parts";
  const int64_t block = full.size(split.dim) / split.blocks, part = block / size;
  std::vector<at::Tensor> parts;
  for (int b = 0; b < split.blocks; ++b) {
    parts.push_back(full.narrow(split.dim, b * block + rank * part, part));
  }
  return parts.size() == 1 ? parts[0] : at::cat(parts, split.dim);
}

at::Tensor GatherShards(const at::Tensor& local, TensorParallelSplit split,
                        const TensorParallel& tp) {
  if (split.replicated() || tp.size == 1) return local;
  const std::vector<at::Tensor> ranks = tp.group->AllGather(local);  // rank order
  std::vector<at::Tensor> parts;  // block 0 of every rank, then block 1, ...
  for (int b = 0; b < split.blocks; ++b) {
    for (const at::Tensor& shard : ranks) parts.push_back(shard.chunk(split.blocks, split.dim)[b]);
  }
  return at::cat(parts, split.dim);
}

at::Tensor ShardParam(std::string_view name, const at::Tensor& full, const TensorParallel& tp) {
  const TensorParallelSplit split = TensorParallelSplitOf(name);
  if (split.replicated() || tp.size == 1) return full;
  return TakeShard(full.detach(), split, tp.size, tp.rank)
      .clone(at::MemoryFormat::Contiguous)
      .requires_grad_(true);
}

at::Tensor UndrawnParam(std::string_view name, std::vector<int64_t> shape,
                        const TensorParallel& tp) {
  const TensorParallelSplit split = TensorParallelSplitOf(name);
  if (!split.replicated()) shape[split.dim] /= tp.size;
  return at::empty(shape, at::kFloat).requires_grad_(true);
}

}  // namespace conveyor
