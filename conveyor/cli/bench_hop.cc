#include "conveyor/cli/bench_hop.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "conveyor/cli/bench_support.h"
#include "conveyor/cli/run_as_ranks.h"
#include "conveyor/comm/hop_latency.h"
#include "conveyor/common/env.h"
#include "conveyor/common/range_check.h"

namespace conveyor {
namespace {

// Rows {bytes, ranks, p2p, hop_us} of one world, as text.
std::string HopTable(const nlohmann::json& rows) {
  std::string text = "bytes        one hop us   (" + std::to_string(rows[0]["ranks"].get<int>()) +
                     " ranks, point-to-point: " + rows[0]["p2p"].get<std::string>() + ")\n";
  for (const auto& row : rows) {
    char line[64];
    std::snprintf(line, sizeof line, "%-12lld %10.1f\n",
                  static_cast<long long>(row["bytes"].get<int64_t>()), row["hop_us"].get<double>());
    text += line;
  }
  return text;
}

}  // namespace

void AddBenchHop(CLI::App& bench, const std::vector<std::string>& args, int* exit_code) {
  struct HopFlags {  // 64 bits: a value too large for an int is refused by name
    int64_t pp = 2;
    int64_t round_trips = 200;
    BenchOutput output;
  };
  auto flags = std::make_shared<HopFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "hop", "one-way time of a message between neighbouring ranks (4 B, 32 KiB, 256 KiB)");
  cmd->add_option("--pp,-p", flags->pp, "ranks (processes)")->capture_default_str();
  cmd->add_option("--round-trips", flags->round_trips, "ping-pongs per pair and size (median)")
      ->capture_default_str();
  flags->output.Register(cmd);
  cmd->callback([flags, args, exit_code] {
    CheckInRange("--pp", flags->pp, 2, 64);
    CheckInRange("--round-trips", flags->round_trips, 1, 100000);
    RanksOptions options;
    options.nproc = static_cast<int>(flags->pp);
    *exit_code = RunAsRanks(args, options, [&](const RankContext& rank) {
      Transport& transport = *rank.world;
      const std::string p2p = EnvFlag("CONVEYOR_SHM", true) ? "default" : "gloo";
      nlohmann::json rows = nlohmann::json::array();
      for (int64_t bytes : {int64_t{4}, int64_t{32} << 10, int64_t{256} << 10}) {
        const double hop_s =
            MeasureHopLatency(transport, bytes, static_cast<int>(flags->round_trips));
        rows.push_back({{"bytes", bytes},
                        {"ranks", transport.world_size()},
                        {"p2p", p2p},
                        {"hop_us", 1e6 * hop_s}});
      }
      if (transport.rank() == 0) flags->output.Write(rows, HopTable);
    });
  });
}

}  // namespace conveyor
