// Where this process sits in a distributed run, read from the environment a launcher set.
//
// Three launchers are understood:
//   torchrun (and conveyor's own launcher): RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
//     MASTER_PORT; LOCAL_RANK defaults to RANK (one node) when absent; LOCAL_WORLD_SIZE;
//     torchrun's TORCHELASTIC_USE_AGENT_STORE and TORCHELASTIC_RESTART_COUNT (see
//     RendezvousInfo);
//   Slurm (srun): SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, and MASTER_ADDR / MASTER_PORT,
//     which the job script must export (Slurm does not pick an address); the tasks on this
//     node from SLURM_STEP_TASKS_PER_NODE (else SLURM_TASKS_PER_NODE), at SLURM_NODEID;
//   Open MPI (mpirun): OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,
//     OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE, and MASTER_ADDR / MASTER_PORT
//     as for Slurm.
//
// The one rule for "is this process a launched rank, and of which launcher": the launchers
// are tried in the order above; the first whose rank variable is set wins, except that
// Slurm and Open MPI also set theirs in a lone process (a batch script, `mpirun -n 1`), so
// they count only when their world size is above 1. No launcher: not a launched rank (a
// command then launches its own ranks). LaunchedAsRank() and RendezvousFromEnvironment()
// both follow it.
//
// Anything missing or inconsistent (rank >= world size, a non-numeric value, a port outside
// 1..65535) is a UserError that names the variable and its value.
//
// Thread-safety: the functions taking an Environment are pure; the others read the process
// environment, which must not change concurrently.
#ifndef CONVEYOR_LAUNCH_RENDEZVOUS_H_
#define CONVEYOR_LAUNCH_RENDEZVOUS_H_

#include <string>

#include "conveyor/common/env.h"

namespace conveyor {

struct RendezvousInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // rank among the processes of this node: picks the GPU
  // The ranks on this node as the launcher says (local_world_size_variable names where it
  // said so, e.g. "OMPI_COMM_WORLD_LOCAL_SIZE=4"); 0 when it says nothing.
  int local_world_size = 0;
  std::string local_world_size_variable;
  std::string master_addr;  // host of rank 0, which serves the rendezvous store
  int master_port = 0;
  std::string launcher;  // "torchrun", "slurm" or "openmpi": which variables were read
  // torchrun's agent already serves a store at MASTER_ADDR:MASTER_PORT
  // (TORCHELASTIC_USE_AGENT_STORE=True): then every rank, rank 0 included, connects to it as
  // a client, and keeps its keys under store_prefix, which names the attempt
  // (TORCHELASTIC_RESTART_COUNT), so a world restarted by torchrun never reads its
  // predecessor's keys. False, and store_prefix empty: rank 0 serves the store.
  bool launcher_serves_store = false;
  std::string store_prefix;
};

// Whether `env` (tests), or the process environment, makes this process one rank of a
// world that a launcher started (the rule above). Throws UserError when a world size that
// decides it is not an integer in [1, 2^24].
bool LaunchedAsRank(const Environment& env);
bool LaunchedAsRank();

// Reads the info from `env` (tests), or from the process environment. Throws UserError
// when it names no launched rank (LaunchedAsRank() is false).
RendezvousInfo RendezvousFromEnvironment(const Environment& env);
RendezvousInfo RendezvousFromEnvironment();

// Checks that the launcher started the world a command asks for: the world size it set
// (WORLD_SIZE, SLURM_NTASKS or OMPI_COMM_WORLD_SIZE) must equal `ranks`, which `asked_by`
// names for the message (e.g. "--pp 4"). Throws UserError naming both otherwise.
void CheckWorldSize(const RendezvousInfo& info, int ranks, const std::string& asked_by);

// A TCP port on 127.0.0.1 that was free a moment ago (the kernel's pick for port 0). Another
// process may take it before the caller binds it; callers retry or accept that small risk.
int PickFreePort();

}  // namespace conveyor

#endif  // CONVEYOR_LAUNCH_RENDEZVOUS_H_
