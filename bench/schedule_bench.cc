// Planner speed: build + lower + verify + simulate one big program per schedule
// (p = 64, m = 1024 by default; CONVEYOR_BENCH_PP / CONVEYOR_BENCH_M override).
//
//   build/bench/schedule_bench --benchmark_out=schedule.json --benchmark_out_format=json
//
// Each iteration does the whole pipeline; the counters split its time by phase (seconds).
// Five repetitions; the JSON holds their mean, median and standard deviation.
#include <benchmark/benchmark.h>

#include <chrono>
#include <string>

#include "conveyor/schedule/lower.h"
#include "conveyor/common/env.h"
#include "conveyor/schedule/registry.h"
#include "conveyor/schedule/verify.h"
#include "conveyor/sim/simulator.h"

namespace conveyor {
namespace {

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void BM_Plan(benchmark::State& state, std::string name) {
  const ScheduleOptions options{static_cast<int>(EnvInt("CONVEYOR_BENCH_PP", 64, 1, 4096)),
                                static_cast<int>(EnvInt("CONVEYOR_BENCH_M", 1024, 1, 65536)), 0};
  double build = 0, lower = 0, verify = 0, simulate = 0;
  size_t actions = 0;
  for (auto _ : state) {
    auto t = std::chrono::steady_clock::now();
    const Program program = BuildSchedule(name, options);
    build += Since(t);
    t = std::chrono::steady_clock::now();
    const Program lowered = Lower(program);
    lower += Since(t);
    t = std::chrono::steady_clock::now();
    const auto findings = Verify(lowered);
    verify += Since(t);
    if (!findings.empty()) state.SkipWithError(FormatFindings(findings).c_str());
    t = std::chrono::steady_clock::now();
    const SimResult sim = Simulate(program, CostModel{});
    simulate += Since(t);
    benchmark::DoNotOptimize(sim.makespan);
    actions = lowered.size();
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["pp"] = options.pp;
  state.counters["microbatches"] = options.microbatches;
  state.counters["actions"] = static_cast<double>(actions);
  state.counters["build_s"] = build / n;
  state.counters["lower_s"] = lower / n;
  state.counters["verify_s"] = verify / n;
  state.counters["simulate_s"] = simulate / n;
}

const bool kRegistered = [] {
  for (const ScheduleInfo& info : AllSchedules()) {
    benchmark::RegisterBenchmark(("plan/" + std::string(info.name)).c_str(), BM_Plan,
                                 std::string(info.name))
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1)
        ->Repetitions(5)
        ->ReportAggregatesOnly(true);
  }
  return true;
}();

}  // namespace
}  // namespace conveyor

BENCHMARK_MAIN();
