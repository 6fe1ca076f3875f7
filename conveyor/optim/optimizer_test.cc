#include "conveyor/optim/optimizer.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/device/compute_device.h"
#include "conveyor/device/torch_compat.h"

namespace conveyor {
namespace {

TEST(AdamWTest, FirstStepMovesByLrTimesSignAndDecaysMatrices) {
  at::Tensor w = at::ones({2, 2}).requires_grad_(true);
  at::Tensor b = at::ones({2}).requires_grad_(true);
  w.mutable_grad() = at::full({2, 2}, 0.5);
  b.mutable_grad() = at::full({2}, -2.0);
  AdamW adam(AdamWOptions{0.9, 0.95, 0, 0.1});
  adam.Step({{"w", w}, {"b", b}}, 0.01, 1);
  // Bias-corrected first step: m / sqrt(v) = sign(g); decay only on the matrix.
  EXPECT_TRUE(at::allclose(w, at::full({2, 2}, 1 * (1 - 0.01 * 0.1) - 0.01)));
  EXPECT_TRUE(at::allclose(b, at::full({2}, 1 + 0.01)));
}

TEST(AdamWTest, StateRoundTripsAndIsChecked) {
  at::Tensor w = at::ones({3}).requires_grad_(true);
  w.mutable_grad() = at::ones({3});
  AdamW a(AdamWOptions{});
  a.Step({{"w", w}}, 0.1, 1);
  const auto state = a.State();
  ASSERT_EQ(state.size(), 2u);
  AdamW b(AdamWOptions{});
  EXPECT_NO_THROW(b.LoadState({{"w", w}}, state));
  EXPECT_TRUE(at::equal(b.State().at("w/exp_avg"), state.at("w/exp_avg")));
  EXPECT_THROW(b.LoadState({{"v", w}}, state), UserError);
  auto wrong = state;
  wrong["w/exp_avg"] = at::zeros({4});
  EXPECT_THROW(b.LoadState({{"w", w}}, wrong), UserError);
}

// Parameters of several shapes (matrices decayed, vectors not) after three updates through
// `options`, from gradients drawn the same way for every call.
// `device` (the CPU unless given): drawn on the CPU, updated there; returned on the CPU.
std::vector<at::Tensor> AfterThreeSteps(const AdamWOptions& options,
                                        c10::Device device = c10::Device(c10::kCPU)) {
  at::manual_seed(7);
  std::vector<at::Tensor> params = {at::randn({33, 17}), at::randn({5}), at::randn({8, 8, 3}),
                                    at::randn({1})};
  for (at::Tensor& p : params) p = p.to(device);
  NamedTensors named;
  for (size_t i = 0; i < params.size(); ++i) named.emplace_back("p" + std::to_string(i), params[i]);
  AdamW adam(options);
  for (int step = 1; step <= 3; ++step) {
    for (at::Tensor& p : params) p.mutable_grad() = at::randn(p.sizes()).to(device);
    adam.Step(named, 1e-2, step);
  }
  for (const auto& [key, moment] : adam.State()) params.push_back(moment);
  for (at::Tensor& t : params) t = t.cpu();
  return params;
}

TEST(AdamWTest, EveryKernelGivesTheLoopsUpdate) {
  const AdamWOptions loop{.kernel = AdamWKernel::kLoop};
  const std::vector<at::Tensor> expected = AfterThreeSteps(loop);
  std::vector<AdamWOptions> kernels = {
      {.kernel = AdamWKernel::kForEach},
      // Every tensor a chunk of its own, and two chunks.
      {.kernel = AdamWKernel::kForEach, .foreach_chunk_bytes = 1},
      {.kernel = AdamWKernel::kForEach, .foreach_chunk_bytes = 2400},
      {.kernel = AdamWKernel::kAuto}};
  if (kHasFusedAdamW) kernels.push_back({.kernel = AdamWKernel::kFused});
  for (const AdamWOptions& options : kernels) {
    const std::vector<at::Tensor> got = AfterThreeSteps(options);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(at::allclose(got[i], expected[i], 1e-6, 1e-7))
          << AdamWKernelName(options.kernel) << " chunk " << options.foreach_chunk_bytes
          << ", tensor " << i << ": " << (got[i] - expected[i]).abs().max().item<double>();
    }
  }
  // And it moved them: the starting values differ from the updated ones.
  at::manual_seed(7);
  EXPECT_FALSE(at::allclose(at::randn({33, 17}), expected[0], 1e-4, 1e-5));
}

// Every kernel's update counts as an in-place change of the parameter (its version counter
// moves), which the cache of weight casts (nn/weight_cast.h) relies on.
TEST(AdamWTest, EveryKernelMarksTheParametersChanged) {
  std::vector<AdamWKernel> kernels = {AdamWKernel::kLoop, AdamWKernel::kForEach};
  if (kHasFusedAdamW) kernels.push_back(AdamWKernel::kFused);
  for (const AdamWKernel kernel : kernels) {
    at::Tensor w = at::ones({3, 2}).requires_grad_(true), b = at::ones({2}).requires_grad_(true);
    w.mutable_grad() = at::ones({3, 2});
    b.mutable_grad() = at::ones({2});
    const int64_t w_version = w._version(), b_version = b._version();
    AdamW({.kernel = kernel}).Step({{"w", w}, {"b", b}}, 1e-2, 1);
    EXPECT_GT(w._version(), w_version) << AdamWKernelName(kernel);
    EXPECT_GT(b._version(), b_version) << AdamWKernelName(kernel);
  }
}

TEST(AdamWTest, GpuKernelsGiveTheCpuLoopsUpdate) {
  if (VisibleGpus() == 0) GTEST_SKIP() << "no CUDA device";
  const std::vector<at::Tensor> expected = AfterThreeSteps({.kernel = AdamWKernel::kLoop});
  for (const AdamWKernel kernel : {AdamWKernel::kAuto, AdamWKernel::kForEach, AdamWKernel::kLoop}) {
    const std::vector<at::Tensor> got =
        AfterThreeSteps({.kernel = kernel}, c10::Device(c10::kCUDA, 0));
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(at::allclose(got[i], expected[i], 1e-5, 1e-6))
          << AdamWKernelName(kernel) << ", tensor " << i;
    }
  }
}

TEST(AdamWTest, KernelsAreChosenAndRefusedByName) {
  EXPECT_EQ(ResolveAdamWKernel(AdamWKernel::kAuto, c10::Device(c10::kCPU)),
            kHasFusedAdamW ? AdamWKernel::kFused : AdamWKernel::kLoop);
  EXPECT_EQ(ResolveAdamWKernel(AdamWKernel::kLoop, c10::Device(c10::kCPU)), AdamWKernel::kLoop);
  EXPECT_EQ(ResolveAdamWKernel(AdamWKernel::kAuto, c10::Device(c10::kCUDA, 0)),
            kHasFusedAdamW ? AdamWKernel::kFused : AdamWKernel::kForEach);
  if (!kHasFusedAdamW) {
    try {
      ResolveAdamWKernel(AdamWKernel::kFused, c10::Device(c10::kCPU));
      ADD_FAILURE() << "fused refused where libtorch lacks it";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("no fused AdamW kernel (2.4 and later"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(ParseAdamWKernel("foreach", "--adamw-kernel"), AdamWKernel::kForEach);
  try {
    ParseAdamWKernel("fast", "--adamw-kernel");
    ADD_FAILURE() << "'fast' accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--adamw-kernel must be auto, loop, foreach or fused"),
              std::string::npos)
        << e.what();
  }
}

TEST(LrScheduleTest, WarmUpThenCosineToTheFloor) {
  const LrSchedule s{1.0, 0.1, 10, 110};
  EXPECT_DOUBLE_EQ(s.At(1), 0.1);
  EXPECT_DOUBLE_EQ(s.At(10), 1.0);
  EXPECT_NEAR(s.At(60), 0.55, 1e-12);  // half way down the cosine
  EXPECT_NEAR(s.At(110), 0.1, 1e-12);
  EXPECT_NEAR(s.At(500), 0.1, 1e-12);
}

}  // namespace
}  // namespace conveyor
