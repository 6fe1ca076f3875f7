#include "conveyor/launch/rendezvous.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>

#include "conveyor/common/error.h"

extern char** environ;

namespace conveyor {
namespace {

struct VariableNames {
  const char* launcher;
  const char* rank;
  const char* world_size;
  const char* local_rank;
};

constexpr VariableNames kLaunchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
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

int ParseInt(const char* name, const std::string& value, int min, int max) {
  int parsed = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, parsed);
  CONVEYOR_CHECK(ec == std::errc() && ptr == end)
      << "rendezvous: " << name << "=\"" << value << "\" is not an integer";
  CONVEYOR_CHECK(parsed >= min && parsed <= max)
      << "rendezvous: " << name << "=" << value << " is outside [" << min << ", " << max << "]";
  return parsed;
}

}  // namespace

RendezvousInfo RendezvousFromEnvironment(const Environment& env) {
  for (const VariableNames& names : kLaunchers) {
    if (!Lookup(env, names.rank).has_value()) continue;
    RendezvousInfo info;
    info.launcher = names.launcher;
    info.world_size =
        ParseInt(names.world_size, Require(env, names.world_size, names.launcher), 1, 1 << 24);
    std::string rank = Require(env, names.rank, names.launcher);
    info.rank = ParseInt(names.rank, rank, 0, 1 << 24);
    CONVEYOR_CHECK(info.rank < info.world_size)
        << "rendezvous (" << names.launcher << "): " << names.rank << "=" << rank
        << " is not below " << names.world_size << "=" << info.world_size;
    std::optional<std::string> local_rank = Lookup(env, names.local_rank);
    info.local_rank =
        local_rank ? ParseInt(names.local_rank, *local_rank, 0, info.world_size - 1) : info.rank;
    info.master_addr = Require(env, "MASTER_ADDR", names.launcher);
    info.master_port =
        ParseInt("MASTER_PORT", Require(env, "MASTER_PORT", names.launcher), 1, 65535);
    return info;
  }
  CONVEYOR_CHECK(false) << "rendezvous: no rank in the environment: run under a launcher "
                           "(conveyor --nproc, torchrun, srun, mpirun) or set RANK, WORLD_SIZE, "
                           "MASTER_ADDR and MASTER_PORT";
  return {};
}

RendezvousInfo RendezvousFromEnvironment() {
  Environment env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string text = *entry;
    size_t eq = text.find('=');
    if (eq != std::string::npos) env.emplace(text.substr(0, eq), text.substr(eq + 1));
  }
  return RendezvousFromEnvironment(env);
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
