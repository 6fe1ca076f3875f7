#include "conveyor/cli/progress_bar.h"

#include <cstdio>

namespace conveyor {

std::string FormatDuration(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  char text[32];
  if (s >= 3600) {
    std::snprintf(text, sizeof text, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  } else if (s >= 60) {
    std::snprintf(text, sizeof text, "%ld:%02ld", s / 60, s % 60);
  } else {
    std::snprintf(text, sizeof text, "%lds", s);
  }
  return text;
}

ProgressBar::ProgressBar(int64_t total, int64_t first, bool terminal)
    : total_(total), first_(first), terminal_(terminal), start_(std::chrono::steady_clock::now()) {}

void ProgressBar::Step(int64_t step, double loss, double lr, double tokens_per_s) {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double done = static_cast<double>(step - first_);
  const double eta = done > 0 ? elapsed / done * static_cast<double>(total_ - step) : 0;
  if (terminal_) {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * step / std::max<int64_t>(total_, 1));
    std::printf("\r[%s%s] %lld/%lld loss %.4f %.0f tok/s ETA %s   ",
                std::string(filled, '#').c_str(), std::string(kWidth - filled, '.').c_str(),
                static_cast<long long>(step), static_cast<long long>(total_), loss, tokens_per_s,
                FormatDuration(eta).c_str());
    std::fflush(stdout);
    bar_shown_ = true;
    return;
  }
  const int64_t every = std::max<int64_t>(1, total_ / 20);
  if (step % every != 0 && step != total_ && step != first_ + 1) return;
  std::printf("step %lld/%lld  loss %.4f  lr %.2e  %.0f tok/s  eta %s\n",
              static_cast<long long>(step), static_cast<long long>(total_), loss, lr, tokens_per_s,
              FormatDuration(eta).c_str());
  std::fflush(stdout);
}

void ProgressBar::Note(const std::string& line) {
  if (bar_shown_) std::printf("\n");
  bar_shown_ = false;
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

void ProgressBar::Finish() {
  if (bar_shown_) std::printf("\n");
  bar_shown_ = false;
  std::fflush(stdout);
}

}  // namespace conveyor
