#include "timing_options.hpp"

namespace cudal1::cli {

void add_timing_options(CLI::App& command, TimingArguments& args) {
  command
      .add_option("--timing-mode", args.mode,
                  "auto: on a GPU, the device time of the work a call queues (launch overhead "
                  "hidden) when both sides can be queued, else window; window: events around "
                  "the call and a device-wide synchronize (host time included)")
      ->check(CLI::IsMember({"auto", "window"}))
      ->capture_default_str();
  command
      .add_option("--timing-rounds", args.rounds,
                  "time in this many fresh pairs of worker processes, sharing the time budget, "
                  "and join them (a process's device time has an offset of its own)")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
}

void apply_timing_options(const TimingArguments& args, TimingConfig& config) {
  config.mode = args.mode;
  config.rounds = args.rounds;
}

}  // namespace cudal1::cli
