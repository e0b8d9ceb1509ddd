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
  command
      .add_option("--timing-streams", args.streams,
                  "on a GPU, each side's timed calls run on the next of this many streams in "
                  "turn (1: the current stream); a call's device time depends on the stream it "
                  "runs on, and in turn each process carries the average")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  command
      .add_option("--calibration", args.calibration,
                  "auto: on a GPU, for calls under 0.5 ms and one timing round, the candidate's "
                  "worker first times the task's own model against the reference's worker, "
                  "before any candidate code runs in it, and the speedup is corrected by that "
                  "ratio (each process's device time has an offset of its own); on: with one "
                  "timing round, on any device and for any call; off: never (it costs about a "
                  "second of exclusive device time per calibrated candidate)")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
}

void apply_timing_options(const TimingArguments& args, TimingConfig& config) {
  config.mode = args.mode;
  config.rounds = args.rounds;
  config.calibration = args.calibration;
  config.streams = args.streams;
}

}  // namespace cudal1::cli
