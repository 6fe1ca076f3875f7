#include "conveyor/module/microbatch.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <utility>

#include "conveyor/common/error.h"

namespace conveyor {

double CountTargets(const at::Tensor& targets) {
  const int64_t counted = targets.ge(0).sum().item<int64_t>();
  return static_cast<double>(std::max<int64_t>(counted, 1));
}

namespace {

// The batch's sample count, after checking that its fields agree.
int64_t CheckedSamples(const Batch& batch) {
  CONVEYOR_CHECK(batch.inputs.defined() && batch.inputs.dim() >= 1) << "the batch has no inputs";
  const int64_t n = batch.inputs.size(0);
  CONVEYOR_CHECK(batch.targets.defined() && batch.targets.size(0) == n)
      << "the batch has " << n << " inputs but "
      << (batch.targets.defined() ? batch.targets.size(0) : 0) << " targets";
  CONVEYOR_CHECK(!batch.attention_mask.defined() ||
                 batch.attention_mask.sizes() == batch.inputs.sizes())
      << "attention mask " << batch.attention_mask.sizes() << " does not match inputs "
      << batch.inputs.sizes();
  CONVEYOR_CHECK(!batch.positions.defined() || batch.positions.sizes() == batch.inputs.sizes())
      << "positions " << batch.positions.sizes() << " do not match inputs "
      << batch.inputs.sizes();
  return n;
}

}  // namespace

std::vector<MicroBatch> SplitBatch(const Batch& batch, int m, double loss_denominator) {
  const int64_t n = CheckedSamples(batch);
  CONVEYOR_CHECK(m >= 1) << "micro-batches must be at least 1, got " << m;
  CONVEYOR_CHECK(n >= m) << "a batch of " << n << " samples cannot be split into " << m
                         << " micro-batches (batch size must be >= micro-batches)";
  const double denominator = loss_denominator > 0 ? loss_denominator : CountTargets(batch.targets);
  std::vector<MicroBatch> out;
  for (int i = 0; i < m; ++i) {
    const auto [first, size] = PartOf(n, i, m);
    MicroBatch mb;
    mb.index = i;
    mb.first_sample = first;
    mb.inputs = batch.inputs.narrow(0, first, size);
    mb.targets = batch.targets.narrow(0, first, size);
    if (batch.attention_mask.defined())
      mb.attention_mask = batch.attention_mask.narrow(0, first, size);
    if (batch.positions.defined()) mb.positions = batch.positions.narrow(0, first, size);
    mb.loss_denominator = denominator;
    mb.share = static_cast<double>(mb.targets.ge(0).sum().item<int64_t>()) / denominator;
    out.push_back(std::move(mb));
  }
  return out;
}

Batch ToDevice(const Batch& batch, const c10::Device& device) {
  auto to = [&](const at::Tensor& t) { return t.defined() ? t.to(device) : t; };
  return Batch{to(batch.inputs), to(batch.targets), to(batch.attention_mask),
               to(batch.positions)};
}

std::pair<int64_t, int64_t> PartOf(int64_t n, int i, int m) {
  const int64_t first = i * (n / m) + std::min<int64_t>(i, n % m);
  return {first, n / m + (i < n % m ? 1 : 0)};
}

Batch SliceBatch(const Batch& batch, int index, int count) {
  const int64_t n = CheckedSamples(batch);
  CONVEYOR_CHECK(count >= 1 && n >= count)
      << "a batch of " << n << " samples cannot be shared by " << count
      << " data-parallel replicas (batch size must be >= dp x micro-batches)";
  CONVEYOR_ASSERT(index >= 0 && index < count) << "part " << index << " of " << count;
  const auto [first, size] = PartOf(n, index, count);
  Batch part;
  part.inputs = batch.inputs.narrow(0, first, size);
  part.targets = batch.targets.narrow(0, first, size);
  if (batch.attention_mask.defined()) {
    part.attention_mask = batch.attention_mask.narrow(0, first, size);
  }
  if (batch.positions.defined()) part.positions = batch.positions.narrow(0, first, size);
  return part;
}

}  // namespace conveyor
