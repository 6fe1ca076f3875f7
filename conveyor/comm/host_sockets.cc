#include "conveyor/comm/host_sockets.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace conveyor {
namespace {

// Whether something at `addr`:`port` accepts a TCP connection within `wait` (closed at once).
bool Accepts(const addrinfo& a, std::chrono::milliseconds wait) {
  const int fd = socket(a.ai_family, a.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a.ai_protocol);
  if (fd < 0) return false;
  bool accepted = connect(fd, a.ai_addr, a.ai_addrlen) == 0;
  if (!accepted && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    int error = 0;
    socklen_t length = sizeof(error);
    accepted = poll(&p, 1, static_cast<int>(wait.count())) == 1 &&
               getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0;
  }
  close(fd);
  return accepted;
}

}  // namespace

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

bool IsAddressOfThisHost(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* resolved = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &resolved) != 0) return false;
  ifaddrs* interfaces = nullptr;
  if (getifaddrs(&interfaces) != 0) {
    freeaddrinfo(resolved);
    return false;
  }
  bool found = false;
  for (const addrinfo* a = resolved; a != nullptr && !found; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      const in_addr ip = reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr;
      found = (ntohl(ip.s_addr) >> 24) == 127;  // all of 127/8 is this host's
    }
    for (const ifaddrs* i = interfaces; i != nullptr && !found; i = i->ifa_next) {
      if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != a->ai_family) continue;
      if (a->ai_family == AF_INET) {
        found = reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr ==
                reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr.s_addr;
      } else if (a->ai_family == AF_INET6) {
        found = std::memcmp(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr,
                            &reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr,
                            sizeof(in6_addr)) == 0;
      }
    }
  }
  freeifaddrs(interfaces);
  freeaddrinfo(resolved);
  return found;
}

bool KeepListenerOnLoopback(int port) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return false;
  bool done = false;
  while (dirent* entry = readdir(dir)) {
    const int fd = std::atoi(entry->d_name);
    int listening = 0;
    socklen_t length = sizeof(listening);
    if (fd <= 2 || getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) != 0 ||
        listening == 0) {
      continue;
    }
    sockaddr_storage address{};
    length = sizeof(address);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) continue;
    int bound = -1;
    if (address.ss_family == AF_INET) {
      bound = ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
    } else if (address.ss_family == AF_INET6) {
      bound = ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
    }
    static const char kLoopback[] = "lo";
    if (bound == port &&
        setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, kLoopback, sizeof(kLoopback) - 1) == 0) {
      done = true;
    }
  }
  closedir(dir);
  return done;
}

bool AwaitListener(const RendezvousInfo& info, std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(info.master_port);
  if (getaddrinfo(info.master_addr.c_str(), port.c_str(), &hints, &found) != 0) return false;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool listening = false;
  do {
    for (const addrinfo* a = found; a != nullptr && !listening; a = a->ai_next) {
      listening = Accepts(*a, std::chrono::milliseconds(100));
    }
    if (!listening) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  } while (!listening && std::chrono::steady_clock::now() < deadline);
  freeaddrinfo(found);
  return listening;
}

bool PortInUse(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  const bool in_use = bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 &&
                      errno == EADDRINUSE;
  close(fd);
  return in_use;
}

Rank0Beacon::~Rank0Beacon() {
  if (fd_ >= 0) close(fd_);
}

bool Rank0Beacon::Claim(int port) {
  fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return true;  // no beacon: duplicates go unnoticed here, nothing else changes
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string name = "conveyor-store-" + std::to_string(port);
  std::memcpy(address.sun_path + 1, name.data(), name.size());  // abstract: a leading NUL
  const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  const auto* at = reinterpret_cast<const sockaddr*>(&address);
  const bool bound = bind(fd_, at, length) == 0;
  const bool taken = !bound && errno == EADDRINUSE;
  if (taken) {
    const int knock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (knock >= 0) {
      connect(knock, at, length);
      close(knock);
    }
  }
  if (!bound || listen(fd_, 4) != 0) {
    close(fd_);
    fd_ = -1;
  }
  return !taken;
}

bool Rank0Beacon::Knocked() {
  const int knock = fd_ >= 0 ? accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC) : -1;
  if (knock < 0) return false;
  close(knock);
  return true;
}

}  // namespace conveyor
