#include "conveyor/schedule/action.h"

#include <array>
#include <cctype>
#include <ostream>
#include <utility>

#include "conveyor/common/error.h"
#include "conveyor/common/text.h"

namespace conveyor {
namespace {

constexpr std::array<std::pair<Op, std::string_view>, 10> kOpNames = {{
    {Op::kForward, "F"},
    {Op::kBackward, "B"},
    {Op::kBackwardInput, "I"},
    {Op::kBackwardWeight, "W"},
    {Op::kSendF, "SEND_F"},
    {Op::kRecvF, "RECV_F"},
    {Op::kSendB, "SEND_B"},
    {Op::kRecvB, "RECV_B"},
    {Op::kOverlapFB, "OVERLAP_F_B"},
    {Op::kReduceGrad, "REDUCE_GRAD"},
}};

// Reads a non-negative decimal at `pos`; returns -1 when there is none.
int ReadNumber(std::string_view text, size_t& pos) {
  const size_t start = pos;
  long value = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
    value = value * 10 + (text[pos] - '0');
    CONVEYOR_CHECK(value < (1L << 30)) << "number too large in action '" << text << "'";
    ++pos;
  }
  return pos == start ? -1 : static_cast<int>(value);
}

Action ParseSimple(std::string_view text, std::string_view whole, Naming naming) {
  size_t pos = 0;
  const int stage = ReadNumber(text, pos);
  CONVEYOR_CHECK(stage >= 0) << "action '" << whole << "' does not start with a stage number";
  const size_t op_start = pos;
  while (pos < text.size() && !std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
  const std::string_view op_text = text.substr(op_start, pos - op_start);
  const int microbatch = ReadNumber(text, pos);
  CONVEYOR_CHECK(pos == text.size()) << "unexpected text after action '" << whole << "'";

  Op op{};
  bool found = false;
  if (naming == Naming::kLegacy && op_text == "BW") {
    op = Op::kBackward;
    found = true;
  } else if (naming == Naming::kLegacy && op_text == "B") {
    op = Op::kBackwardInput;
    found = true;
  } else {
    for (const auto& [candidate, name] : kOpNames) {
      if (name == op_text) {
        op = candidate;
        found = true;
      }
    }
  }
  CONVEYOR_CHECK(found) << "unknown operation '" << op_text << "' in action '" << whole
                        << "' (expected F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, "
                           "REDUCE_GRAD or (..;..)OVERLAP_F_B"
                        << (op_text == "BW" ? "; 'BW' is the legacy naming of a full backward" : "")
                        << ")";
  CONVEYOR_CHECK(op != Op::kOverlapFB)
      << "OVERLAP_F_B needs its two halves in parentheses: '" << whole << "'";
  if (op == Op::kReduceGrad) {
    CONVEYOR_CHECK(microbatch < 0) << "REDUCE_GRAD takes no micro-batch: '" << whole << "'";
  } else {
    CONVEYOR_CHECK(microbatch >= 0) << "action '" << whole << "' lacks a micro-batch number";
  }
  return Action{op, stage, microbatch};
}

}  // namespace

std::string_view OpName(Op op) {
  for (const auto& [candidate, name] : kOpNames) {
    if (candidate == op) return name;
  }
  CONVEYOR_ASSERT(false) << "unknown op " << static_cast<int>(op);
  return {};
}

bool IsCompute(Op op) {
  return op == Op::kForward || op == Op::kBackward || op == Op::kBackwardInput ||
         op == Op::kBackwardWeight || op == Op::kOverlapFB;
}

bool IsComm(Op op) {
  return op == Op::kSendF || op == Op::kRecvF || op == Op::kSendB || op == Op::kRecvB;
}

bool IsBackwardish(Op op) { return op == Op::kBackward || op == Op::kBackwardInput; }

Action Action::Overlap(int f_stage, int f_microbatch, Op b_op, int b_stage, int b_microbatch) {
  CONVEYOR_ASSERT(IsBackwardish(b_op)) << "overlap backward half must be B or I";
  return Action{Op::kOverlapFB, f_stage, f_microbatch, b_op, b_stage, b_microbatch};
}

std::string Action::ToString() const {
  if (op == Op::kOverlapFB) {
    return "(" + ForwardHalf().ToString() + ";" + BackwardHalf().ToString() + ")OVERLAP_F_B";
  }
  std::string text = std::to_string(stage);
  text += OpName(op);
  if (microbatch >= 0) text += std::to_string(microbatch);
  return text;
}

bool operator==(const Action& a, const Action& b) {
  if (a.op != b.op || a.stage != b.stage || a.microbatch != b.microbatch) return false;
  if (a.op != Op::kOverlapFB) return true;
  return a.overlap_op == b.overlap_op && a.overlap_stage == b.overlap_stage &&
         a.overlap_microbatch == b.overlap_microbatch;
}

std::ostream& operator<<(std::ostream& out, const Action& action) {
  return out << action.ToString();
}

Action ParseAction(std::string_view text, Naming naming) {
  const std::string_view whole = Trim(text);
  CONVEYOR_CHECK(!whole.empty()) << "empty action";
  if (whole.front() != '(') return ParseSimple(whole, whole, naming);

  constexpr std::string_view kSuffix = ")OVERLAP_F_B";
  const size_t close = whole.find(')');
  CONVEYOR_CHECK(close != std::string_view::npos && whole.substr(close) == kSuffix)
      << "composite action '" << whole << "' must look like (0F1;3B2)OVERLAP_F_B";
  const std::string_view inner = whole.substr(1, close - 1);
  const size_t semi = inner.find(';');
  CONVEYOR_CHECK(semi != std::string_view::npos && inner.find(';', semi + 1) == inner.npos)
      << "OVERLAP_F_B needs exactly two halves separated by ';': '" << whole << "'";
  const Action f = ParseSimple(Trim(inner.substr(0, semi)), whole, naming);
  const Action b = ParseSimple(Trim(inner.substr(semi + 1)), whole, naming);
  CONVEYOR_CHECK(f.op == Op::kForward)
      << "first half of '" << whole << "' must be a forward, got " << f;
  CONVEYOR_CHECK(IsBackwardish(b.op))
      << "second half of '" << whole << "' must be a backward (B or I), got " << b;
  return Action::Overlap(f.stage, f.microbatch, b.op, b.stage, b.microbatch);
}

}  // namespace conveyor
