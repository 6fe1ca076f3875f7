#include "conveyor/launch/rendezvous.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>
#include <sstream>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

constexpr int kMaxWorldSize = 1 << 24;

struct VariableNames {
  const char* launcher;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  // The processes on this node: a count, or for Slurm a list of counts by node.
  const char* local_world_size;
  // Whether the launcher sets `rank` for a lone process too (a batch script, mpirun -n 1):
  // then only a world size above 1 makes the process a rank of a world.
  bool sets_rank_alone;
};

constexpr VariableNames kLaunchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", false},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_STEP_TASKS_PER_NODE", true},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", true},
};

std::optional<std::string> Lookup(const Environment& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  return it->second;
}

std::string Require(const Environment& env, const char* name, const char* launcher) {
  std::optional<std::string> value = Lookup(env, name);
  CONVEYOR_CHECK(value.has_value() && !value->empty())
      << "rendezvous (" << launcher << "): " << name << " is not set"
      << (std::string(name).starts_with("MASTER_")
              ? "; export MASTER_ADDR (the host of rank 0) and MASTER_PORT (a free port there)"
              : "");
  return *value;
}

// Parses an integer variable; rendezvous values all fit an int.
int ParseInt(const char* name, const std::string& value, int min, int max) {
  return static_cast<int>(ParseEnvInt(name, value, min, max));
}

// The launcher that started this process as a rank: the first, in kLaunchers order, whose
// rank variable is set (with a world size above 1 where it sets_rank_alone); nullptr if none.
const VariableNames* LauncherOf(const Environment& env) {
  for (const VariableNames& names : kLaunchers) {
    if (!Lookup(env, names.rank).has_value()) continue;
    if (!names.sets_rank_alone) return &names;
    const std::optional<std::string> size = Lookup(env, names.world_size);
    if (size.has_value() && ParseInt(names.world_size, *size, 1, kMaxWorldSize) > 1) {
      return &names;
    }
  }
  return nullptr;
}

// The count for node `node` in Slurm's list of tasks per node ("2(x3),1": 2 on each of
// nodes 0 to 2, then 1), or 0 when the list is malformed or shorter.
int SlurmTasksOnNode(const std::string& list, int node) {
  std::istringstream items(list);
  for (std::string item; std::getline(items, item, ',');) {
    int count = 0, repeat = 1;
    char open = 0, x = 0, close = 0;
    std::istringstream parts(item);
    if (!(parts >> count) || count < 1) return 0;
    if (parts >> open) {
      if (open != '(' || !(parts >> x >> repeat >> close) || x != 'x' || close != ')' ||
          repeat < 1 || parts.peek() != EOF) {
        return 0;
      }
    }
    if (node < repeat) return count;
    node -= repeat;
  }
  return 0;
}

// Fills info.local_world_size from the launcher's variable, when it sets one that reads.
void ReadLocalWorldSize(const Environment& env, const VariableNames& names, RendezvousInfo& info) {
  if (std::string(names.launcher) == "slurm") {
    const std::optional<std::string> node = Lookup(env, "SLURM_NODEID");
    // The step's tasks (srun), else the job's (a batch script's own process).
    for (const char* variable : {names.local_world_size, "SLURM_TASKS_PER_NODE"}) {
      const std::optional<std::string> list = Lookup(env, variable);
      if (!list || !node) continue;
      const int count =
          SlurmTasksOnNode(*list, ParseInt("SLURM_NODEID", *node, 0, kMaxWorldSize - 1));
      if (count < 1) continue;
      info.local_world_size = count;
      info.local_world_size_variable = std::string(variable) + "=" + *list;
      return;
    }
    return;
  }
  const std::optional<std::string> size = Lookup(env, names.local_world_size);
  if (!size) return;
  info.local_world_size = ParseInt(names.local_world_size, *size, 1, info.world_size);
  info.local_world_size_variable = std::string(names.local_world_size) + "=" + *size;
}

}  // namespace

bool LaunchedAsRank(const Environment& env) { return LauncherOf(env) != nullptr; }

bool LaunchedAsRank() { return LaunchedAsRank(ProcessEnvironment()); }

RendezvousInfo RendezvousFromEnvironment(const Environment& env) {
  const VariableNames* launcher = LauncherOf(env);
  CONVEYOR_CHECK(launcher != nullptr)
      << "rendezvous: no rank in the environment: run under a launcher (conveyor --nproc, "
         "torchrun, srun or mpirun with more than one task) or set RANK, WORLD_SIZE, "
         "MASTER_ADDR and MASTER_PORT";
  const VariableNames& names = *launcher;
  RendezvousInfo info;
  info.launcher = names.launcher;
  info.world_size =
      ParseInt(names.world_size, Require(env, names.world_size, names.launcher), 1, kMaxWorldSize);
  std::string rank = Require(env, names.rank, names.launcher);
  info.rank = ParseInt(names.rank, rank, 0, kMaxWorldSize);
  CONVEYOR_CHECK(info.rank < info.world_size)
      << "rendezvous (" << names.launcher << "): " << names.rank << "=" << rank << " is not below "
      << names.world_size << "=" << info.world_size;
  std::optional<std::string> local_rank = Lookup(env, names.local_rank);
  info.local_rank =
      local_rank ? ParseInt(names.local_rank, *local_rank, 0, info.world_size - 1) : info.rank;
  ReadLocalWorldSize(env, names, info);
  info.master_addr = Require(env, "MASTER_ADDR", names.launcher);
  info.master_port = ParseInt("MASTER_PORT", Require(env, "MASTER_PORT", names.launcher), 1, 65535);
  if (Lookup(env, "TORCHELASTIC_USE_AGENT_STORE") == "True") {
    const std::optional<std::string> restarts = Lookup(env, "TORCHELASTIC_RESTART_COUNT");
    info.launcher_serves_store = true;
    info.store_prefix = "conveyor/attempt_" +
                        std::to_string(restarts ? ParseInt("TORCHELASTIC_RESTART_COUNT", *restarts,
                                                           0, std::numeric_limits<int>::max())
                                                : 0);
  }
  return info;
}

RendezvousInfo RendezvousFromEnvironment() {
  return RendezvousFromEnvironment(ProcessEnvironment());
}

void CheckWorldSize(const RendezvousInfo& info, int ranks, const std::string& asked_by) {
  const char* variable = "WORLD_SIZE";
  for (const VariableNames& names : kLaunchers) {
    if (info.launcher == names.launcher) variable = names.world_size;
  }
  CONVEYOR_CHECK(info.world_size == ranks)
      << "rendezvous (" << info.launcher << "): " << variable << "=" << info.world_size << " but "
      << asked_by << " needs " << ranks << " rank" << (ranks == 1 ? "" : "s")
      << ": launch exactly that many";
}

int PickFreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  CONVEYOR_CHECK(fd >= 0) << "cannot open a socket to pick a free port: " << std::strerror(errno);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
            getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  int error = errno;
  close(fd);
  CONVEYOR_CHECK(ok) << "cannot bind 127.0.0.1:0 to pick a free port: " << std::strerror(error);
  return ntohs(address.sin_port);
}

}  // namespace conveyor
