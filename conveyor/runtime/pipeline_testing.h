// Test support: run one step of a small GPT through a pipeline of threads (in-process
// transport) and through a single process, and collect loss and gradients by global name.
#ifndef CONVEYOR_RUNTIME_PIPELINE_TESTING_H_
#define CONVEYOR_RUNTIME_PIPELINE_TESTING_H_

#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "conveyor/nn/gpt.h"
#include "conveyor/runtime/microbatch.h"
#include "conveyor/schedule/program.h"

namespace conveyor::testing {

struct StepOutcome {
  double loss = 0;
  std::map<std::string, at::Tensor> grads;   // summed over copies of a parameter
  std::map<std::string, at::Tensor> params;  // after `steps` SGD steps (one copy)
};

nn::GptConfig SmallGpt();

// n samples of length t, random tokens, sample i padded after a random length.
Batch MakeBatch(const nn::GptConfig& config, int n, int t, uint64_t seed);

// Contiguous split of `count` layers into `chunks` slices whose sizes differ by at most one.
std::vector<std::pair<int, int>> EvenSlices(int count, int chunks);

// `steps` steps of plain SGD (lr) over one batch each; outcome of the last step's grads.
StepOutcome RunReference(const nn::GptConfig& config, uint64_t seed,
                         const std::vector<Batch>& batches, double lr);
StepOutcome RunPipeline(const Program& compute_program, const nn::GptConfig& config,
                        uint64_t seed, const std::vector<Batch>& batches, double lr);

}  // namespace conveyor::testing

#endif  // CONVEYOR_RUNTIME_PIPELINE_TESTING_H_
