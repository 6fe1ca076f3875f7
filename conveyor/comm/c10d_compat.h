// Differences between the libtorch versions conveyor builds against in c10d (the process
// groups and the store); device/torch_compat.h holds the others.
//
// Thread-safety: the functions are pure.
#ifndef CONVEYOR_COMM_C10D_COMPAT_H_
#define CONVEYOR_COMM_C10D_COMPAT_H_

#include <torch/version.h>

#include <exception>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace conveyor {

// Makes `options` ask for TCPStore's classic server and client. libtorch 2.2 added a libuv
// server and 2.4 made it the default; a libtorch built without libuv (Debian's) refuses every
// TCPStore, client or server, that asks for it, and whether libuv is there is not exported.
// Before 2.2 there is only the classic one: nothing to do.
inline void UseClassicTcpStore(c10d::TCPStoreOptions& options) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2)
  options.useLibUV = false;
#else
  (void)options;
#endif
}

// Shuts a process group (ProcessGroupNCCL) down before it is destroyed; errors of a group
// that already failed are ignored (nothing more to release). libtorch 2.3 added shutdown()
// and warns at exit when a group is destroyed without it (seen on torch 2.11); before 2.3
// there is nothing to do.
template <typename ProcessGroup>
void ShutDownProcessGroup(ProcessGroup& group) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
  try {
    group.shutdown();
  } catch (const std::exception&) {
  }
#else
  (void)group;
#endif
}

}  // namespace conveyor

#endif  // CONVEYOR_COMM_C10D_COMPAT_H_
