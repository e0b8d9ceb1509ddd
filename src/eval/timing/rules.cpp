#include <algorithm>
#include <cmath>

#include "cudal1/eval/bucket_check.hpp"
#include "cudal1/eval/statistics.hpp"
#include "cudal1/eval/timing_rules.hpp"

namespace cudal1 {

WarmupRule::WarmupRule(const TimingConfig& config, std::size_t streams)
    // Every stream in turn gets a warm call at least (a library's first call on a stream may
    // allocate a workspace for it).
    : min_calls_(std::max(config.min_warmup_calls, streams)),
      min_ms_(config.min_warmup_s * 1e3),
      wall_cap_s_(std::min(config.max_warmup_wall_s, config.budget_s / 4)) {
  if (config.prewarmed_sets > 0) {  // warmed under the shared hold already
    min_ms_ = std::min(min_ms_, config.exclusive_warmup_s * 1e3);
    wall_cap_s_ = std::min(wall_cap_s_, config.exclusive_warmup_s);
    // On the window clock no hold's time-out is sized from these calls (the queued clock's
    // needs a second call's host time): one per stream is left to take.
    if (config.mode == "window") min_calls_ = std::max<std::size_t>(1, streams);
  }
}

bool WarmupRule::more(std::size_t calls, double reference_ms, double candidate_ms,
                      double elapsed_s) const {
  return calls < min_calls_ ||
         ((reference_ms < min_ms_ || candidate_ms < min_ms_) && elapsed_s < wall_cap_s_);
}

double hold_timeout_ms(const TimingConfig& config, double slowest_host_ms) {
  return std::clamp(config.hold_timeout_factor * slowest_host_ms, config.hold_timeout_min_ms,
                    config.hold_timeout_max_ms);
}

SamplingStop::SamplingStop(const TimingConfig& config)
    : criterion_(config.noise),
      min_samples_(config.noise.min_samples),
      resamples_(config.check_resamples),
      next_check_(config.noise.min_samples) {}

std::optional<std::size_t> SamplingStop::pairs_until_check(std::size_t kept) const {
  if (next_check_ > kept) return next_check_ - kept;
  return std::nullopt;
}

NoiseCriterion::Decision SamplingStop::check(const std::vector<double>& reference_ms,
                                             const std::vector<double>& candidate_ms,
                                             double elapsed_s, std::uint64_t seed) {
  const std::size_t kept = reference_ms.size();
  next_check_ = kept + std::max<std::size_t>(5, kept / 10);
  speedup_ = median(reference_ms) / median(candidate_ms);
  const Interval ci = bootstrap_median_ratio(reference_ms, candidate_ms, resamples_, 0.95, seed);
  progress_.pairs = kept;
  progress_.elapsed_s = elapsed_s;
  progress_.relative_noise = relative_half_width(ci, speedup_);
  const auto buckets = check_buckets(reference_ms, candidate_ms);
  progress_.bucket_spread = buckets ? std::optional<double>(buckets->spread) : std::nullopt;
  decision_ = criterion_.decide(progress_);
  return decision_;
}

const char* SamplingStop::stop_reason() const {
  if (converged()) return "converged";
  return decision_ == NoiseCriterion::Decision::kSampleLimit ? "sample_limit" : "time_budget";
}

SamplingBudget::SamplingBudget(Clock::time_point start, double budget_s, double call_timeout_s)
    : start_(start),
      end_(start +
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(budget_s))),
      hard_deadline_(end_ + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(call_timeout_s))) {}

std::size_t batch_fill(const TimingConfig& config, double pair_s) {
  if (config.max_batch <= 1 || pair_s <= 0) return 1;
  return std::clamp<std::size_t>(static_cast<std::size_t>(config.batch_s / pair_s), 1,
                                 config.max_batch);
}

std::size_t pairs_per_request(const TimingConfig& config, double pair_s,
                              std::optional<std::size_t> until_check) {
  std::size_t k = batch_fill(config, pair_s);
  if (until_check) k = std::min(k, *until_check);
  return std::max<std::size_t>(1, k);
}

std::size_t spot_check_mean_gap(double check_s, double plain_pair_s, std::size_t every,
                                double share) {
  share = std::clamp(share, 0.01, 1.0);
  const double by_cost = plain_pair_s > 0 ? check_s * (1 - share) / share / plain_pair_s : 0;
  return static_cast<std::size_t>(
      std::clamp(std::ceil(by_cost), static_cast<double>(std::max<std::size_t>(1, every)), 1e6));
}

SpotCheckSchedule::SpotCheckSchedule(std::size_t every, double share, std::mt19937_64& schedule)
    : every_(every), share_(share), next_(every > 0 ? schedule() % every : 0) {}

std::optional<std::size_t> SpotCheckSchedule::in_batch(std::size_t first_pair,
                                                       std::size_t count) const {
  if (every_ == 0 || next_ >= first_pair + count) return std::nullopt;
  return next_ - first_pair;
}

void SpotCheckSchedule::checked(double check_s, std::size_t taken, double elapsed_s,
                                std::mt19937_64& schedule) {
  seconds_ += check_s;
  ++pairs_;
  // A plain pair's time: sampling's so far without the checks', over the pairs not checked.
  const double plain_s =
      (elapsed_s - seconds_) / static_cast<double>(std::max<std::size_t>(1, taken - pairs_));
  const std::size_t mean_gap = spot_check_mean_gap(check_s, plain_s, every_, share_);
  next_ = taken + schedule() % (2 * mean_gap);
}

TracedPairSchedule::TracedPairSchedule(std::mt19937_64& schedule) : next_(schedule() % kEvery) {}

std::vector<bool> TracedPairSchedule::plan(std::size_t first_pair, std::size_t count, bool window,
                                           bool traceable, std::mt19937_64& schedule) {
  std::vector<bool> traced(count, !window);
  if (window && traceable) {
    while (next_ < first_pair + count) {
      traced[next_ - first_pair] = true;
      next_ += 1 + schedule() % (2 * kEvery);
    }
  }
  return traced;
}

void TracedPairSchedule::restart(std::size_t at, std::mt19937_64& schedule) {
  next_ = at + schedule() % kEvery;
}

}  // namespace cudal1
