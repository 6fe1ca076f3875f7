#include "conveyor/cli/train_summary.h"

#include <algorithm>
#include <cstdio>

namespace conveyor {

std::string Percent(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", 100 * x);
  return text;
}

void PrintTrainSummary(const TrainingRun& s) {
  char held_out[64] = "no held-out data";
  if (s.final_eval.batches > 0) {
    std::snprintf(held_out, sizeof held_out, "held-out loss %.4f", s.final_eval.loss);
  }
  std::printf("\ndone: %lld steps, final loss %.4f, %s, %.0f tokens/s\n",
              static_cast<long long>(s.steps), s.final_loss, held_out, s.tokens_per_s);
  if (!s.auxiliary_losses.empty()) {
    std::printf("auxiliary losses of that step (besides the loss):");
    const char* separator = " ";
    for (const auto& [name, value] : s.auxiliary_losses) {
      std::printf("%s%s %.4g", separator, name.c_str(), value);
      separator = ", ";
    }
    std::printf("\n");
  }
  if (!s.expert_load.empty()) {
    // The most and the least uneven block: max / mean tokens an expert.
    std::pair<double, std::string> worst{0, ""}, best{1e300, ""};
    for (const auto& [block, load] : s.expert_load) {
      const double mean = ExpertLoadMean(load);
      const double ratio = mean > 0 ? ExpertLoadMax(load) / mean : 1;
      worst = std::max(worst, std::pair{ratio, block});
      best = std::min(best, std::pair{ratio, block});
    }
    std::printf(
        "expert load of that step (max / mean tokens an expert) over %zu MoE blocks: from %.2f "
        "(%s) to %.2f (%s)\n",
        s.expert_load.size(), best.first, best.second.c_str(), worst.first, worst.second.c_str());
  }
  if (s.skipped_steps > s.overflow_steps) {
    std::printf("%lld step(s) skipped: non-finite loss or gradient norm\n",
                static_cast<long long>(s.skipped_steps - s.overflow_steps));
  }
  if (s.loss_scale > 0) {
    std::printf("loss scale %g at the end; %lld step(s) skipped for gradients that overflowed\n",
                s.loss_scale, static_cast<long long>(s.overflow_steps));
  }
  if (s.final_eval.accuracy >= 0) {
    std::printf("held-out accuracy %s (majority class %s)\n",
                Percent(s.final_eval.accuracy).c_str(), Percent(s.baseline_accuracy).c_str());
  }
  std::printf(
      "\nper rank, ms per pipeline step (steps after the first); waits split into the peer's\n"
      "compute (dependency) and messages in transit (transfer); overlap: share of transit time\n"
      "hidden behind other work; peak memory measured, and predicted by the simulator:\n");
  std::printf(
      "rank     step  compute  dependency  transfer  bubble  overlap  peak MiB  predicted\n");
  for (const RankReport& r : s.ranks) {
    std::printf("%4d %8.2f %8.2f %11.2f %9.2f %6.1f%% %7.1f%% %9.2f %6.2f (%.1f mb)\n", r.rank,
                1e3 * r.step_s, 1e3 * r.compute_s, 1e3 * r.dependency_wait_s,
                1e3 * r.transfer_wait_s, 100 * r.bubble_fraction, 100 * r.comm_overlap,
                r.peak_activation_bytes / (1 << 20), r.predicted_peak_activation_bytes / (1 << 20),
                r.predicted_peak_microbatches);
  }
  std::printf(
      "bubble: measured %s, predicted by the simulator from measured costs %s (one hop %.0f us); "
      "exposed communication %s of the step\n",
      Percent(s.measured_bubble).c_str(), Percent(s.predicted_bubble).c_str(), 1e6 * s.hop_s,
      Percent(s.exposed_comm).c_str());
  std::printf("pipeline: measured %.2f ms a step, predicted %.2f ms\n", 1e3 * s.measured_pipeline_s,
              1e3 * s.predicted_pipeline_s);
  if (!s.sharing.empty()) {
    std::printf(
        "compute: the ranks share their machine's cores (%s): each compute's time is taken for the "
        "work it "
        "held at its share, and the simulator shares the cores the same way\n",
        s.sharing.c_str());
  }
  if (!s.ranks.empty()) {
    std::printf(
        "start-up (process start to first step; of it, building the stages) and peak resident "
        "memory, per rank:");
    for (const RankReport& r : s.ranks) {
      std::printf(" %d: %.2f s (%.2f s) / %.0f MiB", r.rank, r.startup_s, r.stage_build_s,
                  r.peak_resident_bytes / (1 << 20));
    }
    std::printf("\n");
    // The slowest rank's start-up, phase by phase, beside a later step's time.
    const RankReport& slowest = *std::max_element(
        s.ranks.begin(), s.ranks.end(), [](const RankReport& a, const RankReport& b) {
          return a.startup.total_s() < b.startup.total_s();
        });
    if (slowest.startup.total_s() > 0) {
      std::printf("start-up of rank %d to the end of its first step, %.2f s:", slowest.rank,
                  slowest.startup.total_s());
      const char* separator = " ";
      for (const StartupPhase& phase : kStartupPhases) {
        std::printf("%s%s %.2f", separator, phase.name, slowest.startup.*phase.field);
        separator = ", ";
      }
      std::printf(" (a later step %.2f s)\n", slowest.step_s);
    }
  }
  if (!s.ranks.empty() && s.ranks.front().device_peak_reserved_bytes > 0) {
    std::printf("GPU memory in the last step, per rank (MiB): peak allocated / peak reserved:");
    for (const RankReport& r : s.ranks) {
      std::printf(" %d: %.0f / %.0f", r.rank, r.device_peak_allocated_bytes / (1 << 20),
                  r.device_peak_reserved_bytes / (1 << 20));
    }
    std::printf("\n");
  }
  if (!s.mesh.empty()) {
    std::printf(
        "\nper rank, ms per step of the data-parallel collectives (hidden: the share that ran\n"
        "behind the pipeline), of the tensor-parallel all-reduces and of the expert-parallel\n"
        "all-to-alls; mesh %s:\n"
        "rank  dp  tp  pp   dp comm  hidden   tp comm   ep comm%s\n",
        s.mesh.c_str(), s.mesh.find(" x cp ") != std::string::npos ? "  cp" : "");
    for (const RankReport& r : s.ranks) {
      std::printf("%4d %3d %3d %3d %9.2f %6.1f%% %9.2f %9.2f", r.rank, r.coords.dp, r.coords.tp,
                  r.coords.pp, 1e3 * r.dp_comm_s, 100 * r.dp_hidden_fraction(), 1e3 * r.tp_comm_s,
                  1e3 * r.ep_comm_s);
      if (s.mesh.find(" x cp ") != std::string::npos) std::printf(" %3d", r.coords.cp);
      std::printf("\n");
    }
  }
  if (s.dp.buckets > 0) {
    const double steps = std::max<double>(1, static_cast<double>(s.steps));
    std::printf(
        "data parallel: per step %.2f MiB of gradients in %.1f buckets, reduced in %.2f ms, of "
        "which %s hidden behind the pipeline (rank 0)\n",
        s.dp.bytes / steps / (1 << 20), s.dp.buckets / steps, 1e3 * s.dp.comm_s / steps,
        Percent(s.dp.hidden_fraction()).c_str());
    if (s.dp.scattered_bytes > 0) {
      std::printf(
          "  ZeRO-1: %.2f MiB of them reduce-scattered, of which rank 0 received its range of "
          "%.2f MiB; the rest all-reduced\n",
          s.dp.scattered_bytes / steps / (1 << 20), s.dp.scattered_kept_bytes / steps / (1 << 20));
    }
  }
  std::printf("optimizer state: %.2f MiB of AdamW moments on rank 0\n",
              static_cast<double>(s.optimizer_state_bytes) / (1 << 20));
  if (s.frozen_parameters > 0) {
    std::printf(
        "parameters: %.4gM trained (LoRA adapters), %.4gM frozen: %.2f MiB of gradients and "
        "AdamW state not held (over the mesh)\n",
        s.trained_parameters / 1e6, s.frozen_parameters / 1e6,
        static_cast<double>(s.frozen_state_bytes) / (1 << 20));
  }
  std::printf(
      "data: rank 0 waited %.2f ms a step for its batch (%.2f ms for the first; the "
      "others are read ahead on a thread, 0 when hidden)\n",
      1e3 * s.data_s, 1e3 * s.first_data_s);
  if (!s.trace_dir.empty()) {
    std::printf("traces: %s/trace.json, measured.svg\n", s.trace_dir.c_str());
  }
  if (!s.sample.empty()) std::printf("\nsample:\n%s\n", s.sample.c_str());
  std::fflush(stdout);
}

}  // namespace conveyor
