#include "conveyor/cli/bench_support.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <sstream>

#include "conveyor/cli/output.h"
#include "conveyor/common/error.h"
#include "conveyor/common/text.h"
#include "conveyor/schedule/registry.h"

namespace conveyor {

std::vector<std::string> SelectedSchedules(const std::string& list) {
  std::vector<std::string> names;
  if (list.empty()) {
    for (const ScheduleInfo& info : AllSchedules()) names.emplace_back(info.name);
    return names;
  }
  std::stringstream in(list);
  std::string name;
  while (std::getline(in, name, ',')) {
    FindSchedule(name);  // fails early on a typo
    names.push_back(name);
  }
  return names;
}

std::string BenchTable(const nlohmann::json& rows, const std::string& header,
                       const std::function<std::string(const nlohmann::json&)>& line) {
  std::string text = header;
  for (const auto& row : rows) {
    if (row.contains("skipped")) {
      const std::string name = row["schedule"];
      text += PadColumn(name, 17) + "skipped: " + row["skipped"].get<std::string>() + "\n";
    } else {
      text += line(row);
    }
  }
  return text;
}

void BenchOutput::Register(CLI::App* cmd) {
  cmd->add_option("--format", format, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->add_option("--out,-o", out, "write to this file instead of stdout");
}

void BenchOutput::Write(const nlohmann::json& rows,
                        const std::function<std::string(const nlohmann::json&)>& table) const {
  WriteOutput(out, format == "json" ? rows.dump(2) + "\n" : table(rows));
}

}  // namespace conveyor
