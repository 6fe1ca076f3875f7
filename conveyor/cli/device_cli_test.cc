// End-to-end tests of the `conveyor` binary on its devices and in its precisions: the device
// said and CUDA refused without a GPU, bf16, loss scaling and fp16, AdamW's kernels and the
// cached weight casts, and on a GPU the pipeline as rank threads.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "conveyor/cli/cli_testing.h"
#include "conveyor/device/compute_device.h"
#include "conveyor/device/compute_precision.h"
#include "conveyor/device/torch_compat.h"

namespace conveyor {
namespace {

// --device and --dtype: the CPU and the precision are said in the summary, bf16 trains; CUDA
// where no GPU is visible (or libtorch lacks CUDA) is refused by every rank, naming the rank
// and the way out.
TEST(CliTest, DeviceIsSaidAndCudaWithoutAGpuIsRefused) {
  const std::string dir = ScratchWithCorpus("device");
  const std::string job =
      "train --pp 2 --layers 2 --hidden 16 --heads 2 --seq-len 16 "
      "--batch-size 4 --microbatches 2 --steps 2 --data " +
      dir + "/corpus.txt";
  const Result cpu = Conveyor(job + " --device cpu");
  ASSERT_EQ(cpu.code, 0) << cpu.out << cpu.err;
  EXPECT_NE(cpu.out.find("device: cpu; fp32"), std::string::npos) << cpu.out;
  const Result bf16 = Conveyor(job + " --device cpu --dtype bf16");
  ASSERT_EQ(bf16.code, 0) << bf16.out << bf16.err;
  EXPECT_NE(bf16.out.find("device: cpu; bf16 matrix products"), std::string::npos) << bf16.out;
  EXPECT_NE(bf16.out.find("done: 2 steps"), std::string::npos) << bf16.out;
  if (VisibleGpus() > 0) GTEST_SKIP() << "a GPU is visible: --device cuda would run";
  const Result cuda = Conveyor(job + " --device cuda");
  EXPECT_NE(cuda.code, 0);
  // Whichever rank checks first names itself.
  EXPECT_TRUE(cuda.err.find("rank 0: --device cuda, but") != std::string::npos ||
              cuda.err.find("rank 1: --device cuda, but") != std::string::npos)
      << cuda.err;
  EXPECT_NE(cuda.err.find("--device cpu"), std::string::npos) << cuda.err;
}

// --adamw-kernel and --cache-weight-casts: bf16 training through every AdamW kernel this
// libtorch has, with the weights' casts cached or made by each product, gives the losses of
// the per-tensor loop (the cache exactly: its copies are fresh casts' values); what the run
// uses is said; fused where libtorch lacks it, and the cache with fp32, are refused.
TEST(CliTest, AdamWKernelsAndCachedWeightCastsTrainAlike) {
  const std::string dir = ScratchWithCorpus("adamw_kernels");
  const std::string job =
      "train --pp 2 --layers 2 --hidden 16 --heads 2 --seq-len 16 --batch-size 8 "
      "--microbatches 4 --steps 4 --device cpu --sample-tokens 0 --eval-every 0 --data " +
      dir + "/corpus.txt --metrics " + dir + "/";
  const Result loop = Conveyor(job + "loop.json --dtype bf16 --adamw-kernel loop");
  ASSERT_EQ(loop.code, 0) << loop.out << loop.err;
  EXPECT_NE(loop.out.find("; AdamW loop kernels"), std::string::npos) << loop.out;
  const Result cached =
      Conveyor(job + "cached.json --dtype bf16 --adamw-kernel loop --cache-weight-casts");
  ASSERT_EQ(cached.code, 0) << cached.out << cached.err;
  EXPECT_NE(cached.out.find("; each weight cast once an update (cached)"), std::string::npos)
      << cached.out;
  EXPECT_TRUE(SameLosses(dir + "/loop.json", dir + "/cached.json", 4, 0));
  const Result foreach =
      Conveyor(job + "foreach.json --dtype bf16 --adamw-kernel foreach --cache-weight-casts");
  ASSERT_EQ(foreach.code, 0) << foreach.out << foreach.err;
  EXPECT_NE(foreach.out.find("; AdamW foreach kernels"), std::string::npos) << foreach.out;
  EXPECT_TRUE(SameLosses(dir + "/loop.json", dir + "/foreach.json", 4, 1e-5));
  const Result fused =
      Conveyor(job + "fused.json --dtype bf16 --adamw-kernel fused --cache-weight-casts");
  if (kHasFusedAdamW) {
    ASSERT_EQ(fused.code, 0) << fused.out << fused.err;
    EXPECT_TRUE(SameLosses(dir + "/loop.json", dir + "/fused.json", 4, 1e-4));
  } else {
    EXPECT_NE(fused.code, 0);
    EXPECT_NE(fused.err.find("has no fused AdamW kernel (2.4 and later have it); use foreach"),
              std::string::npos)
        << fused.err;
  }
  const Result fp32 = Conveyor(job + "fp32.json --cache-weight-casts");
  EXPECT_NE(fp32.code, 0);
  EXPECT_NE(fp32.err.find("--cache-weight-casts keeps the weights' bf16 or fp16 copies"),
            std::string::npos)
      << fp32.err;
}

// --loss-scale and --dtype fp16: a power-of-two scale on fp32 trains exactly as without one,
// the scale is said, grows after its window and lands in the metrics; fp16 trains where
// this libtorch has fp16 products on the CPU and is refused, naming the way out, where not.
TEST(CliTest, LossScalingIsExactOnFp32AndFp16NeedsItsProducts) {
  const std::string dir = ScratchWithCorpus("loss_scale");
  const std::string job =
      "train --pp 2 --layers 2 --hidden 16 --heads 2 --seq-len 16 --batch-size 4 "
      "--microbatches 2 --steps 3 --device cpu --sample-tokens 0 --data " +
      dir + "/corpus.txt";
  const Result plain = Conveyor(job + " --metrics " + dir + "/plain.json");
  ASSERT_EQ(plain.code, 0) << plain.out << plain.err;
  const Result scaled =
      Conveyor(job + " --loss-scale 1024 --loss-scale-window 2 --metrics " + dir + "/scaled.json");
  ASSERT_EQ(scaled.code, 0) << scaled.out << scaled.err;
  EXPECT_NE(scaled.out.find("; fp32; dynamic loss scale from 1024"), std::string::npos)
      << scaled.out;
  EXPECT_NE(scaled.out.find("loss scale 2048 at the end; 0 step(s) skipped"), std::string::npos)
      << scaled.out;
  EXPECT_TRUE(SameLosses(dir + "/plain.json", dir + "/scaled.json", 3, 0));
  std::ifstream metrics_file(dir + "/scaled.json");
  const auto metrics = nlohmann::json::parse(metrics_file);
  EXPECT_EQ(metrics["steps"][0]["loss_scale"], 1024.0);
  EXPECT_EQ(metrics["steps"][2]["loss_scale"], 2048.0);
  EXPECT_EQ(metrics["final_loss_scale"], 2048.0);
  EXPECT_EQ(metrics["overflow_steps"], 0);
  const Result fp16 = Conveyor(job + " --dtype fp16");
  if (AutocastComputesIn(at::kCPU, at::kHalf)) {
    ASSERT_EQ(fp16.code, 0) << fp16.out << fp16.err;
    EXPECT_NE(fp16.out.find("fp16 matrix products, fp32 weights, gradients and reductions; "
                            "dynamic loss scale from 65536"),
              std::string::npos)
        << fp16.out;
  } else {
    EXPECT_NE(fp16.code, 0);
    EXPECT_NE(fp16.err.find("--dtype fp16 needs fp16 matrix products under autocast on cpu"),
              std::string::npos)
        << fp16.err;
    EXPECT_NE(fp16.err.find("use --dtype bf16, or a GPU"), std::string::npos) << fp16.err;
  }
  const Result bad = Conveyor(job + " --loss-scale 0.5");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("--loss-scale must be 0 (the dtype's default) or at least 1, got 0.5"),
            std::string::npos)
      << bad.err;
}

// On a GPU: the pipeline as threads sharing GPU 0 (each rank on its own stream) and, with
// two GPUs or more, as processes over NCCL, has the CPU's losses (fp32; the GPU's kernels
// sum in other orders). Skips without a GPU.
TEST(CliTest, GpuPipelinesTrainLikeTheCpu) {
  const int gpus = VisibleGpus();
  if (gpus == 0) GTEST_SKIP() << "no CUDA device";
  const std::string dir = ScratchWithCorpus("gpu");
  const std::string job =
      "train --pp 2 --schedule 1f1b --layers 2 --hidden 32 --heads 2 --seq-len 16 "
      "--batch-size 8 --microbatches 4 --steps 3 --eval-every 0 --sample-tokens 0 --data " +
      dir + "/corpus.txt --metrics " + dir;
  const Result cpu = Conveyor(job + "/cpu.json --device cpu");
  ASSERT_EQ(cpu.code, 0) << cpu.err;
  std::vector<std::string> runs = {"threads"};
  if (gpus >= 2) runs.push_back("nccl");
  for (const std::string& run : runs) {
    const Result r = Conveyor(job + "/" + run + ".json --device cuda" +
                              (run == "threads" ? " --rank-threads" : ""));
    ASSERT_EQ(r.code, 0) << run << ": " << r.out << r.err;
    EXPECT_NE(r.out.find("device: cuda:0"), std::string::npos) << r.out;
    EXPECT_TRUE(SameLosses(dir + "/cpu.json", dir + "/" + run + ".json", 3, 1e-4));
  }
}

// On a GPU: bf16 with the fused AdamW (the default there where libtorch has it) and cached
// weight casts trains as the per-tensor loop with casts made by each product. Skips without a
// GPU.
TEST(CliTest, GpuFusedAdamWAndCachedCastsTrainLikeTheLoop) {
  if (VisibleGpus() == 0) GTEST_SKIP() << "no CUDA device";
  const std::string dir = ScratchWithCorpus("gpu_kernels");
  const std::string job =
      "train --pp 2 --rank-threads --device cuda --dtype bf16 --layers 2 --hidden 32 --heads 2 "
      "--seq-len 16 --batch-size 8 --microbatches 4 --steps 4 --eval-every 0 --sample-tokens 0 "
      "--data " +
      dir + "/corpus.txt --metrics " + dir;
  const Result loop = Conveyor(job + "/loop.json --adamw-kernel loop");
  ASSERT_EQ(loop.code, 0) << loop.out << loop.err;
  const Result fast = Conveyor(job + "/fast.json --cache-weight-casts");
  ASSERT_EQ(fast.code, 0) << fast.out << fast.err;
  EXPECT_NE(fast.out.find(std::string("; AdamW ") + (kHasFusedAdamW ? "fused" : "foreach")),
            std::string::npos)
      << fast.out;
  EXPECT_TRUE(SameLosses(dir + "/loop.json", dir + "/fast.json", 4, 1e-3));
}

// Tensor- and context-parallel ranks as threads sharing one GPU would deadlock inside the
// backward (libtorch runs a GPU's backwards on one thread): refused before any rank starts.
TEST(CliTest, GpuRankThreadsSharingAGpuRefuseTensorParallelism) {
  if (VisibleGpus() == 0) GTEST_SKIP() << "no CUDA device";
  if (VisibleGpus() >= 2) GTEST_SKIP() << "two ranks would each have a GPU of their own";
  for (const std::string axis : {"--tp 2", "--cp 2"}) {
    const Result r = Conveyor("train --device cuda --rank-threads " + axis +
                              " --layers 2 --hidden 32 --heads 2 --seq-len 16 --batch-size 4 "
                              "--steps 1 --eval-every 0 --sample-tokens 0");
    EXPECT_EQ(r.code, 1) << axis << ": " << r.out << r.err;
    EXPECT_NE(r.err.find(axis + " with --rank-threads puts 2 ranks on 1 GPU(s)"), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("would wait for each other forever when they share a GPU as threads"),
              std::string::npos)
        << r.err;
  }
}

}  // namespace
}  // namespace conveyor
