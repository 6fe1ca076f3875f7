#include "conveyor/module/microbatch.h"

#include <ATen/ATen.h>

#include "conveyor/common/error.h"

namespace conveyor {

double CountTargets(const at::Tensor& targets) {
  const int64_t counted = targets.ge(0).sum().item<int64_t>();
  return static_cast<double>(std::max<int64_t>(counted, 1));
}

std::vector<MicroBatch> SplitBatch(const Batch& batch, int m) {
  CONVEYOR_CHECK(batch.inputs.defined() && batch.inputs.dim() >= 1) << "the batch has no inputs";
  const int64_t n = batch.inputs.size(0);
  CONVEYOR_CHECK(m >= 1) << "micro-batches must be at least 1, got " << m;
  CONVEYOR_CHECK(n >= m) << "a batch of " << n << " samples cannot be split into " << m
                         << " micro-batches (batch size must be >= micro-batches)";
  CONVEYOR_CHECK(batch.targets.defined() && batch.targets.size(0) == n)
      << "the batch has " << n << " inputs but "
      << (batch.targets.defined() ? batch.targets.size(0) : 0) << " targets";
  CONVEYOR_CHECK(!batch.attention_mask.defined() ||
                 batch.attention_mask.sizes() == batch.inputs.sizes())
      << "attention mask " << batch.attention_mask.sizes() << " does not match inputs "
      << batch.inputs.sizes();
  const double denominator = CountTargets(batch.targets);
  std::vector<MicroBatch> out;
  int64_t start = 0;
  for (int i = 0; i < m; ++i) {
    const int64_t size = n / m + (i < n % m ? 1 : 0);
    MicroBatch mb;
    mb.index = i;
    mb.first_sample = start;
    mb.inputs = batch.inputs.narrow(0, start, size);
    mb.targets = batch.targets.narrow(0, start, size);
    if (batch.attention_mask.defined())
      mb.attention_mask = batch.attention_mask.narrow(0, start, size);
    mb.loss_denominator = denominator;
    out.push_back(std::move(mb));
    start += size;
  }
  return out;
}

}  // namespace conveyor
