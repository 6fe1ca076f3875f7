#include "conveyor/cli/bench_command.h"

#include "conveyor/cli/bench_fidelity.h"
#include "conveyor/cli/bench_hop.h"
#include "conveyor/cli/bench_overhead.h"
#include "conveyor/cli/bench_train.h"

namespace conveyor {

void AddBenchCommand(CLI::App& app, const std::vector<std::string>& args, int* exit_code) {
  CLI::App* bench = app.add_subcommand("bench", "measure the runtime (processes over Gloo)");
  bench->require_subcommand(1);
  AddBenchFidelity(*bench, args, exit_code);
  AddBenchOverhead(*bench, args, exit_code);
  AddBenchTrain(*bench, args, exit_code);
  AddBenchHop(*bench, args, exit_code);
}

}  // namespace conveyor
