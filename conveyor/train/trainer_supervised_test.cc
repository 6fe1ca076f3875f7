// Fine-tuning data in training: a loss mask (data/open_token_source.h) leaves only its targets
// in the loss, and document masks (module/microbatch.h) keep packed documents apart. The first
// step's loss and gradient norm are those of a reference that reads the files itself and
// counts the marked targets only; every mesh and schedule family trains as one process.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "conveyor/comm/rank_context.h"
#include "conveyor/common/scratch_folder_testing.h"
#include "conveyor/data/data_testing.h"
#include "conveyor/data/indexed_dataset.h"
#include "conveyor/data/indexed_lm_stream.h"
#include "conveyor/data/open_token_source.h"
#include "conveyor/nn/layer.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/evaluate.h"
#include "conveyor/train/hf_reference_testing.h"
#include "conveyor/train/train_testing.h"

namespace conveyor {
namespace {

// A Llama (or the GPT) on 200 counting documents (5 to 11 tokens each) with their loss mask.
TrainConfig MaskedLlama(const ScratchFolder& scratch, bool document_mask, bool gpt = false) {
  const std::string prefix = scratch.Path("sft");
  if (!IsIndexedDataset(prefix)) {
    WriteCountingDataSet(prefix, 200);
    WriteCountingLossMask(prefix, 200);
  }
  TrainConfig c = gpt ? TinyGpt() : TinyLlama();
  c.batch_size = 8;
  c.data = prefix;
  c.split = "95,5,0";
  c.document_mask = document_mask;
  c.microbatches = 4;
  return c;
}

// The first step's loss and gradient norm, from the files alone: each row's window of the
// stream, its inputs rotated by their position in their document and attending within it (or
// along the window without document masks), the cross-entropy summed over the targets the
// mask marks, over their count in the batch.
std::pair<double, double> ReferenceFirstStep(const TrainConfig& c) {
  const std::shared_ptr<const TokenSource> data = OpenTokenSource(c.data);
  const std::shared_ptr<const TokenSource> mask = OpenLossMask(c.data, *data);
  const int64_t t = c.model.seq_len, n = c.batch_size;
  const IndexedLmStream stream(data, {t, n, 256, c.seed, ParseSplit(c.split)});
  const auto& index = dynamic_cast<const IndexedDataset&>(*data);
  at::Tensor inputs = at::zeros({n, t}, at::kLong), positions = at::zeros({n, t}, at::kLong);
  std::vector<std::vector<int64_t>> tokens(n, std::vector<int64_t>(t + 1)), marks = tokens;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t start = stream.TrainWindowStart(i);
    data->ReadStream(start, t + 1, tokens[i].data());
    mask->ReadStream(start, t + 1, marks[i].data());
    for (int64_t k = 0; k < t; ++k) {
      inputs[i][k] = tokens[i][k];
      const int64_t first = std::max(start, index.DocumentOffset(index.DocumentAt(start + k)));
      positions[i][k] = c.document_mask ? start + k - first : k;
    }
  }
  LayerStack model(BuildAllLayers(*MakeModelTask(c)));
  MicroBatch mb;
  mb.inputs = inputs;
  mb.targets = at::zeros_like(inputs);
  if (c.document_mask) mb.positions = positions;
  const at::Tensor logits = model.Forward(inputs, mb);  // (n, T, V)
  const at::Tensor log_p = logits.log_softmax(-1);
  at::Tensor sum = at::zeros({}, at::kFloat);
  int64_t counted = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < t; ++k) {
      if (marks[i][k + 1] == 0) continue;
      sum = sum - log_p[i][k][tokens[i][k + 1]];
      ++counted;
    }
  }
  EXPECT_GT(counted, 0);
  EXPECT_LT(counted, n * t);
  const at::Tensor loss = sum / static_cast<double>(counted);
  loss.backward();
  double squares = 0;
  for (const auto& [name, p] : model.NamedParameters()) {
    squares += p.grad().pow(2).sum().item<double>();
  }
  return {loss.item<double>(), std::sqrt(squares)};
}

TEST(TrainerSupervisedTest, TheFirstStepCountsOnlyTheMaskedTargets) {
  at::set_num_threads(1);
  ScratchFolder scratch;
  for (bool gpt : {false, true}) {
    for (bool document_mask : {false, true}) {
      const TrainConfig c = MaskedLlama(scratch, document_mask, gpt);
      Trainer trainer(c, MakeTask(c), InProcessRank(nullptr, c.device));
      const StepMetrics step = trainer.Step();
      const auto [loss, norm] = ReferenceFirstStep(c);
      const std::string what = DescribeRun(c) + ", document mask " + (document_mask ? "on" : "off");
      EXPECT_NEAR(step.loss, loss, 1e-6 * loss) << what;
      EXPECT_NEAR(step.grad_norm, norm, 1e-5 * norm) << what;
    }
  }
}

// Masked targets and packed documents across the mesh: data parallelism (each replica's loss
// over the whole batch's count of targets), pipeline schedules of every family, tensor and
// sequence parallelism, context parallelism (ring attention masking documents), ZeRO-1 and
// recomputation.
TEST(TrainerSupervisedTest, MaskedPackedDataTrainsAsOneProcessOnEveryMesh) {
  at::set_num_threads(1);
  ScratchFolder scratch;
  // The GPT's learned positions restart at each document too.
  const TrainConfig gpt = MaskedLlama(scratch, true, true);
  Weights gpt_want, gpt_got;
  const std::vector<double> gpt_reference = TrainCollecting(gpt, gpt_want);
  const TrainConfig gpt_mesh = WithMesh(gpt, {2, 2, 2, "zb-h1"});
  ExpectSameLosses(gpt_reference, TrainCollecting(gpt_mesh, gpt_got), DescribeRun(gpt_mesh));
  ExpectSameWeights(gpt_want, gpt_got, gpt.lr, DescribeRun(gpt_mesh));
  const TrainConfig base = MaskedLlama(scratch, true);
  Weights want;
  const std::vector<double> reference = TrainCollecting(base, want);
  const std::vector<MeshRun> runs = {{1, 1, 2, "1f1b"},
                                     {2, 1, 2, "zb-h1"},
                                     {1, 1, 2, "dualpipe-v"},
                                     {2, 2, 1, "gpipe", /*zero=*/1},
                                     {1, 2, 2, "interleaved-1f1b", 0, Recompute::kSelective},
                                     {1, 1, 1, "1f1b", 0, Recompute::kNone, /*cp=*/2},
                                     {1, 2, 2, "zb-h1", 0, Recompute::kFull, /*cp=*/2}};
  for (const MeshRun& run : runs) {
    TrainConfig c = WithMesh(base, run);
    c.sequence_parallel = run.tp > 1;
    Weights got;
    ExpectSameLosses(reference, TrainCollecting(c, got), DescribeRun(c));
    ExpectSameWeights(want, got, c.lr, DescribeRun(c));
  }
}

// Rows packing two documents of random lengths: each document's predictions are as alone
// (its own row, padded) on every evaluation mesh: pipeline, tensor and data parallelism. The
// target across the boundary (the second document's first token) is not counted.
void ExpectPackedDocumentsPredictAsAlone(const TrainConfig& c) {
  const int64_t t = c.model.seq_len, rows = 8;
  at::Generator gen = LayerInitGenerator(17, 0);
  const at::Tensor ids = at::randint(256, {rows, t + 1}, gen, at::kLong);
  Batch packed, alone;
  packed.inputs = ids.narrow(1, 0, t).clone();
  packed.targets = ids.narrow(1, 1, t).clone();
  packed.positions = at::zeros({rows, t}, at::kLong);
  alone.inputs = at::zeros({2 * rows, t}, at::kLong);
  alone.targets = at::full({2 * rows, t}, -1, at::kLong);
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t first = 3 + r;  // the first document's tokens; the second's from there
    packed.positions[r].narrow(0, 0, first).copy_(at::arange(first, at::kLong));
    packed.positions[r].narrow(0, first, t - first).copy_(at::arange(t - first, at::kLong));
    packed.targets[r][first - 1] = -1;
    alone.inputs[2 * r].narrow(0, 0, first).copy_(ids[r].narrow(0, 0, first));
    alone.targets[2 * r].narrow(0, 0, first - 1).copy_(ids[r].narrow(0, 1, first - 1));
    alone.inputs[2 * r + 1].narrow(0, 0, t - first).copy_(ids[r].narrow(0, first, t - first));
    alone.targets[2 * r + 1].narrow(0, 0, t - first).copy_(ids[r].narrow(0, first + 1, t - first));
    counted += t - 1;
  }
  auto halves = [](const Batch& b) {
    const int64_t n = b.inputs.size(0) / 2;
    std::vector<Batch> out(2);
    for (int i = 0; i < 2; ++i) {
      out[i].inputs = b.inputs.narrow(0, i * n, n);
      out[i].targets = b.targets.narrow(0, i * n, n);
      if (b.positions.defined()) out[i].positions = b.positions.narrow(0, i * n, n);
    }
    return out;
  };
  const double want = EvalLossOnOneRank(c, {alone});
  // To 2e-6: without the positions, the second documents seeing the first ones and rotated on,
  // a model of random weights (which uses little of its context) is off by 1e-5 and more.
  ExpectEvalLossOnEveryMesh(c, halves(packed), counted, want, 2e-6);
  Batch mixed = packed;
  mixed.positions = at::Tensor();
  EXPECT_GT(std::abs(EvalLossOnOneRank(c, {mixed}) - want), 1e-5 * want);
}

TEST(TrainerSupervisedTest, PackedDocumentsPredictAsAloneOnEveryMesh) {
  at::set_num_threads(1);
  for (const TrainConfig& c : {TinyLlama(), TinyGpt()}) {
    SCOPED_TRACE(DescribeRun(c));
    ExpectPackedDocumentsPredictAsAlone(c);
  }
}

TEST(TrainerSupervisedTest, DocumentMasksAreRefusedWhereTheyDoNotApply) {
  ScratchFolder scratch;
  TrainConfig classifier = MaskedLlama(scratch, true);
  classifier.model.kind = ModelKind::kClassifier;
  try {
    classifier.Validate();
    ADD_FAILURE() << "--document-mask on a classifier accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("the classifier takes whole examples"),
              std::string::npos)
        << e.what();
  }
  TrainConfig text = TinyLlama();
  text.document_mask = true;
  EXPECT_THROW(MakeTask(text), UserError);
}

}  // namespace
}  // namespace conveyor
