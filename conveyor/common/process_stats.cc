#include "conveyor/common/process_stats.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include "conveyor/common/error.h"

namespace conveyor {

namespace {

// The kernel's count, read from /proc: both the start time and the uptime in 10 ms steps.
double ProcSecondsSinceStart() {
  std::ifstream uptime_file("/proc/uptime"), stat_file("/proc/self/stat");
  double uptime = 0;
  uptime_file >> uptime;
  std::string stat;
  std::getline(stat_file, stat);
  // Field 22 is the start time; the name (field 2) may hold spaces, so count after its ')'.
  const size_t close = stat.rfind(')');
  CONVEYOR_ASSERT(uptime_file && close != std::string::npos) << "cannot read /proc";
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  for (int k = 3; k < 22; ++k) fields >> field;
  long long start_ticks = 0;
  fields >> start_ticks;
  CONVEYOR_ASSERT(fields) << "cannot read the start time in /proc/self/stat";
  return uptime - static_cast<double>(start_ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace

double SecondsSinceProcessStart() {
  // /proc read once; the steady clock from there on, so that differences are exact.
  static const auto anchor = std::chrono::steady_clock::now();
  static const double anchor_s = ProcSecondsSinceStart();
  return anchor_s +
         std::chrono::duration<double>(std::chrono::steady_clock::now() - anchor).count();
}

int64_t PeakResidentBytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux counts kilobytes
}

int AvailableCores() {
  cpu_set_t set;
  const int cores = sched_getaffinity(0, sizeof set, &set) == 0
                        ? CPU_COUNT(&set)
                        : static_cast<int>(std::thread::hardware_concurrency());
  return cores > 0 ? cores : 1;
}

std::vector<uint64_t> AffinityMask() {
  cpu_set_t set;
  const bool read = sched_getaffinity(0, sizeof set, &set) == 0;
  const int machine = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<uint64_t> mask((CPU_SETSIZE + 63) / 64, 0);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (read ? CPU_ISSET(cpu, &set) : cpu < machine) mask[cpu / 64] |= uint64_t{1} << (cpu % 64);
  }
  return mask;
}

uint64_t MachineId() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  return std::hash<std::string>{}(std::string(host) + "/" + boot) & ((uint64_t{1} << 52) - 1);
}

double PhysicalMemoryBytes() {
  return static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

}  // namespace conveyor
