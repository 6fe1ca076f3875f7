#include "conveyor/schedule/verify.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "conveyor/common/error.h"
#include "conveyor/schedule/activation_memory.h"

namespace conveyor {
namespace {

// Where the copies of one communication action sit, and whether a transfer needs it.
struct CommSlot {
  int count = 0;
  int rank = -1, first = -1, second = -1;  // rank and list positions of the first two copies
  bool expected = false;
};

int CommIndex(Op op) {
  switch (op) {
    case Op::kSendF:
      return 0;
    case Op::kRecvF:
      return 1;
    case Op::kSendB:
      return 2;
    default:
      return 3;  // kRecvB
  }
}

// Where each compute of one (stage, micro-batch) sits, and how often it appears.
struct Slot {
  int f = 0, b = 0, i = 0, w = 0;          // counts
  int f_at = -1, back_at = -1, w_at = -1;  // index in the rank's list (first seen)
};

class Verifier {
 public:
  Verifier(const Program& program, const VerifyOptions& options)
      : program_(program),
        layout_(program.layout),
        options_(options),
        m_(layout_.num_microbatches()),
        slots_(static_cast<size_t>(layout_.num_stages()) * m_),
        seen_on_(layout_.num_stages(), -1),
        comms_(4 * slots_.size()) {}

  std::vector<Finding> Run() {
    for (int r = 0; r < layout_.num_ranks(); ++r) ScanRank(r);
    const bool counts_ok = CheckCounts();
    if (counts_ok) CheckDependencies();
    if (program_.has_comms() && counts_ok) {
      CheckComms();
      CheckCommOrder();
    }
    CheckMemory();
    return std::move(findings_);
  }

 private:
  template <typename... Parts>
  void Add(FindingKind kind, int rank, int index, const Parts&... parts) {
    std::ostringstream out;
    (out << ... << parts);
    findings_.push_back(Finding{kind, rank, index, out.str()});
  }

  Slot& slot(int stage, int mb) { return slots_[stage * m_ + mb]; }
  CommSlot& comm(Op op, int stage, int mb) {
    return comms_[CommIndex(op) * slots_.size() + stage * m_ + mb];
  }

  // Records a simple compute or comm action; false when it is not valid for the layout.
  bool ValidIndex(int r, int k, const Action& a, int stage, int mb) {
    if (!layout_.valid_stage(stage)) {
      Add(FindingKind::kBadAction, r, k, "rank ", r, " action #", k, " ", a, ": stage ", stage,
          " outside [0, ", layout_.num_stages(), ")");
      return false;
    }
    if (!layout_.runs(stage, mb)) {
      Add(FindingKind::kBadAction, r, k, "rank ", r, " action #", k, " ", a, ": micro-batch ", mb,
          " does not flow through stage ", stage, " (it carries [", layout_.first_microbatch(stage),
          ", ", layout_.end_microbatch(stage), "))");
      return false;
    }
    if (seen_on_[stage] >= 0 && seen_on_[stage] != r) {
      if (!reported_two_ranks_[stage]) {
        Add(FindingKind::kStageOnTwoRanks, r, k, "stage ", stage, " has actions on rank ",
            seen_on_[stage], " and rank ", r);
        reported_two_ranks_[stage] = true;
      }
    } else if (layout_.rank_of(stage) != r) {
      Add(FindingKind::kWrongRank, r, k, "rank ", r, " action #", k, " ", a, ": stage ", stage,
          " is placed on rank ", layout_.rank_of(stage));
    }
    if (seen_on_[stage] < 0) seen_on_[stage] = r;
    return true;
  }

  void RecordCompute(int r, int k, const Action& a) {
    if (!ValidIndex(r, k, a, a.stage, a.microbatch)) return;
    Slot& s = slot(a.stage, a.microbatch);
    auto first = [k](int& at) {
      if (at < 0) at = k;
    };
    switch (a.op) {
      case Op::kForward:
        ++s.f;
        first(s.f_at);
        break;
      case Op::kBackward:
        ++s.b;
        first(s.back_at);
        break;
      case Op::kBackwardInput:
        ++s.i;
        first(s.back_at);
        break;
      case Op::kBackwardWeight:
        ++s.w;
        first(s.w_at);
        break;
      default:
        CONVEYOR_ASSERT(false) << a;
    }
  }

  void ScanRank(int r) {
    const auto& actions = program_.ranks[r];
    for (int k = 0; k < static_cast<int>(actions.size()); ++k) {
      const Action& a = actions[k];
      if (a.op == Op::kOverlapFB) {
        RecordCompute(r, k, a.ForwardHalf());
        RecordCompute(r, k, a.BackwardHalf());
      } else if (IsCompute(a.op)) {
        RecordCompute(r, k, a);
      } else if (IsComm(a.op)) {
        if (ValidIndex(r, k, a, a.stage, a.microbatch)) {
          CommSlot& c = comm(a.op, a.stage, a.microbatch);
          if (c.count++ == 0) {
            c.rank = r;
            c.first = k;
          } else if (c.count == 2) {
            c.second = k;
          }
        }
      } else if (!layout_.valid_stage(a.stage)) {
        Add(FindingKind::kBadAction, r, k, "rank ", r, " action #", k, " ", a, ": unknown stage");
      }
    }
  }

  // True when every (stage, micro-batch) has exactly its computes and every action is
  // valid, so the dependency and comm checks can run.
  bool CheckCounts() {
    const size_t before = findings_.size();
    for (int st = 0; st < layout_.num_stages(); ++st) {
      const int r = layout_.rank_of(st);
      for (int mb = layout_.first_microbatch(st); mb < layout_.end_microbatch(st); ++mb) {
        const Slot& s = slot(st, mb);
        auto count = [&](int n, const char* what) {
          if (n == 0) {
            Add(FindingKind::kMissing, r, -1, "stage ", st, " micro-batch ", mb, " has no ", what);
          } else if (n > 1) {
            Add(FindingKind::kDuplicate, r, -1, "stage ", st, " micro-batch ", mb, " has ", n, " ",
                what, "s");
          }
        };
        count(s.f, "forward (F)");
        if (s.b > 0 && (s.i > 0 || s.w > 0)) {
          Add(FindingKind::kMixedBackward, r, -1, "stage ", st, " micro-batch ", mb,
              " has both a full backward (B) and a split one (I/W)");
        } else if (s.b > 0) {
          count(s.b, "full backward (B)");
        } else if (s.i == 0 && s.w == 0) {
          Add(FindingKind::kMissing, r, -1, "stage ", st, " micro-batch ", mb,
              " has no backward (B, or I and W)");
        } else {
          count(s.i, "backward for inputs (I)");
          count(s.w, "backward for weights (W)");
        }
        if (s.back_at >= 0 && s.f_at >= 0 && s.back_at < s.f_at) {
          Add(FindingKind::kWrongOrder, r, s.back_at, "rank ", r, ": backward of stage ", st,
              " micro-batch ", mb, " (#", s.back_at, ") comes before its forward (#", s.f_at, ")");
        }
        if (s.w_at >= 0 && s.back_at >= 0 && s.w_at < s.back_at) {
          Add(FindingKind::kWrongOrder, r, s.w_at, "rank ", r, ": W of stage ", st, " micro-batch ",
              mb, " (#", s.w_at, ") comes before its I (#", s.back_at, ")");
        }
      }
    }
    for (size_t k = before; k < findings_.size(); ++k) {
      if (findings_[k].kind != FindingKind::kWrongOrder) return false;
    }
    for (size_t k = 0; k < before; ++k) {
      if (findings_[k].kind == FindingKind::kBadAction) return false;
    }
    return true;
  }

  // Runs every rank's compute in order under the dependency rules; whatever never runs is
  // a broken dependency (a cycle across ranks, or an order the ranks cannot satisfy).
  void CheckDependencies() {
    const int p = layout_.num_ranks();
    Progress progress(layout_);
    std::vector<size_t> pos(p, 0);
    bool progressed = true;
    while (progressed) {
      progressed = false;
      for (int r = 0; r < p; ++r) {
        const auto& actions = program_.ranks[r];
        while (pos[r] < actions.size()) {
          const Action& a = actions[pos[r]];
          if (IsCompute(a.op)) {
            if (!progress.Ready(a)) break;
            progress.MarkDone(a);
          }
          ++pos[r];
          progressed = true;
        }
      }
    }
    for (int r = 0; r < p; ++r) {
      if (pos[r] == program_.ranks[r].size()) continue;
      const Action& a = program_.ranks[r][pos[r]];
      Action missing;
      progress.Ready(a, &missing);
      Add(FindingKind::kBrokenDependency, r, static_cast<int>(pos[r]), "rank ", r, " action #",
          pos[r], " ", a, " can never run: it waits for ", missing, " on rank ",
          layout_.rank_of(missing.stage), ", which waits in turn (a cycle)");
    }
  }

  // Every transfer between ranks needs one SEND after its producer and one RECV before its
  // consumer; every comm present must be such a transfer.
  void CheckComms() {
    for (int r = 0; r < layout_.num_ranks(); ++r) {
      const auto& actions = program_.ranks[r];
      for (int k = 0; k < static_cast<int>(actions.size()); ++k) {
        for (const Transfer& t : TransfersOf(layout_, actions[k])) {
          ExpectComm(t.send_op, t.from_stage, t.microbatch, k, /*after=*/true);
          const int consumer = t.recv_op == Op::kRecvF ? slot(t.to_stage, t.microbatch).f_at
                                                       : slot(t.to_stage, t.microbatch).back_at;
          ExpectComm(t.recv_op, t.to_stage, t.microbatch, consumer, /*after=*/false);
        }
      }
    }
    constexpr Op kOps[] = {Op::kSendF, Op::kRecvF, Op::kSendB, Op::kRecvB};
    for (size_t index = 0; index < comms_.size(); ++index) {
      const CommSlot& c = comms_[index];
      if (c.count == 0 || c.expected) continue;
      const Op op = kOps[index / slots_.size()];
      const int stage = static_cast<int>(index % slots_.size()) / m_;
      const int mb = static_cast<int>(index % slots_.size()) % m_;
      const int peer = op == Op::kSendF || op == Op::kRecvB ? layout_.next_stage(stage)
                                                            : layout_.prev_stage(stage);
      Add(FindingKind::kUnmatchedComm, c.rank, c.first, "rank ", c.rank, " action #", c.first, " ",
          Action{op, stage, mb},
          peer < 0 ? ": no neighbouring stage to exchange with"
                   : (layout_.rank_of(peer) == c.rank ? ": both stages live on this rank"
                                                      : ": no such transfer"));
    }
  }

  // Between every two ranks, the i-th RECV the receiver posts from the sender is the i-th
  // SEND the sender posts to it. A message is named by the RECV that takes it.
  void CheckCommOrder() {
    const int p = layout_.num_ranks();
    struct Message {
      Action recv;  // the receiver's action
      int index;    // in its rank's list
    };
    // (from, to) -> the messages in the sender's order, and in the receiver's.
    std::vector<std::vector<Message>> sent(p * p), received(p * p);
    for (int r = 0; r < p; ++r) {
      const auto& actions = program_.ranks[r];
      for (int k = 0; k < static_cast<int>(actions.size()); ++k) {
        const Action& a = actions[k];
        if (!IsComm(a.op)) continue;
        const bool forward = a.op == Op::kSendF || a.op == Op::kRecvF;
        const int peer = a.op == Op::kSendF || a.op == Op::kRecvB ? layout_.next_stage(a.stage)
                                                                  : layout_.prev_stage(a.stage);
        if (peer < 0) continue;  // CheckComms reported it
        const int q = layout_.rank_of(peer);
        if (a.op == Op::kSendF || a.op == Op::kSendB) {
          const Action recv{forward ? Op::kRecvF : Op::kRecvB, peer, a.microbatch};
          sent[r * p + q].push_back(Message{recv, k});
        } else {
          received[q * p + r].push_back(Message{a, k});
        }
      }
    }
    for (int from = 0; from < p; ++from) {
      for (int to = 0; to < p; ++to) {
        const auto& s = sent[from * p + to];
        const auto& r = received[from * p + to];
        for (size_t i = 0; i < std::min(s.size(), r.size()); ++i) {
          if (s[i].recv == r[i].recv) continue;
          Add(FindingKind::kCommOrder, to, r[i].index, "rank ", to, " action #", r[i].index, " ",
              r[i].recv, " is its receive #", i, " from rank ", from, ", but rank ", from,
              "'s send #", i, " to it (action #", s[i].index, ") is for ", s[i].recv,
              ": a backend that matches messages by order would swap them");
          break;  // one finding per pair
        }
      }
    }
  }

  void ExpectComm(Op op, int stage, int mb, int compute_at, bool after) {
    const Action want{op, stage, mb};
    const int r = layout_.rank_of(stage);
    CommSlot& c = comm(op, stage, mb);
    c.expected = true;
    if (c.count == 0) {
      Add(FindingKind::kUnmatchedComm, r, -1, "rank ", r, " lacks ", want, " (its ",
          after ? "receiver expects it" : "sender sends it", ")");
      return;
    }
    if (c.count > 1) {
      Add(FindingKind::kUnmatchedComm, r, c.second, "rank ", r, " has ", c.count, " copies of ",
          want);
    }
    if (after ? c.first < compute_at : c.first > compute_at) {
      Add(FindingKind::kUnmatchedComm, r, c.first, "rank ", r, " action #", c.first, " ", want,
          " comes ",
          after ? "before the compute that produces it (#" : "after the compute that needs it (#",
          compute_at, ")");
    }
  }

  void CheckMemory() {
    if (options_.max_in_flight <= 0) return;
    const std::vector<int> peaks = PeakInFlight(program_);
    for (int r = 0; r < layout_.num_ranks(); ++r) {
      if (peaks[r] > options_.max_in_flight) {
        Add(FindingKind::kMemoryBound, r, -1, "rank ", r, " holds up to ", peaks[r],
            " micro-batch activations in flight, more than the bound ", options_.max_in_flight);
      }
    }
  }

  const Program& program_;
  const Layout& layout_;
  const VerifyOptions& options_;
  const int m_;
  std::vector<Slot> slots_;
  std::vector<int> seen_on_;
  std::map<int, bool> reported_two_ranks_;
  std::vector<CommSlot> comms_;  // by (CommIndex(op), stage, micro-batch)
  std::vector<Finding> findings_;
};

}  // namespace

std::string_view FindingKindName(FindingKind kind) {
  switch (kind) {
    case FindingKind::kBadAction:
      return "bad-action";
    case FindingKind::kWrongRank:
      return "wrong-rank";
    case FindingKind::kStageOnTwoRanks:
      return "stage-on-two-ranks";
    case FindingKind::kMissing:
      return "missing";
    case FindingKind::kDuplicate:
      return "duplicate";
    case FindingKind::kMixedBackward:
      return "mixed-backward";
    case FindingKind::kWrongOrder:
      return "wrong-order";
    case FindingKind::kBrokenDependency:
      return "broken-dependency";
    case FindingKind::kUnmatchedComm:
      return "unmatched-comm";
    case FindingKind::kCommOrder:
      return "comm-order";
    case FindingKind::kMemoryBound:
      return "memory-bound";
  }
  return "unknown";
}

std::vector<Finding> Verify(const Program& program, const VerifyOptions& options) {
  return Verifier(program, options).Run();
}

std::string FormatFindings(const std::vector<Finding>& findings) {
  std::string text;
  for (const Finding& f : findings) {
    text += "[";
    text += FindingKindName(f.kind);
    text += "] " + f.message + "\n";
  }
  return text;
}

void VerifyOrThrow(const Program& program, const VerifyOptions& options) {
  const std::vector<Finding> findings = Verify(program, options);
  CONVEYOR_CHECK(findings.empty()) << "the program has " << findings.size() << " problem(s):\n"
                                   << FormatFindings(findings);
}

}  // namespace conveyor
