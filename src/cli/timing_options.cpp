#include "timing_options.hpp"

#include <algorithm>

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
      .add_option(
          "--timing-rounds", args.rounds,
          "auto: on a GPU, one round in the pair of worker processes that ran the trials, "
          "then more in fresh pairs while the interval for what a rerun would measure is "
          "wider than --rerun-target (at most 6, within the time budget); N: exactly N rounds "
          "(1 to 16), each in a fresh pair, sharing the time budget. A process's device "
          "time has an offset of its own, which rounds average")
      ->check([](const std::string& value) -> std::string {
        if (value == "auto") return "";
        if (!value.empty() && value.size() <= 2 &&
            std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
          const int n = std::stoi(value);
          if (n >= 1 && n <= 16) return "";
        }
        return "--timing-rounds takes auto or a count from 1 to 16, not '" + value + "'";
      })
      ->capture_default_str();
  command
      .add_option("--rerun-target", args.rerun_target,
                  "with --timing-rounds auto: the interval's relative half-width at which rounds "
                  "stop (0.03: a rerun within about 3 %); wider takes fewer rounds, each a fresh "
                  "pair of worker processes with their CUDA contexts, and the interval stays what "
                  "a rerun would measure")
      ->check(CLI::Range(0.005, 0.5))
      ->capture_default_str();
  command
      .add_option("--timing-streams", args.streams,
                  "on a GPU, each side's timed calls run on the next of this many streams in "
                  "turn (1: the current stream); a call's device time depends on the stream it "
                  "runs on, and in turn each process carries the average")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  command
      .add_option("--cuda-connections", args.cuda_connections,
                  "on a GPU, the hardware work queues of each worker's CUDA context, both sides "
                  "alike (CUDA_DEVICE_MAX_CONNECTIONS; 0: the driver's default, 8, or the "
                  "environment's). 1 makes contexts several times cheaper to create while "
                  "other workers hold theirs; a candidate's streams then share one queue, so "
                  "one relying on streams running side by side can only measure slower")
      ->check(CLI::Range(0, 32))
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

std::size_t timing_rounds_count(const std::string& rounds) {
  return rounds == "auto" ? 0 : static_cast<std::size_t>(std::stoul(rounds));
}

void apply_timing_options(const TimingArguments& args, TimingConfig& config) {
  config.mode = args.mode;
  config.rounds = timing_rounds_count(args.rounds);
  config.calibration = args.calibration;
  config.streams = args.streams;
  config.auto_rounds.rerun_target = args.rerun_target;
  config.cuda_connections = args.cuda_connections;
}

}  // namespace cudal1::cli
