// Errors of conveyor, in two tiers.
//
//   CONVEYOR_CHECK(cond) << "message";   user input is wrong: throws conveyor::UserError.
//   CONVEYOR_ASSERT(cond) << "message";  an invariant of conveyor broke: throws
//                                        conveyor::InternalError (a bug in conveyor).
//
// Both stream extra context after the macro; the message names the failed condition, the
// offending values the caller streams, and the source location for assertions. Every
// conveyor exception derives from conveyor::Error (itself a std::runtime_error), so a caller
// that only wants "did conveyor refuse this" catches conveyor::Error.
//
// The macros throw: do not use them in destructors or noexcept functions (the exception would
// terminate the process).
//
// Thread-safety: the macros are safe to use from any thread.
#ifndef CONVEYOR_COMMON_ERROR_H_
#define CONVEYOR_COMMON_ERROR_H_

#include <sstream>
#include <stdexcept>
#include <string>

namespace conveyor {

// Base of every exception conveyor throws.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Bad input from a user: arguments, configuration, schedule files, checkpoints.
class UserError : public Error {
 public:
  explicit UserError(const std::string& what) : Error(what) {}
};

// A broken invariant inside conveyor: always a bug.
class InternalError : public Error {
 public:
  explicit InternalError(const std::string& what) : Error(what) {}
};

// The first line of e.what(): libtorch's errors append a backtrace after it.
std::string Brief(const std::exception& e);

// What a user is told of `e`, in one line: Brief(e); for an InternalError, prefixed with
// kInternalErrorNote (a bug in conveyor, not in the user's input, and where to report it).
std::string ErrorLine(const std::exception& e);
inline constexpr char kInternalErrorNote[] =
    "internal error (a bug in conveyor, not in your input: please report this line and the "
    "command to conveyor's issue tracker): ";

namespace internal {

// Collects the message the macros below stream. Throwing is left to Raise, so no exception
// ever leaves a destructor.
class Message {
 public:
  explicit Message(std::string prefix) { stream_ << prefix; }
  Message(const Message&) = delete;
  Message& operator=(const Message&) = delete;

  template <typename T>
  Message& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }
  std::string str() const { return stream_.str(); }

 private:
  std::ostringstream stream_;
};

// `Raise<E>() & message` throws E with the message. operator& binds looser than <<, so the
// whole streamed message is built first.
template <typename E>
struct Raise {
  [[noreturn]] void operator&(const Message& message) const { throw E(message.str()); }
};

std::string AssertPrefix(const char* condition, const char* file, int line);

}  // namespace internal
}  // namespace conveyor

// `if (c) {} else` keeps the macro a single statement that also accepts trailing `<<`.
#define CONVEYOR_CHECK(condition) \
  if (condition) {                \
  } else                          \
    ::conveyor::internal::Raise<::conveyor::UserError>() & ::conveyor::internal::Message("")

#define CONVEYOR_ASSERT(condition)                             \
  if (condition) {                                             \
  } else                                                       \
    ::conveyor::internal::Raise<::conveyor::InternalError>() & \
        ::conveyor::internal::Message(                         \
            ::conveyor::internal::AssertPrefix(#condition, __FILE__, __LINE__))

#endif  // CONVEYOR_COMMON_ERROR_H_
