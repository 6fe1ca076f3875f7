#include "conveyor/nn/vocab_parallel.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>
#include <vector>

#include "conveyor/comm/transport.h"
#include "conveyor/common/error.h"

namespace conveyor {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

void CheckRange(const at::Tensor& ids, int64_t low, int64_t end, const char* what) {
  if (ids.numel() == 0) return;
  const int64_t min = ids.min().item<int64_t>(), max = ids.max().item<int64_t>();
  CONVEYOR_CHECK(min >= low && max < end) << what << " must be in [" << low << ", " << end
                                          << "), got values from " << min << " to " << max;
}

// Where `ids` fall among a rank's vocabulary rows [begin, begin + rows): `here` (bool, ids'
// shape) tells which do, `index` is their local row (0 for the others).
struct LocalRows {
  at::Tensor index, here;
};

LocalRows ToLocalRows(const at::Tensor& ids, int64_t begin, int64_t rows) {
  const at::Tensor local = ids - begin;
  at::Tensor here = local.ge(0).logical_and(local.lt(rows));
  return {local.masked_fill(here.logical_not(), 0), here};
}

// The autograd function of VocabParallelCrossEntropySum for tp.size > 1. The row maximum
// (for stability) comes from an all-gather of the ranks' maxima; the sum of exponentials and
// the target's logit from one all-reduce. `logits` (N, real) are the rank's real columns, the
// vocabulary's [begin, begin + real). Keeps the local softmax (N, real) for backward.
struct CrossEntropySum : public torch::autograd::Function<CrossEntropySum> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits,
                            const at::Tensor& targets, Transport* group, int64_t begin) {
    const at::Tensor max = at::stack(group->AllGather(logits.amax(-1))).amax(0);  // (N)
    const at::Tensor shifted = logits - max.unsqueeze(-1);                        // (N, real)
    const LocalRows rows = ToLocalRows(targets, begin, logits.size(-1));
    at::Tensor exp = shifted.exp();
    const at::Tensor target_logit = shifted.gather(-1, rows.index.unsqueeze(-1)).squeeze(-1);
    std::vector<at::Tensor> sums = {exp.sum(-1), target_logit.masked_fill(~rows.here, 0)};
    group->AllReduceSum(sums);  // (N) each: sum of exp over the vocabulary, the target's logit
    const at::Tensor counted = targets.ge(0);
    ctx->save_for_backward(
        {exp.div_(sums[0].unsqueeze(-1)), rows.index, rows.here.logical_and(counted), counted});
    return (sums[0].log() - sums[1]).masked_fill(~counted, 0).sum();
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &softmax = saved[0], &index = saved[1], &hit = saved[2], &counted = saved[3];
    at::Tensor grad = softmax * counted.unsqueeze(-1).to(softmax.scalar_type());
    grad.scatter_add_(-1, index.unsqueeze(-1), -hit.unsqueeze(-1).to(grad.scalar_type()));
    return {grad.mul_(grads[0]), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor VocabParallelEmbedding(const at::Tensor& ids, const at::Tensor& weight,
                                  const TensorParallel& tp, int64_t vocab) {
  if (tp.size == 1) return at::embedding(weight, ids);
  CheckRange(ids, 0, vocab, "token ids");
  const int64_t rows = weight.size(0);
  const LocalRows local = ToLocalRows(ids, tp.rank * rows, rows);
  const at::Tensor mine =
      at::embedding(weight, local.index).masked_fill(~local.here.unsqueeze(-1), 0);
  return ReduceOutOfTensorParallel(mine, tp);
}

at::Tensor VocabParallelCrossEntropySum(const at::Tensor& half_or_float_logits,
                                        const at::Tensor& targets, const TensorParallel& tp,
                                        int64_t vocab) {
  const at::Tensor logits = half_or_float_logits.to(at::kFloat);  // bf16 under autocast
  if (tp.size == 1) {
    return at::cross_entropy_loss(logits, targets, /*weight=*/{}, at::Reduction::Sum,
                                  /*ignore_index=*/-1);
  }
  CheckRange(targets, -1, vocab, "targets");
  const ShardRows part = ShardRowsOf({0, 1, true}, vocab, tp.size, tp.rank);
  CONVEYOR_ASSERT(logits.size(-1) == part.rows)
      << "rank " << tp.rank << " has " << logits.size(-1) << " vocabulary columns, not "
      << part.rows << " of a vocabulary of " << vocab;
  // The padded columns are cut off before the loss (autograd gives them a zero gradient).
  return CrossEntropySum::apply(logits.narrow(-1, 0, part.real), targets, tp.group, part.begin);
}

}  // namespace conveyor
