// The third phase of a timing run: pairs of samples in batches until the noise criterion decides
// or the budget ends.
#include <fmt/format.h>

#include <array>

#include "cudal1/common/unix_time.hpp"
#include "cudal1/eval/defenses.hpp"
#include "cudal1/eval/timing_run.hpp"

namespace cudal1 {

void TimingRun::sample() {
  budget_.emplace(Clock::now(), config_.budget_s, config_.call_timeout_s);
  spots_ = SpotCheckSchedule(spot_check_ ? config_.spot_check_every : 0, config_.spot_check_share,
                             schedule_);
  traced_ = TracedPairSchedule(schedule_);
  while (stop_.decision() == NoiseCriterion::Decision::kContinue &&
         budget_->time_left(!all_reference_ms_.empty(), Clock::now())) {
    take_sampling_batch();
  }
  sampling_s_ = seconds_since(budget_->start());
}

void TimingRun::take_sampling_batch() {
  // Random order within each batch of pairs: neither side systematically runs on a warmer
  // device.
  const bool reference_first = (schedule_() & 1) != 0;
  std::array<TimingSide*, 2> order = {&ref_, &cand_};
  if (!reference_first) std::swap(order[0], order[1]);
  const bool window = clock_choice_.mode == "window";
  const std::size_t count = pairs_per_request(config_, ref_.batch_sample_s + cand_.batch_sample_s,
                                              stop_.pairs_until_check(out_.reference_ms.size()));
  // Which pairs of the batch are traced, and which one is spot-checked.
  const std::vector<bool> traced =
      traced_.plan(pair_index_, count, window, clock_choice_.traced, schedule_);
  const std::optional<std::size_t> check = spots_.in_batch(pair_index_, count);
  const std::uint64_t check_seed = check ? schedule_() : 0;
  const auto batch_start = Clock::now();
  std::array<TimingSide::Batch, 2> taken;
  for (int i = 0; i < 2; ++i) {
    taken[i] = order[i]->take_batch(config_, clock_choice_, budget_->hard_deadline(), clock_,
                                    traced, check, check_seed);
  }
  const auto& ref_batch = reference_first ? taken[0] : taken[1];
  const auto& cand_batch = reference_first ? taken[1] : taken[0];
  if (count > 1) ++batches_;
  if (check) {
    const auto check_start = Clock::now();
    spot_check(*ref_batch.checked, *cand_batch.checked,
               fmt::format("timing sample {}", pair_index_ + *check + 1));
    // What the check added: the comparison here and both workers' copies of the outputs (a
    // batch of one is all check).
    const double check_s =
        count == 1 ? seconds_since(batch_start)
                   : seconds_since(check_start) + ref_batch.outputs_s + cand_batch.outputs_s;
    spots_.checked(check_s, pair_index_ + count, seconds_since(budget_->start()), schedule_);
  }
  for (std::size_t i = 0; i < count; ++i) {
    ++pair_index_;
    if (!add_pair(ref_batch.samples[i], cand_batch.samples[i], traced[i], ref_batch.first_set + i))
      break;
  }
  // Both sides go on with the next input set (a stop inside the batch skips the rest).
  ref_.next_set = cand_.next_set = std::max(ref_.next_set, cand_.next_set);
}

void TimingRun::spot_check(const wire::Message& reference, const wire::Message& candidate,
                           const std::string& where) {
  ++spot_checks_;
  const SpotCheckMeasured measured{candidate, reference, where, spot_check_};
  DefenseContext context{DefensePhase::kSpotCheck, config_, out_.findings, out_.details};
  context.spot_check = &measured;
  run_defenses(context);
}

// What one pair adds (pair_index_ already counts it): false when sampling must stop (the noise
// criterion decided) or start over (the queued clock failed) before the rest of its batch.
bool TimingRun::add_pair(const TimingSide::Sample& ref_sample,
                         const TimingSide::Sample& cand_sample, bool traced_pair, std::size_t set) {
  // The first time timing calls this pool set (warm-up took the first ones): its values are as
  // new to the candidate as an unseen set's.
  const bool first_use = set < pool_;
  const bool window = clock_choice_.mode == "window";
  const bool unqueued = clock_choice_.mode == "queued" && !(ref_sample.held && cand_sample.held);
  if (unqueued && unqueued_pairs_ < config_.max_unqueued_pairs) {
    ++unqueued_pairs_;  // dropped: a call left unqueued by chance
    out_.details["unqueued_pairs_dropped"] = unqueued_pairs_;
    return true;
  }
  if (unqueued) {
    restart_on_window_clock(ref_sample);
    return false;
  }
  if (window && traced_pair) {
    if (ref_sample.kernel_ms && cand_sample.kernel_ms) {
      ref_.keep_kernels(ref_sample);
      cand_.keep_kernels(cand_sample);
    }
    traced_reference_ms_.push_back(ref_sample.ms);
    traced_candidate_ms_.push_back(cand_sample.ms);
    ++traced_pairs_;
    return true;
  }
  all_reference_ms_.push_back(ref_sample.ms);
  all_candidate_ms_.push_back(cand_sample.ms);
  all_first_use_.push_back(first_use);
  bool throttled = false;
  for (const auto* s : {&ref_sample, &cand_sample}) {
    if (!s->clock_mhz) continue;
    clocks_.push_back(*s->clock_mhz);
    if (clock_ && *s->clock_mhz < config_.clock_floor * clock_->reference_mhz()) throttled = true;
  }
  if (throttled) {
    ++out_.discarded;
    return true;
  }
  out_.reference_ms.push_back(ref_sample.ms);
  out_.candidate_ms.push_back(cand_sample.ms);
  kept_first_use_.push_back(first_use);
  ref_.keep_host(ref_sample);
  cand_.keep_host(cand_sample);
  if (ref_sample.kernel_ms && cand_sample.kernel_ms) {
    ref_.keep_kernels(ref_sample);
    cand_.keep_kernels(cand_sample);
  }
  const std::size_t kept = out_.reference_ms.size();
  if (!stop_.due(kept)) return true;
  stop_.check(out_.reference_ms, out_.candidate_ms, seconds_since(budget_->start()),
              schedule_seed_ ^ kept);
  if (progress_) progress_(stop_.progress(), stop_.speedup());
  return stop_.decision() == NoiseCriterion::Decision::kContinue;
}

void TimingRun::restart_on_window_clock(const TimingSide::Sample& ref_sample) {
  // A call that queued in warm-up no longer does: the clocks of the samples so far cannot be
  // mixed with window ones, so sampling starts over on the window clock.
  clock_choice_ =
      ClockChoice{"window",
                  fmt::format("the {}'s call at timed pair {} could not be queued behind the hold; "
                              "restarted on the window clock",
                              ref_sample.held ? "candidate" : "reference", pair_index_),
                  0, clock_choice_.traced, true};
  traced_.restart(pair_index_, schedule_);
  out_.details["mode"] = clock_choice_.mode;
  out_.details["mode_reason"] = clock_choice_.reason;
  out_.details["missed_hold"] = true;
  all_reference_ms_.clear();
  all_candidate_ms_.clear();
  all_first_use_.clear();
  kept_first_use_.clear();
  ref_.forget_kept();
  cand_.forget_kept();
  out_.reference_ms.clear();
  out_.candidate_ms.clear();
  out_.discarded = 0;
  clocks_.clear();
  stop_.restart();
}

}  // namespace cudal1
