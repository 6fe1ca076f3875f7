#include "conveyor/schedule/program_csv.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "conveyor/common/error.h"
#include "conveyor/common/text.h"
#include "conveyor/schedule/pipeline_limits.h"

namespace conveyor {
namespace {

// One non-empty cell of the file, parsed in the current naming when possible.
struct Cell {
  int rank;
  int column;  // 1-based, counting empty cells
  std::string_view text;
  Action action;
  bool legacy_only;  // parses only in the legacy naming (it holds "BW")
};

std::string Where(const Cell& cell) {
  return "rank " + std::to_string(cell.rank) + ", column " + std::to_string(cell.column) + ": '" +
         std::string(cell.text) + "'";
}

std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  while (!lines.empty() && Trim(lines.back()).empty()) lines.pop_back();
  return lines;
}

// The action `text` names in `naming`, or nullopt (and *error, when given, says why).
std::optional<Action> TryParse(std::string_view text, Naming naming, std::string* error) {
  try {
    return ParseAction(text, naming);
  } catch (const UserError& e) {
    if (error != nullptr) *error = e.what();
    return std::nullopt;
  }
}

Cell ParseCell(int rank, int column, std::string_view text) {
  std::string error;
  std::optional<Action> action = TryParse(text, Naming::kCurrent, &error);
  bool legacy_only = false;
  if (!action.has_value()) {
    action = TryParse(text, Naming::kLegacy, nullptr);
    legacy_only = action.has_value();
  }
  CONVEYOR_CHECK(action.has_value()) << "schedule CSV rank " << rank << ", column " << column
                                     << ": cannot parse '" << text << "': " << error;
  return Cell{rank, column, text, *action, legacy_only};
}

// Calls `visit` on each simple half of `action` (both halves of an OVERLAP_F_B).
template <typename Visit>
void ForEachHalf(const Action& action, Visit&& visit) {
  if (action.op == Op::kOverlapFB) {
    visit(action.ForwardHalf());
    visit(action.BackwardHalf());
  } else {
    visit(action);
  }
}

using StageMb = std::pair<int, int>;

// Chooses the naming and rewrites the cells' actions into it; returns the notes to report.
std::vector<std::string> ApplyNaming(std::vector<Cell>& cells, const CsvReadOptions& options,
                                     Naming& naming) {
  const Cell* bw_cell = nullptr;
  std::set<StageMb> weights;
  for (const Cell& cell : cells) {
    if (cell.legacy_only && bw_cell == nullptr) bw_cell = &cell;
    ForEachHalf(cell.action, [&](const Action& a) {
      if (a.op == Op::kBackwardWeight) weights.insert({a.stage, a.microbatch});
    });
  }
  // A "B" (not from "BW") whose (stage, micro-batch) also has a W.
  const Cell* b_with_w = nullptr;
  for (const Cell& cell : cells) {
    if (cell.legacy_only || b_with_w != nullptr) continue;
    ForEachHalf(cell.action, [&](const Action& a) {
      if (a.op == Op::kBackward && weights.count({a.stage, a.microbatch})) b_with_w = &cell;
    });
  }

  std::vector<std::string> notes;
  if (options.naming.has_value()) {
    naming = *options.naming;
    notes.push_back(naming == Naming::kLegacy ? "legacy naming (requested)"
                                              : "current naming (requested)");
    CONVEYOR_CHECK(naming == Naming::kLegacy || bw_cell == nullptr)
        << "schedule CSV " << Where(*bw_cell)
        << ": 'BW' is the legacy naming of a full backward, but the current naming was "
           "requested";
  } else if (bw_cell != nullptr) {
    naming = Naming::kLegacy;
    notes.push_back("legacy naming assumed: 'BW' appears (" + Where(*bw_cell) +
                    "); B read as I (backward for inputs), BW as B (full backward)");
  } else if (b_with_w != nullptr) {
    naming = Naming::kLegacy;
    notes.push_back(
        "legacy naming assumed: B and W both appear for the same stage and "
        "micro-batch (" +
        Where(*b_with_w) + "); B read as I (backward for inputs)");
  } else {
    naming = Naming::kCurrent;
    notes.push_back(
        "current naming assumed: no 'BW' and no B with a W for the same stage "
        "and micro-batch");
  }
  if (naming == Naming::kCurrent) return notes;

  int full_backwards = 0;
  for (Cell& cell : cells) {
    if (cell.legacy_only) continue;  // parsed in the legacy naming already
    Action& a = cell.action;
    Op& op = a.op == Op::kOverlapFB ? a.overlap_op : a.op;
    const StageMb key = a.op == Op::kOverlapFB ? StageMb{a.overlap_stage, a.overlap_microbatch}
                                               : StageMb{a.stage, a.microbatch};
    if (op != Op::kBackward) continue;
    if (weights.count(key)) {
      op = Op::kBackwardInput;
    } else {
      ++full_backwards;
    }
  }
  if (full_backwards > 0) {
    notes.push_back(std::to_string(full_backwards) +
                    " legacy B action(s) without a W for their stage and micro-batch read as "
                    "full backward");
  }
  return notes;
}

bool IsLoopMap(const std::vector<int>& map, int ranks) {
  if (map.size() % ranks != 0) return false;
  for (size_t s = 0; s < map.size(); ++s) {
    if (map[s] != static_cast<int>(s) % ranks) return false;
  }
  return true;
}

bool IsVMap(const std::vector<int>& map, int ranks) {
  if (static_cast<int>(map.size()) != 2 * ranks) return false;
  for (int s = 0; s < 2 * ranks; ++s) {
    if (map[s] != (s < ranks ? s : 2 * ranks - 1 - s)) return false;
  }
  return true;
}

// Whether `microbatches` (a set) is exactly [first, end).
bool IsRange(const std::set<int>& microbatches, int first, int end) {
  return !microbatches.empty() && *microbatches.begin() == first &&
         *microbatches.rbegin() == end - 1 && static_cast<int>(microbatches.size()) == end - first;
}

// The smallest micro-batch in exactly one of `a` and `b`; nullopt when they are equal.
std::optional<int> FirstDifference(const std::set<int>& a, const std::set<int>& b) {
  std::vector<int> differences;
  std::set_symmetric_difference(a.begin(), a.end(), b.begin(), b.end(),
                                std::back_inserter(differences));
  if (differences.empty()) return std::nullopt;
  return differences.front();
}

Layout InferLayout(const std::vector<Cell>& cells, int ranks) {
  int stages = 0, microbatches = 0;
  const Cell* largest_stage = nullptr;
  const Cell* largest_microbatch = nullptr;
  for (const Cell& cell : cells) {
    ForEachHalf(cell.action, [&](const Action& a) {
      if (a.stage + 1 > stages) {
        stages = a.stage + 1;
        largest_stage = &cell;
      }
      if (a.microbatch + 1 > microbatches) {
        microbatches = a.microbatch + 1;
        largest_microbatch = &cell;
      }
    });
  }
  CONVEYOR_CHECK(microbatches > 0) << "schedule CSV names no micro-batch";
  // Before anything is sized by these numbers: one typo can make them huge.
  try {
    CheckProgramSize(ranks, stages, microbatches);
  } catch (const UserError& e) {
    throw UserError("schedule CSV: " + std::string(e.what()) + " (largest stage at " +
                    Where(*largest_stage) + ", largest micro-batch at " +
                    Where(*largest_microbatch) + ")");
  }

  std::vector<int> stage_to_rank(stages, -1);
  std::vector<const Cell*> first_seen(stages, nullptr);
  std::vector<std::set<int>> microbatches_of(stages);
  std::map<StageMb, const Cell*> first_of;  // per (stage, micro-batch)
  for (const Cell& cell : cells) {
    ForEachHalf(cell.action, [&](const Action& a) {
      if (a.microbatch >= 0) {
        microbatches_of[a.stage].insert(a.microbatch);
        first_of.emplace(StageMb{a.stage, a.microbatch}, &cell);
      }
      if (first_seen[a.stage] == nullptr) {
        first_seen[a.stage] = &cell;
        stage_to_rank[a.stage] = cell.rank;
      }
      CONVEYOR_CHECK(stage_to_rank[a.stage] == cell.rank)
          << "schedule CSV places stage " << a.stage << " on two ranks: rank "
          << stage_to_rank[a.stage] << " (" << Where(*first_seen[a.stage]) << ") and rank "
          << cell.rank << " (" << Where(cell) << ")";
    });
  }
  for (int s = 0; s < stages; ++s) {
    CONVEYOR_CHECK(stage_to_rank[s] >= 0)
        << "schedule CSV never mentions stage " << s << " although it has " << stages
        << " stages (stages must be numbered 0.." << stages - 1 << ")";
  }

  const int half = (microbatches + 1) / 2;
  const bool dual = stages % 2 == 0 && IsRange(microbatches_of[0], 0, half) &&
                    IsRange(microbatches_of[stages / 2], half, microbatches);
  // Every stage of a direction runs the same micro-batches, and together they are
  // [0, microbatches): a micro-batch on only some stages is a typo (and would make the
  // verifier report every stage x micro-batch it lacks).
  for (int s = 0; s < stages; ++s) {
    const int like = dual && s >= stages / 2 ? stages / 2 : 0;
    const std::optional<int> mb = FirstDifference(microbatches_of[s], microbatches_of[like]);
    if (!mb.has_value()) continue;
    const bool on_s = microbatches_of[s].count(*mb) > 0;
    const int runs = on_s ? s : like, lacks = on_s ? like : s;
    CONVEYOR_CHECK(false) << "schedule CSV runs micro-batch " << *mb << " on stage " << runs << " ("
                          << Where(*first_of.at({runs, *mb})) << ") but never on stage " << lacks;
  }
  if (!dual) {
    for (int mb = 0; mb < microbatches; ++mb) {
      CONVEYOR_CHECK(microbatches_of[0].count(mb) > 0)
          << "schedule CSV never mentions micro-batch " << mb << " although its largest is "
          << microbatches - 1 << " (" << Where(*largest_microbatch)
          << "; micro-batches must be numbered 0.." << microbatches - 1 << ")";
    }
  }
  if (!dual && IsLoopMap(stage_to_rank, ranks)) {
    return Layout::Loop(ranks, stages / ranks, microbatches);
  }
  if (IsVMap(stage_to_rank, ranks)) {
    return dual ? Layout::Dual(ranks, microbatches) : Layout::V(ranks, microbatches);
  }
  return Layout::Custom(ranks, std::move(stage_to_rank), microbatches, dual ? 2 : 1);
}

}  // namespace

CsvReadOptions ParseNamingChoice(std::string_view text) {
  CsvReadOptions options;
  if (text == "current") {
    options.naming = Naming::kCurrent;
  } else if (text == "legacy") {
    options.naming = Naming::kLegacy;
  } else {
    CONVEYOR_CHECK(text == "auto")
        << "unknown CSV naming '" << text << "' (expected auto, current or legacy)";
  }
  return options;
}

std::string ProgramToCsv(const Program& program) {
  std::string csv;
  for (const auto& actions : program.ranks) {
    for (size_t i = 0; i < actions.size(); ++i) {
      if (i > 0) csv += ',';
      csv += actions[i].ToString();
    }
    csv += '\n';
  }
  return csv;
}

void WriteProgramCsv(const Program& program, const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  CONVEYOR_CHECK(out.is_open()) << "cannot open '" << path << "' to write a schedule CSV";
  out << ProgramToCsv(program);
  out.flush();
  CONVEYOR_CHECK(out.good()) << "failed to write the schedule CSV '" << path << "'";
}

LoadedProgram ReadProgramCsv(std::string_view text, const CsvReadOptions& options) {
  const std::vector<std::string_view> lines = SplitLines(text);
  CONVEYOR_CHECK(!lines.empty()) << "schedule CSV is empty (expected one line per rank)";

  const int ranks = static_cast<int>(lines.size());
  std::vector<Cell> cells;
  std::vector<int> actions_per_rank(ranks, 0);
  for (int r = 0; r < ranks; ++r) {
    std::string_view rest = lines[r];
    for (int column = 1;; ++column) {
      const size_t comma = rest.find(',');
      const std::string_view cell = Trim(rest.substr(0, comma));
      if (!cell.empty()) {
        cells.push_back(ParseCell(r, column, cell));
        ++actions_per_rank[r];
      }
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    CONVEYOR_CHECK(actions_per_rank[r] > 0)
        << "schedule CSV rank " << r << " (line " << r + 1 << ") has no actions";
  }

  Naming naming;
  std::vector<std::string> notes = ApplyNaming(cells, options, naming);
  LoadedProgram loaded{Program(InferLayout(cells, ranks)), naming, std::move(notes)};
  for (const Cell& cell : cells) loaded.program.ranks[cell.rank].push_back(cell.action);
  return loaded;
}

LoadedProgram LoadProgramCsv(const std::string& path, const CsvReadOptions& options) {
  std::ifstream in(path, std::ios::binary);
  CONVEYOR_CHECK(in.is_open()) << "cannot read the schedule CSV '" << path << "'";
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return ReadProgramCsv(text.str(), options);
  } catch (const UserError& error) {
    throw UserError(path + ": " + error.what());
  }
}

}  // namespace conveyor
