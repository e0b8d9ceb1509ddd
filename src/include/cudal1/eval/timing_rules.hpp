// The rules the timing phases follow (TimingRun, timing_run.hpp): when warm-up ends, when
// sampling stops, how many pairs a request takes, and which pairs are spot-checked or traced.
// Plain classes of numbers: what they decide can be tested without a worker.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "cudal1/eval/stopping_rule.hpp"
#include "cudal1/eval/timing.hpp"

namespace cudal1 {

// Warm-up goes on until both sides had min_warmup_calls calls (and one per stream) and
// min_warmup_s of timed calls each, or, past the calls, until its wall-time cap: max_warmup_wall_s,
// at most a quarter of the budget (a slow model still leaves time for real samples).
class WarmupRule {
 public:
  WarmupRule(const TimingConfig& config, std::size_t streams);
  bool more(std::size_t calls, double reference_ms, double candidate_ms, double elapsed_s) const;
  std::size_t min_calls() const { return min_calls_; }
  double wall_cap_s() const { return wall_cap_s_; }

 private:
  std::size_t min_calls_;
  double min_ms_;
  double wall_cap_s_;
};

// The hold's time-out on the queued clock: hold_timeout_factor times the slowest warm call's
// host time, within the configured bounds.
double hold_timeout_ms(const TimingConfig& config, double slowest_host_ms);

// Sampling stops when the noise criterion decides: it is asked at min_samples kept pairs, then
// after every max(5, a tenth more) kept pairs, about a bootstrap interval of the pairs so far.
class SamplingStop {
 public:
  explicit SamplingStop(const TimingConfig& config);
  // Kept pairs until the criterion is asked again; nullopt when it is due already.
  std::optional<std::size_t> pairs_until_check(std::size_t kept) const;
  bool due(std::size_t kept) const { return kept >= next_check_; }
  // Asks the criterion (call when due): the decision, also kept as decision().
  NoiseCriterion::Decision check(const std::vector<double>& reference_ms,
                                 const std::vector<double>& candidate_ms, double elapsed_s,
                                 std::uint64_t seed);
  // Sampling starts over (another clock): the criterion is next asked at min_samples again.
  void restart() { next_check_ = min_samples_; }
  // After the samples ran out with (nearly) all of them throttled: not converged.
  void give_up() { decision_ = NoiseCriterion::Decision::kContinue; }

  NoiseCriterion::Decision decision() const { return decision_; }
  bool converged() const { return decision_ == NoiseCriterion::Decision::kConverged; }
  // "converged", "sample_limit" or "time_budget" (details["stop"]).
  const char* stop_reason() const;
  const TimingProgress& progress() const { return progress_; }
  double speedup() const { return speedup_; }  // at the last check
  const NoiseCriterion& criterion() const { return criterion_; }

 private:
  NoiseCriterion criterion_;
  std::size_t min_samples_;
  int resamples_;
  std::size_t next_check_;
  NoiseCriterion::Decision decision_ = NoiseCriterion::Decision::kContinue;
  TimingProgress progress_;
  double speedup_ = 0;
};

// The budget ends sampling, but never before a pair could count: where calls are longer than the
// budget (a first round's share of it, on a slow or busy machine), the only pair taken may be a
// traced one or one dropped as unqueued, and neither is a sample. Throttled pairs count here
// (with nothing better, the result reports them). Past the budget and a call's time-out
// (hard_deadline) no request is waited for.
class SamplingBudget {
 public:
  SamplingBudget(Clock::time_point start, double budget_s, double call_timeout_s);
  bool time_left(bool any_pair_measured, Clock::time_point now) const {
    return now < end_ || (!any_pair_measured && now < hard_deadline_);
  }
  Clock::time_point start() const { return start_; }
  Clock::time_point hard_deadline() const { return hard_deadline_; }

 private:
  Clock::time_point start_, end_, hard_deadline_;
};

// Pairs in a batch that fill about batch_s at `pair_s` seconds a pair (1 without a rate).
std::size_t batch_fill(const TimingConfig& config, double pair_s);
// Pairs the next request takes: as many as fill about batch_s at the rate of the last batch, up
// to the next noise check; at least one.
std::size_t pairs_per_request(const TimingConfig& config, double pair_s,
                              std::optional<std::size_t> until_check);

// Spot checks: the first at a random pair among the first `every`, then each after a random gap
// averaging `every` pairs, or more where large outputs make a check slow (the device-to-host
// copies, the pipe and the comparison), so that checks take about `share` of the sampling time
// at most (spot_check_mean_gap). `every` 0: none.
class SpotCheckSchedule {
 public:
  SpotCheckSchedule() = default;  // none
  // Draws the first checked pair from `schedule` when `every` > 0.
  SpotCheckSchedule(std::size_t every, double share, std::mt19937_64& schedule);
  bool on() const { return every_ > 0; }
  // The index within a batch of `count` pairs from `first_pair` of the pair to check, if any.
  std::optional<std::size_t> in_batch(std::size_t first_pair, std::size_t count) const;
  // A check took check_s (its pair included), `taken` pairs sampled so far, `elapsed_s` since
  // sampling began: draws the next checked pair.
  void checked(double check_s, std::size_t taken, double elapsed_s, std::mt19937_64& schedule);
  // A check outside sampling (the pair after the last): its time only.
  void add_time(double check_s) { seconds_ += check_s; }
  double seconds() const { return seconds_; }  // pairs that returned outputs, and comparing them

 private:
  std::size_t every_ = 0;
  double share_ = 0;
  std::size_t next_ = 0;
  std::size_t pairs_ = 0;  // pairs checked during sampling
  double seconds_ = 0;
};

// On the window clock, which counts the host's time, CUPTI's cost per launch would count too:
// pairs are timed untraced, and a random pair in about every kEvery is traced for the kernel
// statistics and not kept as a sample (on the queued clock every call is traced).
class TracedPairSchedule {
 public:
  static constexpr std::size_t kEvery = 8;
  TracedPairSchedule() = default;
  explicit TracedPairSchedule(std::mt19937_64& schedule);
  // Which pairs of a batch of `count` from `first_pair` are traced: all on the queued clock, the
  // scheduled ones on the window clock when both workers can trace, else none.
  std::vector<bool> plan(std::size_t first_pair, std::size_t count, bool window, bool traceable,
                         std::mt19937_64& schedule);
  // Sampling starts over at pair `at` (on the window clock).
  void restart(std::size_t at, std::mt19937_64& schedule);

 private:
  std::size_t next_ = 0;
};

}  // namespace cudal1
