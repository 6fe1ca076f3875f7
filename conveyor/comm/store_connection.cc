#include "conveyor/comm/store_connection.h"

#include <atomic>
#include <cstdint>
#include <future>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

#include "conveyor/comm/c10d_compat.h"
#include "conveyor/comm/comm_error.h"
#include "conveyor/comm/host_sockets.h"
#include "conveyor/common/error.h"

namespace conveyor {
namespace {

// How long a store gets to answer its first request: a real one answers at once.
constexpr auto kProbeTimeout = std::chrono::seconds(5);

}  // namespace

std::string Seconds(std::chrono::milliseconds duration) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(duration.count() % 1000 == 0 ? 0 : 1)
      << duration.count() / 1000.0 << " s";
  return out.str();
}

bool ServesStore(const RendezvousInfo& info) {
  return info.rank == 0 && !info.launcher_serves_store;
}

c10::intrusive_ptr<c10d::Store> ConnectStore(const RendezvousInfo& info, bool serve,
                                             std::chrono::milliseconds timeout) {
  if (!serve) AwaitListener(info, timeout);
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(info.master_port);
  options.isServer = serve;
  options.timeout = timeout;
  options.waitWorkers = false;  // AwaitArrivals does it, naming who is missing
  UseClassicTcpStore(options);
  c10::intrusive_ptr<c10d::Store> store =
      c10::make_intrusive<c10d::TCPStore>(info.master_addr, options);
  if (serve && IsLoopback(info.master_addr) && !KeepListenerOnLoopback(info.master_port)) {
    std::cerr << "conveyor: warning: the rendezvous store on port " << info.master_port
              << " could not be limited to the loopback interface; it listens on all of them"
              << std::endl;
  }
  if (!info.store_prefix.empty()) {
    store = c10::make_intrusive<c10d::PrefixStore>(info.store_prefix, std::move(store));
  }
  return store;
}

c10::intrusive_ptr<c10d::Store> ConnectAnswering(const RendezvousInfo& info,
                                                 std::chrono::milliseconds connect_timeout,
                                                 const std::string& who, const std::string& where,
                                                 const std::string& probe_key) {
  auto result = std::make_shared<std::promise<c10::intrusive_ptr<c10d::Store>>>();
  auto connected = std::make_shared<std::atomic<bool>>(false);
  std::future<c10::intrusive_ptr<c10d::Store>> answer = result->get_future();
  std::thread([info, connect_timeout, result, connected, probe_key] {
    try {
      c10::intrusive_ptr<c10d::Store> store =
          ConnectStore(info, ServesStore(info), connect_timeout);
      connected->store(true);
      store->set(probe_key, std::vector<std::uint8_t>{'0'});
      store->wait({probe_key}, kProbeTimeout);
      result->set_value(std::move(store));
    } catch (...) {
      result->set_exception(std::current_exception());
    }
  }).detach();
  // Rank 0 serves the store on this host and reaches it at MASTER_ADDR: an address that is
  // not this host's leads elsewhere (a typo, or another machine's address).
  const bool elsewhere = ServesStore(info) && !IsAddressOfThisHost(info.master_addr);
  const std::string not_here = " (MASTER_ADDR '" + info.master_addr +
                               "' is not an address of this machine, where this rank serves "
                               "the store)";
  const std::string not_a_store =
      who + ": what listens at " + where + " did not answer as a rendezvous store within " +
      Seconds(kProbeTimeout) + (elsewhere ? not_here : " (another program on MASTER_PORT?)");
  const std::string server = info.launcher_serves_store ? "the launcher" : "rank 0";
  const std::string failed =
      who + ": rendezvous at the store " + where + " failed" +
      (elsewhere           ? not_here
       : ServesStore(info) ? " (is the port free?)"
                           : " within " + Seconds(connect_timeout) + " (" + server +
                                 " serves it: did it start, at that address?)");
  // Something that listens and does not answer is not a store; libtorch 1.13's client may
  // still be retrying past its timeout where nothing listens, and torch 2.x's waits in its
  // constructor for an answer that never comes: whether anything accepts tells them apart.
  auto cause = [&] {
    return connected->load() || AwaitListener(info, std::chrono::milliseconds(500)) ? not_a_store
                                                                                    : failed;
  };
  if (answer.wait_for(connect_timeout + kProbeTimeout) != std::future_status::ready) {
    throw CommError(cause());
  }
  try {
    return answer.get();
  } catch (const std::exception& e) {
    throw CommError(cause() + ": " + Brief(e));
  }
}

}  // namespace conveyor
