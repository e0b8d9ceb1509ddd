// The last phase of a timing run: the speedup and its interval from the kept pairs, what the
// workers spent, and their traces of the timed calls (read by the kActivity defenses).
#include <cmath>
#include <stdexcept>

#include "cudal1/common/unix_time.hpp"
#include "cudal1/eval/bucket_check.hpp"
#include "cudal1/eval/defenses.hpp"
#include "cudal1/eval/statistics.hpp"
#include "cudal1/eval/timing_run.hpp"

namespace cudal1 {

void TimingRun::summarise() {
  summarise_samples();
  summarise_workers();
  const auto activity_start = Clock::now();
  read_activity(activity_start + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(config_.call_timeout_s)));
  out_.details["activity_s"] = seconds_since(activity_start);
}

void TimingRun::summarise_samples() {
  nlohmann::json& details = out_.details;
  details["spot_checks"] = spot_checks_;
  details["spot_check_s"] = spots_.seconds();
  if (clock_choice_.mode == "window" && clock_choice_.traced) {
    details["traced_pairs"] = traced_pairs_;
    // The traced pairs' own window times: next to the medians, the trace's cost in this process.
    if (!traced_reference_ms_.empty()) {
      details["traced_window_ms"] = {{"reference", median(traced_reference_ms_)},
                                     {"candidate", median(traced_candidate_ms_)}};
    }
  }
  details["sampling_s"] = sampling_s_;
  details["batches"] = batches_;
  // With (nearly) every sample throttled there is nothing better to report than all samples;
  // the result cannot have converged and is flagged noisy.
  if (out_.reference_ms.size() < config_.noise.min_samples &&
      all_reference_ms_.size() > out_.reference_ms.size()) {
    out_.reference_ms = all_reference_ms_;
    kept_first_use_ = all_first_use_;
    out_.candidate_ms = all_candidate_ms_;
    stop_.give_up();
    details["throttled_samples_used"] = true;
  }
  if (out_.reference_ms.empty())
    throw std::runtime_error("no timing sample could be taken within the time budget");
  out_.reference_median_ms = median(out_.reference_ms);
  out_.candidate_median_ms = median(out_.candidate_ms);
  out_.speedup = out_.reference_median_ms / out_.candidate_median_ms;
  out_.ci = bootstrap_median_ratio(out_.reference_ms, out_.candidate_ms, config_.final_resamples,
                                   0.95, schedule_seed_);
  out_.relative_noise = relative_half_width(out_.ci, out_.speedup);
  out_.buckets = check_buckets(out_.reference_ms, out_.candidate_ms);
  out_.converged = stop_.converged();

  details["elapsed_s"] = seconds_since(budget_->start());
  details["pairs"] = out_.reference_ms.size();
  details["discarded_throttled"] = out_.discarded;
  details["relative_noise"] = std::isfinite(out_.relative_noise)
                                  ? nlohmann::json(out_.relative_noise)
                                  : nlohmann::json(nullptr);
  details["stop"] = stop_.stop_reason();
  details["criterion"] = stop_.criterion().to_json();
  details["buckets"] = out_.buckets ? out_.buckets->to_json() : nlohmann::json(nullptr);
  details["reference"] = SampleSummary::of(out_.reference_ms).to_json();
  details["candidate"] = SampleSummary::of(out_.candidate_ms).to_json();
}

void TimingRun::summarise_workers() {
  nlohmann::json& details = out_.details;
  details["overhead_ms"] = {{"reference", median(ref_.overhead_ms)},
                            {"candidate", median(cand_.overhead_ms)}};
  if (!ref_.request_ms.empty() && !cand_.request_ms.empty()) {
    details["request_ms"] = {{"reference", median(ref_.request_ms)},
                             {"candidate", median(cand_.request_ms)}};
  }
  // Where a sample's time goes in the workers (median over the requests, per sample).
  for (const TimingSide* s : {&ref_, &cand_}) {
    nlohmann::json steps = nlohmann::json::object();
    for (const auto& [step, values] : s->step_ms) steps[step] = median(values);
    if (!steps.empty()) details["sample_steps_ms"][s->name()] = steps;
  }
  if (!clocks_.empty()) {
    std::vector<double> mhz(clocks_.begin(), clocks_.end());
    details["sm_clock_mhz"] = {{"median", median(mhz)}, {"min", quantile(mhz, 0.0)}};
  }
}

void TimingRun::read_activity(Clock::time_point deadline) {
  nlohmann::json& details = out_.details;
  if (!ref_.kept_host_ms.empty()) {
    // The host's wall time for the call until its work finished: on the queued clock the launch
    // overhead the speedup leaves out is visible here.
    details["host_ms"] = {{"reference", median(ref_.kept_host_ms)},
                          {"candidate", median(cand_.kept_host_ms)}};
  }
  const bool traced = !ref_.kept_kernel_ms.empty();
  const double ref_kernel_ms = traced ? median(ref_.kept_kernel_ms) : 0;
  const double cand_kernel_ms = traced ? median(cand_.kept_kernel_ms) : 0;
  if (traced) {
    // Kernel time alone, without launch overhead or idle gaps: a second view of the speedup.
    details["kernel_ms"] = {{"reference", ref_kernel_ms}, {"candidate", cand_kernel_ms}};
    if (ref_kernel_ms > 0 && cand_kernel_ms > 0)
      details["kernel_time_speedup"] = ref_kernel_ms / cand_kernel_ms;
  }
  auto ref_activity = ref_.activity(deadline);
  if (ref_activity.is_null()) return;
  auto cand_activity = cand_.activity(deadline);
  if (traced) {
    ref_activity["busy_ms_median"] = ref_kernel_ms;
    ref_activity["kernels_per_call"] = median(ref_.kept_kernels);
    cand_activity["busy_ms_median"] = cand_kernel_ms;
    cand_activity["kernels_per_call"] = median(cand_.kept_kernels);
  }
  details["activity"] = {{"reference", ref_activity}, {"candidate", cand_activity}};
  const ActivityMeasured activity{ref_activity, cand_activity};
  DefenseContext context{DefensePhase::kActivity, config_, out_.findings, out_.details};
  context.activity = &activity;
  run_defenses(context);
}

}  // namespace cudal1
