// The timing protocol (design.md, "Measurement protocol"): fresh pre-generated input sets,
// warm-up, reference and candidate samples interleaved in random order, throttled samples
// discarded, sampling until the speedup's relative noise is under target or the budget ends.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cudal1/eval/bucket_check.hpp"
#include "cudal1/eval/defenses.hpp"
#include "cudal1/eval/findings.hpp"
#include "cudal1/eval/gpu_clock.hpp"
#include "cudal1/eval/statistics.hpp"
#include "cudal1/eval/stopping_rule.hpp"
#include "cudal1/eval/worker_client.hpp"

namespace cudal1 {

// What a process's offset is expected to be before rounds have measured it (log scale, as a
// standard deviation of the speedup between fresh pairs of processes; docs/evaluation.md,
// "Intervals that cover a rerun"). Each side of a call queued on the device moves by about
// per_kernel_us per kernel it runs, from one process to the next; a call on the window clock (host
// time in) or on a CPU by `window` of its time; and a call whose library picks its kernels or
// precision per process (cuDNN, a precision downcast) by `per_process_choice` more. `run` is
// what two evaluations differ by beyond their processes (the machine's state when each ran): no
// number of rounds averages it. Fitted on two runs of CUDA-L1's 40-task sample on an H100
// (bench/results/2026-11-26-rerun-intervals.md).
struct OffsetPrior {
  double per_kernel_us = 0.08;
  double floor = 0.004;
  double window = 0.02;
  double per_process_choice = 0.015;
  double run = 0.005;
  // How many rounds' worth of evidence the prior counts for next to the rounds' own spread.
  double weight = 2;
};

// --timing-rounds auto: after each round, more fresh pairs of processes while the interval for
// what a rerun would measure is wider than rerun_target (relative half-width), up to max_rounds
// and the time budget. The first round samples for at most first_share of the budget when more
// may follow; later rounds warm up for at most later_warmup_s and sample for at least
// later_min_time_s, at most later_budget_s: their processes are new, but it is the offset
// between processes, not the samples within one, that they are there to average.
struct RoundsPolicy {
  std::size_t max_rounds = 6;
  double rerun_target = 0.03;
  double first_share = 0.25;
  double later_warmup_s = 0.1;
  double later_min_time_s = 0.1;
  double later_budget_s = 0.3;
  OffsetPrior prior;
};

struct TimingConfig {
  // Seconds of sampling after warm-up; when it runs out first the result is flagged noisy.
  double budget_s = 30;
  NoiseCriterion::Params noise;
  // Input sets generated before timing; each sample takes the next (new addresses, new values).
  std::size_t pool_size = 16;
  // Memory the pool may take per worker; fewer (but at least 2) sets when inputs are large.
  std::uint64_t max_pool_bytes = std::uint64_t{2} << 30;
  // Warm-up: at least this many calls and this much time per side, so lazy initialisation,
  // autotuning and clock ramp-up happen before the first sample that counts.
  std::size_t min_warmup_calls = 3;
  double min_warmup_s = 0.1;
  // ... or, for calls of microseconds, until this much wall time has passed: 0.1 s of device
  // time would take tens of thousands of calls, mostly the round trip to the worker. The same
  // processes ran the correctness trials just before, so lazy initialisation, autotuning and
  // extension loading are behind them; what is left to warm is the clock and the caches
  // (docs/evaluation.md, "Defaults").
  double max_warmup_wall_s = 0.25;
  // Warm-up calls taken before the run under the shared hold (prewarm_timing): the input sets
  // they took (the run's samples go on from the next set, so a set's first use in timing stays
  // its first use), and the cap then on the warm-up inside the exclusive hold, in wall and in
  // device time per side: what is left to warm there is the clock after the hand-over.
  std::size_t prewarmed_sets = 0;
  double exclusive_warmup_s = 0.02;
  // Timed pairs per request to the workers: one at a time through warm-up, then each side takes
  // up to max_batch samples back to back in one request (about batch_s of sampling at the rate
  // of the last request of several, the queued clock's probes first; never past the next noise
  // check), its activity trace read once per request. A request per sample cost milliseconds of
  // round trips and trace flushes for calls of microseconds (docs/evaluation.md, "The timing
  // protocol"); 1 takes every pair alone.
  std::size_t max_batch = 64;
  double batch_s = 0.02;
  // Longest single call before the worker is considered hung.
  double call_timeout_s = 60;
  // A sample taken while the SM clock was under this fraction of its reference is discarded.
  double clock_floor = 0.75;
  // Bootstrap resamples while deciding to stop, and for the reported interval.
  int check_resamples = 400;
  int final_resamples = 2000;
  // About every this many pairs (random gaps), and once more after the last, both sides return
  // their outputs for the same input set and they are compared: a candidate correct in the
  // trials but reusing results while timed is caught (0: no spot checks).
  std::size_t spot_check_every = 8;
  // Where outputs are large, checks are spaced out so that they take about this share of the
  // sampling time at most (a 32 MB output costs 0.1 to 0.3 s per check).
  double spot_check_share = 0.25;
  // Elements of each output a spot check compares, at random positions drawn after the call (the
  // same on both sides); outputs this small or smaller are compared whole (0: always whole). The
  // correctness trials always compare every element.
  std::size_t spot_check_elements = 65536;
  // After sampling, this many more pairs, each on an input set made for that one call (values
  // neither side has seen), their outputs spot-checked: a candidate whose speedup on them falls
  // under 1/unseen_limit of its speedup on the reused pool keeps results by input content (a
  // cache that a physics floor misses where the call is compute-bound), and is flagged
  // cached_output. Where the first pairs trip the limit, as many again are taken and the limit
  // is applied to all of them (a burst of load on a CPU). Needs spot checks; 0: none.
  std::size_t unseen_pairs = 4;
  double unseen_limit = 1.5;
  // Names of the kernels the candidate defines itself; the trace says whether one ran.
  std::vector<std::string> own_kernels;
  // How a GPU call is timed (docs/evaluation.md, "Two clocks"):
  //  "auto": queued behind a hold kernel (the device time of the work the call queues, on every
  //          stream; launch overhead hidden) when both sides' calls can be queued, else "window";
  //  "window": CUDA events around the call and a device-wide synchronisation (host time in).
  std::string mode = "auto";
  // The hold waits this many times the slowest warm-up call's host time, within the bounds, for
  // the call to be queued; a call that waits for the device meanwhile cannot be queued.
  double hold_timeout_factor = 10;
  double hold_timeout_min_ms = 50;
  double hold_timeout_max_ms = 500;
  // Queued warm-up calls per side that must all be held before the queued clock is used.
  std::size_t queued_probe_calls = 3;
  // A host thread descheduled for longer than the hold's time-out (a loaded machine) leaves one
  // call unqueued by chance: up to this many pairs with an unqueued call are dropped (and the
  // probes tried once more) before timing falls back to the window clock. Few enough that a
  // candidate making its slow calls unqueueable on purpose cannot move the median.
  std::size_t max_unqueued_pairs = 2;
  // Timing rounds, each in a fresh pair of worker processes with its own warm-up and a share of
  // the budget (the evaluation restarts the workers; combine_rounds joins the rounds). A
  // process's device time carries an offset of its own (gaps between kernels differ by process),
  // which no number of samples in one process averages out; rounds do. 0 ("auto"): one round,
  // then more while the interval for a rerun is wider than the policy's target (RoundsPolicy).
  std::size_t rounds = 0;
  RoundsPolicy auto_rounds;
  // Each worker process carries an offset of its own, which the speedup of two processes
  // carries twice. "auto": on a GPU, with one round, when a warm call of the task's model takes
  // under calibrate_below_ms, the candidate's worker first times the task's own model against
  // the reference's worker, before any candidate code runs in it; the speedup is divided by
  // that ratio (docs/evaluation.md, "Calibration"). "on": with one round, on any device,
  // whatever the call's time. "off" (the default: it costs exclusive device time, measured
  // in bench/results/2026-11-24-reward-cost.md): never.
  std::string calibration = "off";
  double calibrate_below_ms = 0.5;
  // On a GPU, each side's sampled calls run on the next of this many streams of the worker's
  // own, in turn (1: the current stream, as in the trials). Within one process a call's device
  // time depends on the stream it runs on; over several, each process carries the average
  // (docs/evaluation.md, "Streams in turn"). Caching allocators keep memory per stream: outputs
  // take up to this many times their memory.
  std::size_t streams = 1;
  // CUDA_DEVICE_MAX_CONNECTIONS of every GPU worker, both sides alike: the hardware work queues
  // (channels) of its context; 0 leaves the driver's default (8) or the caller's environment.
  // One makes a context about 1.5x cheaper to create on an idle GPU and 4x cheaper beside 48
  // live ones (each live context's channels cost every new one; docs/evaluation.md, "What live
  // contexts cost"). With one, a process's streams share one queue: work on different streams
  // may still overlap, but can wait behind another stream's, so a candidate that relies on
  // streams running side by side can only measure slower, never faster.
  std::size_t cuda_connections = 1;
};

// Compares a candidate's sample outputs with the reference's (defenses.hpp's OutputCheck).
using SpotCheck = OutputCheck;

struct TimingOutcome {
  std::vector<double> reference_ms;  // kept samples, in the order taken (all rounds')
  std::vector<double> candidate_ms;
  // The times the speedup is the ratio of: the medians of one round, the geometric means of the
  // rounds' medians over several.
  double reference_median_ms = 0;
  double candidate_median_ms = 0;
  double speedup = 0;
  Interval ci;
  double relative_noise = 0;
  std::optional<BucketCheck> buckets;
  bool converged = false;
  std::size_t discarded = 0;
  nlohmann::json details;  // summaries, clocks, overheads, device activity
  Findings findings;       // cached_output, tampering, background_work, extra_streams, ...
};

using TimingProgressCallback = std::function<void(const TimingProgress&, double speedup)>;

// The mean number of pairs between spot checks: `every`, or more when a check (check_s, its
// pair included) is slow next to a plain pair, so that checks take at most `share` of the time.
std::size_t spot_check_mean_gap(double check_s, double plain_pair_s, std::size_t every,
                                double share);

// The candidate's speedup on input values it had not seen before, next to its speedup on input
// sets timing had called before (where a cache keyed on values hits). Each group is pairs (the
// reference's and the candidate's call, taken together); `speedup` and `seen_speedup` are
// their ratios of medians. `inflation` is how much faster the candidate is, next to the
// reference, on seen sets than on unseen values: the Hodges-Lehmann shift between the two
// groups' log pair ratios (about 1 for a candidate whose calls do the work; the size of the gain
// for one that keeps results by input content), and `inflation_low` the low end of its
// distribution-free interval (Mann-Whitney, z standard errors: 2.576 for 99 %, 1.96 for 95 %).
// `tripped` when inflation_low is over `limit`:
// a pair ratio cancels load that both calls of a pair share, and ranks do not let a burst on a
// few pairs move the result. Fewer than min_seen seen pairs never trip (a cache gained little).
struct UnseenComparison {
  double speedup = 0;  // on unseen values
  double seen_speedup = 0;
  double inflation = 0;
  double inflation_low = 0;
  bool tripped = false;
};
UnseenComparison compare_unseen(const std::vector<double>& seen_reference_ms,
                                const std::vector<double>& seen_candidate_ms,
                                const std::vector<double>& unseen_reference_ms,
                                const std::vector<double>& unseen_candidate_ms, double limit,
                                std::size_t min_seen = 5, double z = 2.576);

// When the unseen-input check has looked enough (the stopping rule of its second look). The
// second look decides: as many new unseen sets, their pairs among four times as many pool pairs in
// random order, in one stretch of time. A first look over the limit at 99 % (`strong`) is
// strong evidence that load drift between sampling and the unseen pairs may still explain; the
// second look confirms it when its own 95 % interval excludes no gain (inflation_low over 1) and
// its point is over the limit. A first look that was only not decisive needs the second look
// over the limit on its own. Not decided: look again with as many more sets, kMaxLooks at most.
// A first look under the limit, looked at again only because the reference's load changed, is
// no evidence at all: a second look that trips must keep tripping with the pairs of one more
// look (on a loaded 2-core VM, a burst on four pairs had an honest candidate at inflation 3.47,
// inflation_low 2.34, the reference 3x faster on its unseen calls than on any other).
class UnseenLookRule {
 public:
  static constexpr std::size_t kMaxLooks = 3;
  UnseenLookRule(const UnseenComparison& first_look, double limit)
      : strong_first_(first_look.tripped),
        load_only_(!first_look.tripped && first_look.inflation <= limit),
        limit_(limit) {}
  bool confirmed(const UnseenComparison& second_look) const {
    return strong_first_ && second_look.inflation > limit_ && second_look.inflation_low > 1.0;
  }
  // After a strong first look, a few unseen pairs under the limit do not clear it (a burst of
  // load on the reference's 4 calls did): all looks are taken.
  bool decided(const UnseenComparison& second_look) const {
    return second_look.tripped || confirmed(second_look) ||
           (!strong_first_ && second_look.inflation <= limit_);
  }
  // After `looks` looks, the last of whose sets were made alike on both sides (`alike`).
  bool look_again(std::size_t looks, bool alike, const UnseenComparison& second_look) const {
    if (!alike || looks >= kMaxLooks) return false;
    if (load_only_ && looks < 2 && second_look.tripped) return true;
    return !decided(second_look);
  }

 private:
  bool strong_first_;
  bool load_only_;  // the first look was under the limit: only the load's change led here
  double limit_;
};

// The request that makes each worker's pool of timing inputs from `input_seed`. A worker keeps
// the pool of the last seed it was asked for, so the same request sent before the timing phase
// (under a shared hold: it is not timed) makes measure_speedup's own one return at once.
nlohmann::json prepare_timing_request(const TimingConfig& config, std::uint64_t input_seed);

class DeviceHolds;

// The warm-up of a timing run taken before it, under `holds` (the trials' kind of hold: other
// evaluations may use the device meanwhile), both sides at once: pairs on the run's input sets
// on the window clock, traced, until the warm-up rule of `config` is met. What is left to warm
// once the device is held alone is the clock (TimingConfig::exclusive_warmup_s). Throws as
// measure_speedup does.
struct Prewarm {
  std::size_t sets = 0;      // input sets taken: TimingConfig::prewarmed_sets
  std::size_t requests = 0;  // requests to both workers (each under its own shared hold)
  double seconds = 0;
};
Prewarm prewarm_timing(WorkerClient& reference, WorkerClient& candidate, const TimingConfig& config,
                       DeviceHolds& holds, Clock::time_point deadline);

// Throws SideFailure when a worker reports an error during a sample, WorkerFailure when one
// hangs or dies.
TimingOutcome measure_speedup(WorkerClient& reference, WorkerClient& candidate,
                              const TimingConfig& config, std::uint64_t input_seed,
                              std::uint64_t schedule_seed, const GpuClock* clock,
                              const TimingProgressCallback& progress,
                              const SpotCheck& spot_check = {});

// Several rounds (measure_speedup in fresh worker processes) as one outcome: the speedup is the
// geometric mean of the rounds' speedups, its interval a two-level bootstrap (rounds, then
// samples); noisy unless the joint relative noise is under `max_noise` and every round took the
// stopping rule's minimum of pairs (details["short_round"] names the first that did not).
// details["rounds"] lists each round; findings are the union. When some rounds ended on the window
// clock, only those are joined (details["rounds_dropped"]). One round is returned as it is.
TimingOutcome combine_rounds(std::vector<TimingOutcome> rounds, double max_noise, int resamples,
                             std::uint64_t seed);

// The interval for what a fresh evaluation of the same candidate would measure, from the rounds
// taken so far (docs/evaluation.md, "Intervals that cover a rerun"). Each round k gives a log
// speedup y_k with a sampling deviation w_k (from its own bootstrap interval). The deviation
// between processes, tau, pools the prior's (prior_sd, worth prior.weight rounds) with what
// the rounds' spread shows beyond their sampling noise; the mean of K rounds then has variance
// (tau^2 + mean w^2) / K + prior.run^2, and a rerun's mean as much again: the interval is the
// mean +- 1.96 times the square root of twice that.
struct RerunInterval {
  double speedup = 0;  // the geometric mean of the rounds' speedups
  Interval ci;
  double half_width = 0;  // relative: (high - low) / (2 speedup)
  double prior_sd = 0;    // log scale
  double between_sd = 0;  // tau
  double within_sd = 0;   // root mean square of the rounds' w_k
  std::size_t rounds = 0;
  nlohmann::json to_json() const;
};

// The prior's deviation for one round's measurement: kernels per call and times from its
// activity trace, its clock, and whether a library chooses per process (per_process_choice:
// the candidate downcasts precision, or cuDNN kernels ran on either side).
double prior_offset_sd(const TimingOutcome& round, const OffsetPrior& prior,
                       bool per_process_choice);

// Whether either side ran cuDNN kernels in a round (cuDNN may pick another kernel per process).
bool runs_library_chosen_kernels(const TimingOutcome& round);

RerunInterval rerun_interval(const std::vector<TimingOutcome>& rounds, const OffsetPrior& prior,
                             bool per_process_choice);

// A round whose speedup lies far from all the others' (a pair of processes disturbed once: on
// the 40-task sample, one round of six at 2.16x where the other five gave 3.23x to 3.47x): with
// at least kMinRoundsForOutlier rounds, and unless the speed is a per-process choice (then a
// far round is the candidate's own behaviour), the round farthest from the median of the log
// speedups when it is more than kOutlierFactor times the larger of a round's expected deviation
// (the prior's offset and its sampling deviation, as rerun_interval has them) and the other
// rounds' robust spread (1.4826 times their median absolute deviation). Its index, or none.
inline constexpr std::size_t kMinRoundsForOutlier = 5;
inline constexpr double kOutlierFactor = 5;
std::optional<std::size_t> outlying_round(const std::vector<TimingOutcome>& rounds,
                                          const OffsetPrior& prior, bool per_process_choice);

// A round on the window clock only because a call missed the hold (details "missed_hold": not
// queued within the hold's time-out, in the probes or in sampling), not because a side cannot be
// queued. On a loaded host a worker's thread can be descheduled for longer than the time-out:
// on the 40-task sample, a trusted reference's call of 0.1 ms host time missed a 50 ms hold.
bool missed_the_hold(const TimingOutcome& round);

// Whether the rounds that missed the hold are taken for chance: every window-clock round of
// `rounds` missed it and at most kMaxMissedRounds did. Then later rounds try the queued clock
// again, and once some round was queued those that missed are left out of the speedup and the
// interval (their findings still count). More misses say the host or a side keeps missing it:
// the rounds are joined on the window clock, as rounds that chose it are.
inline constexpr std::size_t kMaxMissedRounds = 1;
bool missed_rounds_by_chance(const std::vector<TimingOutcome>& rounds);

// The rounds to leave out for missing the hold: every window-clock round when they missed it by
// chance and some round was queued; none otherwise. Indices, ascending.
std::vector<std::size_t> missed_rounds_replaced(const std::vector<TimingOutcome>& rounds);
// What timing.rerun.missed_hold_left_out says of the round at `index` (0-based): {"round" (from
// 1), "speedup", "mode_reason"}.
nlohmann::json missed_round_record(std::size_t index, const TimingOutcome& round);

// How many more rounds `policy` asks for after `done` rounds with this interval: 0 when its half
// width is within the target or max_rounds are done, else about as many as would bring it there
// (the half width falls as one over the square root of the rounds), at least one.
std::size_t more_rounds_wanted(const RerunInterval& interval, std::size_t done,
                               const RoundsPolicy& policy);

// How many pairs of workers for the later rounds to start and load ahead, before the device is
// taken, so that switching rounds costs no process start: all `rounds - 1` when `pair_bytes`
// (what one pair holds) fits `free_bytes` with half of it to spare, fewer when not; the rest
// restart between rounds. `pair_bytes` 0 (unknown) stages nothing.
std::size_t pairs_to_stage(std::size_t rounds, double free_bytes, double pair_bytes);

}  // namespace cudal1
