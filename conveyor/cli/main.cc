// conveyor: plan and run pipeline-parallel training.
#include <CLI/CLI.hpp>
#include <iostream>

#include "conveyor/cli/bench_command.h"
#include "conveyor/cli/compare_command.h"
#include "conveyor/cli/data_command.h"
#include "conveyor/cli/eval_command.h"
#include "conveyor/cli/export_command.h"
#include "conveyor/cli/generate_command.h"
#include "conveyor/cli/plan_command.h"
#include "conveyor/cli/profile_command.h"
#include "conveyor/cli/tokenizer_command.h"
#include "conveyor/cli/train_command.h"
#include "conveyor/common/error.h"
#include "conveyor/common/text.h"
#include "conveyor/common/version.h"
#include "conveyor/schedule/registry.h"

int main(int argc, char** argv) {
  CLI::App app{"conveyor: pipeline-parallel training, planned before it runs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", conveyor::ConveyorVersion());
  conveyor::AddPlanCommand(app);
  conveyor::AddProfileCommand(app);
  conveyor::AddCompareCommand(app);
  const std::vector<std::string> args(argv + 1, argv + argc);
  int exit_code = 0;
  conveyor::AddBenchCommand(app, args, &exit_code);
  conveyor::AddTrainCommand(app, args, &exit_code);
  conveyor::AddGenerateCommand(app, args, &exit_code);
  conveyor::AddExportCommand(app);
  conveyor::AddDataCommand(app);
  conveyor::AddTokenizerCommand(app);
  conveyor::AddEvalCommand(app, args, &exit_code);
  bool long_list = false;
  CLI::App* list = app.add_subcommand("list", "print the schedule names, one per line");
  list->add_flag("--long,-l", long_list, "with a one-line summary each");
  list->callback([&long_list] {
    for (const conveyor::ScheduleInfo& info : conveyor::AllSchedules()) {
      if (long_list) {
        std::cout << conveyor::PadColumn(info.name, 17) << info.summary << "\n";
      } else {
        std::cout << info.name << "\n";
      }
    }
  });
  std::string names;
  bool known = false;
  for (const CLI::App* sub : app.get_subcommands({})) {
    names += (names.empty() ? "" : ", ") + sub->get_name();
    known = known || (argc > 1 && sub->get_name() == argv[1]);
  }
  if (argc > 1 && argv[1][0] != '-' && !known) {
    std::cerr << "conveyor: error: unknown command '" << argv[1] << "' (commands: " << names
              << ")\n";
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "conveyor: error: " << e.what() << " (see --help)\n";
    return 2;
  } catch (const std::exception& e) {  // conveyor's kinds and anything libraries throw
    std::cerr << "conveyor: error: " << conveyor::ErrorLine(e) << "\n";
    return 1;
  }
  return exit_code;
}
