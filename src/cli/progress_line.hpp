// A status line on stderr: rewritten in place on a terminal; on a pipe or file, a plain line at
// most every `interval` seconds so logs show progress without flooding.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <string>

namespace cudal1::cli {

// "42s", "3m07s", "1h05m": elapsed times and estimates on progress lines.
inline std::string format_duration(double seconds) {
  const auto total = static_cast<long>(seconds + 0.5);
  if (total >= 3600) return fmt::format("{}h{:02}m", total / 3600, total % 3600 / 60);
  if (total >= 60) return fmt::format("{}m{:02}s", total / 60, total % 60);
  return fmt::format("{}s", total);
}

class ProgressLine {
 public:
  explicit ProgressLine(bool enabled, double interval_s = 10.0)
      : enabled_(enabled), terminal_(::isatty(2) != 0), interval_(interval_s) {}

  void show(const std::string& text) {
    if (!enabled_ || text == last_) return;
    last_ = text;
    if (terminal_) {
      std::cerr << "\r\033[K" << text << std::flush;
      shown_ = true;
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (std::chrono::duration<double>(now - printed_).count() < interval_) return;
    printed_ = now;
    std::cerr << text << std::endl;
  }

  void clear() {
    if (shown_) std::cerr << "\r\033[K" << std::flush;
    shown_ = false;
  }

 private:
  bool enabled_;
  bool terminal_;
  double interval_;
  bool shown_ = false;
  std::string last_;
  std::chrono::steady_clock::time_point printed_{};
};

}  // namespace cudal1::cli
