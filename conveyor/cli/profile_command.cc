#include "conveyor/cli/profile_command.h"

#include <ATen/Parallel.h>

#include <array>
#include <cstdio>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "conveyor/cli/layer_cost_json.h"
#include "conveyor/cli/output.h"
#include "conveyor/cli/train_flags.h"
#include "conveyor/common/range_check.h"
#include "conveyor/common/text.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/layer_profile.h"

namespace conveyor {

void AddProfileCommand(CLI::App& app) {
  struct ProfileFlags {
    TrainFlags train;
    std::vector<int64_t> sizes = {1, 2, 4, 8, 16};
    int64_t rounds = 5;
    int64_t ranks = 0;
    std::string out;
  };
  auto flags = std::make_shared<ProfileFlags>();
  CLI::App* cmd = app.add_subcommand(
      "profile",
      "time a model's embedding, block and head on this machine (forward, backward for inputs "
      "and for weights, activation bytes) for plan --auto --costs");
  RegisterTrainFlags(cmd, flags->train);
  cmd->add_option("--sizes", flags->sizes,
                  "micro-batch sizes (sequences) to time, two or more ascending: plans "
                  "interpolate between them")
      ->expected(2, 16)
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--rounds", flags->rounds, "timed rounds per layer (their median counts)")
      ->capture_default_str();
  cmd->add_option("--ranks", flags->ranks,
                  "ranks that will share the device, for the capacity measured (0: one a core on "
                  "the CPU, one on a GPU)")
      ->capture_default_str();
  cmd->add_option("-o,--out", flags->out, "the JSON file (default: stdout, and no table)");
  cmd->callback([flags] {
    TrainConfig config = ResolveTrainConfig(flags->train);
    CheckInRange("--rounds", flags->rounds, 1, 1000);
    CheckInRange("--ranks", flags->ranks, 0, 256);
    flags->train.launch.CheckLocalRanks(flags->ranks, "--ranks");  // forked to time the cores
    for (size_t k = 0; k < flags->sizes.size(); ++k) {
      CheckInRange("--sizes", flags->sizes[k], k == 0 ? 1 : flags->sizes[k - 1] + 1, 1 << 16);
    }
    // The threads one of several ranks sharing the cores runs, unless told.
    at::set_num_threads(config.threads > 0 ? config.threads : 1);
    const LayerCostTable table = ProfileLayerKinds(
        config, flags->sizes, static_cast<int>(flags->rounds), static_cast<int>(flags->ranks));
    const std::string describe = MakeModelTask(config)->Describe();
    WriteOutput(flags->out, LayerCostTableJson(table, describe).dump(2) + "\n");
    if (flags->out.empty() || flags->out == "-") return;
    std::string text = describe +
                       Printf(", %lld tokens a sequence, on the %s",
                              static_cast<long long>(config.model.seq_len), table.device.c_str()) +
                       (table.device == "cpu" ? Printf(" with %d thread(s)", table.threads) : "") +
                       Printf("; with %d ranks sharing it, the work of 1", table.capacity_ranks) +
                       (table.capacity_ranks > 1 ? Printf(" to %d", table.capacity_ranks) : "") +
                       " of them busy at once, in lone ranks' worth:";
    for (size_t k = 0; k < table.sequences.size(); ++k) {
      text += k == 0 ? "" : ";";
      for (double c : table.capacity[k]) text += Printf(" %.2f", c);
      text += Printf(" at %lld", static_cast<long long>(table.sequences[k]));
    }
    text += " sequences\n";
    text +=
        "layer            sequences  forward ms  input ms  weight ms  backward ms  activations MiB"
        "  backward MiB  for W MiB  forward MiB  no-grad MiB  no-grad ms\n";
    constexpr const char* kNames[] = {"embedding", "block",        "block selective",
                                      "head",      "sparse block", "sparse selective"};
    // The whole layers, then each TP size's shards ("block/2": one of 2 ranks' shard).
    std::vector<std::pair<std::string, const MeasuredKinds*>> tables = {{"", &table}};
    for (const auto& [tp, shard] : table.tp_shards) tables.push_back({Printf("/%d", tp), &shard});
    for (const auto& [suffix, kinds] : tables) {
      for (int kind = 0; kind < std::ssize(kNames); ++kind) {
        const std::string name = kNames[kind] + suffix;
        const MeasuredLayer& layer = kinds->*kMeasuredKinds[kind];
        for (size_t k = 0; k < layer.at.size(); ++k) {
          const LayerSample& s = layer.at[k];
          text += Printf(
              "%-18s %7lld %11.3f %9.3f %10.3f %12.3f %16.2f %13.2f %10.2f %12.2f %12.2f %10.3f\n",
              name.c_str(), static_cast<long long>(table.sequences[k]), 1e3 * s.forward_s,
              1e3 * s.input_s, 1e3 * s.weight_s, 1e3 * s.backward_s, s.activation_bytes / (1 << 20),
              s.backward_bytes / (1 << 20), s.weight_bytes / (1 << 20), s.forward_bytes / (1 << 20),
              s.infer_bytes / (1 << 20), 1e3 * s.infer_s);
        }
      }
    }
    std::fputs((text + "written to " + flags->out + "\n").c_str(), stdout);
  });
}

}  // namespace conveyor
