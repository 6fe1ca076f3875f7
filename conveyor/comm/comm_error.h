// The error a communication operation throws.
//
// CommError is what Work::Wait(), the blocking collectives and group creation throw when an
// operation fails, times out, or is aborted because some rank reported a failure. Its message
// always names this rank, the operation, the peer and the tag where there are any, e.g.
//   "rank 2: recv from rank 1 (tag 7) timed out after 5000 ms"
//   "rank 0: all-reduce aborted: rank 3 failed: loss is NaN".
#ifndef CONVEYOR_COMM_COMM_ERROR_H_
#define CONVEYOR_COMM_COMM_ERROR_H_

#include <string>

#include "conveyor/common/error.h"

namespace conveyor {

class CommError : public Error {
 public:
  // `caused_by_peer`: this rank stopped because another rank failed first (the message then
  // names that rank and its reason), as opposed to failing itself.
  explicit CommError(const std::string& what, bool caused_by_peer = false)
      : Error(what), caused_by_peer_(caused_by_peer) {}

  bool caused_by_peer() const { return caused_by_peer_; }

 private:
  bool caused_by_peer_;
};

}  // namespace conveyor

#endif  // CONVEYOR_COMM_COMM_ERROR_H_
