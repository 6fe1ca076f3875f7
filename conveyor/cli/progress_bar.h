// Progress of a long run on rank 0: a bar redrawn in place on a terminal, plain log lines
// (about twenty per run, and the last step) when output is a file or a pipe.
#ifndef CONVEYOR_CLI_PROGRESS_BAR_H_
#define CONVEYOR_CLI_PROGRESS_BAR_H_

#include <chrono>
#include <cstdint>
#include <string>

namespace conveyor {

class ProgressBar {
 public:
  // `total` steps; the run starts at `first` (after a resume).
  ProgressBar(int64_t total, int64_t first, bool terminal);

  void Step(int64_t step, double loss, double lr, double tokens_per_s);
  // A line that must not be overwritten (evaluation, checkpoint): ends the bar first.
  void Note(const std::string& line);
  void Finish();

 private:
  int64_t total_;
  int64_t first_;
  bool terminal_;
  bool bar_shown_ = false;
  std::chrono::steady_clock::time_point start_;
};

// "1:02:03", "4:05" or "7s".
std::string FormatDuration(double seconds);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_PROGRESS_BAR_H_
