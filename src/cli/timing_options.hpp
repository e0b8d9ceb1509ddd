// How GPU calls are timed: --timing-mode and --timing-rounds, shared by eval, bench and optimize
// (docs/evaluation.md, "Two clocks on a GPU" and "Timing rounds").
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>

#include "cudal1/eval/timing.hpp"

namespace cudal1::cli {

struct TimingArguments {
  std::string mode = "auto";
  std::size_t rounds = 1;
};

void add_timing_options(CLI::App& command, TimingArguments& args);

// Copies the options into a timing configuration.
void apply_timing_options(const TimingArguments& args, TimingConfig& config);

}  // namespace cudal1::cli
