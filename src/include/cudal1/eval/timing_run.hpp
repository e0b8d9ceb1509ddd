// One timing run (measure_speedup) as its phases, each a member that run() calls in order:
//   prepare_pools(); warm_up(); sample(); final_checks(); summarise();
// The phases talk to the workers through a TimingLink, so that tests can stand in for them; the
// rules they follow are in timing_rules.hpp and the checks that flag the candidate in
// defenses.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cudal1/eval/gpu_clock.hpp"
#include "cudal1/eval/timing.hpp"
#include "cudal1/eval/timing_rules.hpp"
#include "cudal1/eval/worker_client.hpp"

namespace cudal1 {

// What timing asks of the two workers: measure_speedup's are two worker processes.
class TimingLink {
 public:
  virtual ~TimingLink() = default;
  // One side's request; the worker's error is thrown as a SideFailure for that side.
  virtual wire::Message call(Side side, const nlohmann::json& request,
                             Clock::time_point deadline) = 0;
  // The same request to both at once: {candidate's reply, reference's} (as call_both).
  virtual std::pair<wire::Message, wire::Message> call_both(const nlohmann::json& request,
                                                            Clock::time_point deadline) = 0;
};

// How both sides are being timed, and why not queued when not.
struct ClockChoice {
  std::string mode = "window";  // "queued" or "window"
  std::string reason;           // why the window clock, when "auto" asked for queued
  double hold_timeout_ms = 0;   // queued only
  bool traced = false;          // both workers record CUPTI activity (kernel times)
  // On the window clock because a call missed the hold (not queued within its time-out), not
  // because a side cannot be queued: by chance on a loaded host (details "missed_hold").
  bool missed_hold = false;
};

// One side's view of the protocol: its worker, its input-set cursor and what it measured.
struct TimingSide {
  TimingSide(TimingLink& l, Side s) : link(&l), side(s) {}

  TimingLink* link;
  Side side;
  std::size_t next_set = 0;
  std::vector<double> overhead_ms;  // orchestrator round trip minus the timed window
  // Per request: the round trip minus the worker's own time (pipe, scheduling, parsing).
  std::vector<double> request_ms;
  // Per batch and step of the worker's (steps_s): milliseconds per sample.
  std::map<std::string, std::vector<double>> step_ms;
  // What a sample adds to a request's round trip, from the last request of more than one
  // sample (the queued clock's probes are the first); 0 until then, and requests take one pair.
  double batch_sample_s = 0;
  std::vector<std::string> own_kernels;
  // Per kept sample: the host's time, and (when both sides were traced) kernel time and count.
  std::vector<double> kept_host_ms, kept_kernel_ms, kept_kernels;

  struct Sample {
    double ms;
    double host_ms;
    std::string mode;  // the clock the worker used
    bool held;         // queued: the whole call was queued while the hold ran
    std::string queued_unavailable;
    std::optional<double> kernel_ms;
    double kernels;
    std::optional<unsigned> clock_mhz;
  };

  // What one request for several samples returned: the samples in order, and the whole reply
  // when it carries a spot check's outputs.
  struct Batch {
    std::vector<Sample> samples;
    std::size_t first_set = 0;  // the pool index (counting on, not wrapped) of the first sample
    std::optional<wire::Message> checked;
    double outputs_s = 0;  // the worker's time for the check's outputs
  };

  // Samples in one request, each on the next input set and traced as `traced` says, each taken
  // as a single one would be; the outputs of sample `check` (when given) return for a spot check.
  // `unseen`: one sample on that unseen input set instead.
  Batch take_batch(const TimingConfig& config, const ClockChoice& clock_choice,
                   Clock::time_point hard_deadline, const GpuClock* clock,
                   const std::vector<bool>& traced, std::optional<std::size_t> check,
                   std::uint64_t check_seed, std::optional<std::size_t> unseen = std::nullopt);
  void note_request(const nlohmann::json& header, double round_trip_ms);
  static Sample parse(const nlohmann::json& h, std::optional<unsigned> clock_mhz);

  void keep_host(const Sample& sample) { kept_host_ms.push_back(sample.host_ms); }
  void keep_kernels(const Sample& sample) {
    kept_kernel_ms.push_back(*sample.kernel_ms);
    kept_kernels.push_back(sample.kernels);
  }
  void forget_kept() {
    kept_host_ms.clear();
    kept_kernel_ms.clear();
    kept_kernels.clear();
  }

  // The worker's CUPTI summary of its timed windows: what ran outside them, on which streams,
  // and whose kernels; null when the worker keeps no trace.
  nlohmann::json activity(Clock::time_point deadline);
  const char* name() const { return side == Side::kReference ? "reference" : "candidate"; }
};

// Why a call probed on the queued clock does not allow it; "" when it was queued in full.
std::string queued_refusal(const TimingSide& side, const TimingSide::Sample& sample,
                           const ClockChoice& queued);

class TimingRun {
 public:
  TimingRun(TimingLink& workers, const TimingConfig& config, std::uint64_t input_seed,
            std::uint64_t schedule_seed, const GpuClock* clock, TimingProgressCallback progress,
            SpotCheck spot_check);

  // Every phase in order; throws as measure_speedup does.
  TimingOutcome run();

  // The phases (public so that tests can take them one at a time, in this order).
  // Both workers make their pools of input sets; the kInputs defenses compare them.
  void prepare_pools();
  // Warm-up on the window clock, then (mode "auto") probes of the queued clock.
  void warm_up();
  // Pairs in batches, in random order, until the noise criterion decides or the budget ends.
  void sample();
  // A spot-checked pair after the last, then the kSampled defenses (the unseen inputs).
  void final_checks();
  // Medians, the interval and the details; the workers' traces and the kActivity defenses.
  void summarise();

  const TimingOutcome& outcome() const { return out_; }
  TimingOutcome take_outcome() { return std::move(out_); }
  const ClockChoice& clock_choice() const { return clock_choice_; }
  std::size_t pool_sets() const { return pool_; }
  std::size_t unseen_sets() const { return unseen_; }

 private:
  class ExtraPairs;
  // The queued clock's probes after warm-up (calls counts them); its reason says why not.
  ClockChoice probe_queued_clock(bool traceable, double slowest_host_ms, Clock::time_point deadline,
                                 std::size_t& calls);
  // The samples of a batch in the order of the pairs, after they came back.
  bool add_pair(const TimingSide::Sample& ref_sample, const TimingSide::Sample& cand_sample,
                bool traced_pair, std::size_t set);
  // The queued clock failed for a pair: sampling starts over on the window clock.
  void restart_on_window_clock(const TimingSide::Sample& ref_sample);
  void take_sampling_batch();
  void spot_check(const wire::Message& reference, const wire::Message& candidate,
                  const std::string& where);
  void summarise_samples();
  void summarise_workers();
  void read_activity(Clock::time_point deadline);
  Clock::time_point after_budget() const;

  TimingLink& workers_;
  const TimingConfig& config_;
  std::uint64_t input_seed_;
  std::uint64_t schedule_seed_;
  const GpuClock* clock_;
  TimingProgressCallback progress_;
  SpotCheck spot_check_;

  TimingOutcome out_;
  TimingSide ref_, cand_;
  Clock::time_point setup_deadline_;
  // Pools: streams each side's calls take in turn, input sets per side, unseen sets both have
  // (kept as bytes, out of the garbage collector's lists when `hidden_`).
  std::size_t streams_ = 1, pool_ = 0, unseen_ = 0;
  bool hidden_ = true;
  ClockChoice clock_choice_;

  std::mt19937_64 schedule_;
  std::optional<SamplingBudget> budget_;
  SamplingStop stop_;
  SpotCheckSchedule spots_;
  TracedPairSchedule traced_;
  std::vector<unsigned> clocks_;
  std::vector<double> all_reference_ms_, all_candidate_ms_;  // throttled pairs included
  // Per pair of those and of the kept ones: the first call of its pool set in timing.
  std::vector<bool> all_first_use_, kept_first_use_;
  std::size_t pair_index_ = 0, spot_checks_ = 0, traced_pairs_ = 0, batches_ = 0;
  std::size_t unqueued_pairs_ = 0;
  std::vector<double> traced_reference_ms_, traced_candidate_ms_;  // what the trace costs
  double sampling_s_ = 0;
};

}  // namespace cudal1
