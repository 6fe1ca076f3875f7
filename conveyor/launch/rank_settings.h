// What every rank of a run must agree on, compared when the ranks meet: ranks started by
// another launcher (torchrun, srun, mpirun, by hand) each resolve their own flags and
// config file, and one stale file on one node would otherwise train half a model with
// another seed, deadlock on another schedule, or fail deep inside a step.
//
// A rank's settings are (name, value) pairs: the run's resolved settings named by their
// flags ("--seed"), the world size, the binary's version. Encoded as "name=value" lines for
// the rendezvous store (values hold no newline).
//
// Pure: the standard library only. Thread-safety: stateless functions.
#ifndef CONVEYOR_LAUNCH_RANK_SETTINGS_H_
#define CONVEYOR_LAUNCH_RANK_SETTINGS_H_

#include <string>
#include <utility>
#include <vector>

namespace conveyor {

using RankSettings = std::vector<std::pair<std::string, std::string>>;

// "name=value\n" lines; newlines inside a value become spaces.
std::string EncodeRankSettings(const RankSettings& settings);
RankSettings DecodeRankSettings(const std::string& text);

// "" when every rank has the same settings. Otherwise one line naming every setting that
// differs (a setting one rank lacks counts as "(none)"), each with its values and the ranks
// holding them, e.g. "--seed is 1234 on ranks 0, 2, 3 and 99 on rank 1". by_rank[r] is
// rank r's.
std::string RankDisagreement(const std::vector<RankSettings>& by_rank);

}  // namespace conveyor

#endif  // CONVEYOR_LAUNCH_RANK_SETTINGS_H_
