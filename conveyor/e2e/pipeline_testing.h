// Test support: run one step of a small GPT through a pipeline of threads (in-process
// transport) and through a single process, and collect loss and gradients by global name.
#ifndef CONVEYOR_E2E_PIPELINE_TESTING_H_
#define CONVEYOR_E2E_PIPELINE_TESTING_H_

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "conveyor/comm/transport.h"
#include "conveyor/module/microbatch.h"
#include "conveyor/nn/gpt.h"
#include "conveyor/runtime/pipeline_rank.h"
#include "conveyor/schedule/program.h"

namespace conveyor {

struct StepOutcome {
  double loss = 0;
  std::map<std::string, at::Tensor> grads;   // summed over copies of a parameter
  std::map<std::string, at::Tensor> params;  // after `steps` SGD steps (one copy)
  std::map<std::string, double> auxiliary;   // the last step's auxiliary losses, over ranks
};

// An auxiliary loss term (module/auxiliary_loss.h) added from inside the model: after the
// layers of part `after_part` of `layout`'s split (as GptStages cuts it), "square" = the
// mean over the micro-batch's counted targets of |hidden|^2 at that point. Its shares over a
// batch's micro-batches add up to the same mean over the whole batch, so one process with
// the term after the same layers is the pipeline's reference. after_part < 0: none.
struct SquareTermAt {
  const Layout* layout = nullptr;
  int after_part = -1;
};

GptConfig SmallGpt();

// n samples of length t, random tokens, sample i padded after a random length.
Batch MakeBatch(const GptConfig& config, int n, int t, uint64_t seed);

// The GPT's layers split evenly over the layout's parts, one module per stage; with
// `square_after_part` >= 0 the term of SquareTermAt after that part's layers.
MakeStageModule GptStages(const Layout& layout, const GptConfig& config, uint64_t seed,
                          int square_after_part = -1);

// One step of one rank over `transport`: this rank's loss and gradients by name (copies on
// this rank summed). `program` must be lowered.
StepOutcome RunRankStep(const Program& program, int rank, Transport& transport,
                        const GptConfig& config, uint64_t seed, const Batch& batch);

// `steps` steps of plain SGD (lr) over one batch each; outcome of the last step's grads.
// With `rounded_at` (a layout), the hidden state crossing between two of its parts (as
// GptStages cuts them) is cast to `dtype` and back in forward, and so its gradient in
// backward: the reference for a pipeline whose messages are in `dtype`.
// With `square`, the term after its layers, added to the loss.
StepOutcome RunReference(const GptConfig& config, uint64_t seed, const std::vector<Batch>& batches,
                         double lr, const Layout* rounded_at = nullptr,
                         at::ScalarType dtype = at::kFloat, const SquareTermAt& square = {});
// With `recompute`, every stage recomputes its forward at backward time (Stage::set_recompute).
// Every stage sends its activations and input gradients in `message_dtype`
// (Stage::set_message_dtype). The ranks' transports match messages by order, as NCCL does
// (TransportOptions::match_by_order), so a program posting two ranks' messages in different
// orders fails.
// With `square_after_part` >= 0, the term of SquareTermAt after that part's layers.
StepOutcome RunPipeline(const Program& compute_program, const GptConfig& config, uint64_t seed,
                        const std::vector<Batch>& batches, double lr, bool recompute = false,
                        at::ScalarType message_dtype = at::kFloat, int square_after_part = -1);

}  // namespace conveyor

#endif  // CONVEYOR_E2E_PIPELINE_TESTING_H_
