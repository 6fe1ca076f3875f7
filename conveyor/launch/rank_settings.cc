#include "conveyor/launch/rank_settings.h"

#include <map>
#include <set>
#include <sstream>

namespace conveyor {
namespace {

// "rank 3" or "ranks 0, 2, 3".
std::string Ranks(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

}  // namespace

std::string EncodeRankSettings(const RankSettings& settings) {
  std::string out;
  for (const auto& [name, value] : settings) {
    std::string flat = value;
    for (char& c : flat) c = c == '\n' ? ' ' : c;
    out += name + "=" + flat + "\n";
  }
  return out;
}

RankSettings DecodeRankSettings(const std::string& text) {
  RankSettings settings;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t equals = line.find('=');
    if (equals == std::string::npos) continue;
    settings.emplace_back(line.substr(0, equals), line.substr(equals + 1));
  }
  return settings;
}

std::string RankDisagreement(const std::vector<RankSettings>& by_rank) {
  // Names in the order rank 0 gives them, then any other rank's.
  std::vector<std::string> names;
  std::set<std::string> seen;
  std::vector<std::map<std::string, std::string>> values(by_rank.size());
  for (size_t r = 0; r < by_rank.size(); ++r) {
    for (const auto& [name, value] : by_rank[r]) {
      values[r][name] = value;
      if (seen.insert(name).second) names.push_back(name);
    }
  }
  std::string out;
  for (const std::string& name : names) {
    // Each value and the ranks holding it, in the order of their first rank.
    std::vector<std::pair<std::string, std::vector<int>>> groups;
    for (size_t r = 0; r < by_rank.size(); ++r) {
      const auto it = values[r].find(name);
      const std::string value = it == values[r].end() ? "(none)" : it->second;
      auto group = groups.begin();
      while (group != groups.end() && group->first != value) ++group;
      if (group == groups.end()) {
        groups.push_back({value, {static_cast<int>(r)}});
      } else {
        group->second.push_back(static_cast<int>(r));
      }
    }
    if (groups.size() < 2) continue;
    out += (out.empty() ? "" : "; ") + name + " is ";
    for (size_t g = 0; g < groups.size(); ++g) {
      const std::string value = groups[g].first.empty() ? "\"\"" : groups[g].first;
      out += (g == 0                   ? ""
              : g + 1 == groups.size() ? " and "
                                       : ", ") +
             value + " on " + Ranks(groups[g].second);
    }
  }
  return out;
}

}  // namespace conveyor
