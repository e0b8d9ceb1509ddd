// How GPU calls are timed: --timing-mode, --timing-rounds, --rerun-target, --calibration,
// --timing-streams and --cuda-connections,
// shared by eval, bench and optimize (docs/evaluation.md, "Two clocks on a GPU", "Timing rounds",
// "Calibration", "Streams in turn"); and the short form of --tolerance that the commands other
// than eval and bench share.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>

#include "cudal1/eval/timing.hpp"

namespace cudal1::cli {

struct TimingArguments {
  std::string mode = "auto";
  std::string rounds = "auto";  // or a count, 1 to 16
  std::string calibration = "off";
  std::size_t streams = 1;
  double rerun_target = RoundsPolicy{}.rerun_target;  // --rerun-target, for --timing-rounds auto
  std::size_t cuda_connections = TimingConfig{}.cuda_connections;
};

void add_timing_options(CLI::App& command, TimingArguments& args);

// --timing-rounds as TimingConfig::rounds: 0 for auto.
std::size_t timing_rounds_count(const std::string& rounds);

// Copies the options into a timing configuration.
void apply_timing_options(const TimingArguments& args, TimingConfig& config);

// --tolerance with the presets' names; `like` says whose tolerance it means.
inline CLI::Option* add_tolerance_option(CLI::App& command, std::string& tolerance,
                                         const std::string& like = "as cudal1 eval") {
  return command.add_option("--tolerance", tolerance,
                            "strict, loose, kernelbench or ATOL,RTOL (" + like + ")");
}

}  // namespace cudal1::cli
