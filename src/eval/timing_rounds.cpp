// Joining timing rounds taken in fresh worker processes into one estimate.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <stdexcept>

#include "cudal1/eval/timing.hpp"

namespace cudal1 {
namespace {

// Geometric mean of details[key][side] over the rounds; null unless every round has it.
nlohmann::json mean_of_sides(const std::vector<TimingOutcome>& rounds, const char* key) {
  nlohmann::json out = nlohmann::json::object();
  for (const char* side : {"reference", "candidate"}) {
    std::vector<double> values;
    for (const auto& round : rounds) {
      const auto& entry = round.details.value(key, nlohmann::json());
      if (entry.is_object() && entry.contains(side) && entry[side].is_number() &&
          entry[side].get<double>() > 0)
        values.push_back(entry[side].get<double>());
    }
    if (values.size() != rounds.size()) return nullptr;
    out[side] = geometric_mean(values);
  }
  return out;
}

nlohmann::json round_summary(const TimingOutcome& round) {
  nlohmann::json out = {
      {"speedup", round.speedup},
      {"speedup_ci", {round.ci.low, round.ci.high}},
      {"reference_ms", round.reference_median_ms},
      {"candidate_ms", round.candidate_median_ms},
      {"pairs", round.reference_ms.size()},
      {"relative_noise", std::isfinite(round.relative_noise) ? nlohmann::json(round.relative_noise)
                                                             : nlohmann::json(nullptr)},
      {"stop", round.details.value("stop", "")},
      {"mode", round.details.value("mode", "")},
      {"elapsed_s", round.details.value("elapsed_s", 0.0)}};
  for (const char* key :
       {"kernel_time_speedup", "host_ms", "warmup_calls", "warmup_s", "sampling_s", "spot_check_s",
        "activity_s", "traced_pairs", "traced_window_ms", "unseen"}) {
    if (round.details.contains(key)) out[key] = round.details[key];
  }
  // What each side's trace put outside the timed calls in this round (`activity`, the whole
  // summary, is the first round's): the evidence for background_work in a later round.
  const auto& activity = round.details.value("activity", nlohmann::json::object());
  if (activity.is_object()) {
    nlohmann::json outside = nlohmann::json::object();
    for (const char* side : {"reference", "candidate"}) {
      const auto& a = activity.value(side, nlohmann::json());
      if (!a.is_object()) continue;
      outside[side] = {{"kernels", a.value("kernels_outside_windows", 0)},
                       {"copies", a.value("copies_outside_windows", 0)},
                       {"at_window_end", a.value("outside_at_window_end", 0)},
                       {"overshoot_ns", a.value("outside_overshoot_ns", 0)},
                       {"before_harness", a.value("outside_before_harness", 0)},
                       {"trace_shift", a.value("trace_shift", nlohmann::json())},
                       {"untraced_window_records", a.value("untraced_window_records", 0)}};
    }
    if (!outside.empty()) out["outside"] = outside;
  }
  return out;
}

// Two or more rounds on one clock as one outcome (see combine_rounds).
TimingOutcome join(const std::vector<TimingOutcome>& rounds, double max_noise, int resamples,
                   std::uint64_t seed) {
  TimingOutcome out;
  out.details = rounds.front().details;  // clock, input sets, criterion, activity: round 1's
  std::vector<RoundSamples> samples;
  std::vector<double> speedups, reference_medians, candidate_medians;
  nlohmann::json summaries = nlohmann::json::array();
  std::optional<std::size_t> short_round;  // the first round with too few pairs
  std::size_t spot_checks = 0;
  // Where the rounds' time went, summed over the rounds.
  std::map<std::string, double> seconds = {
      {"elapsed_s", 0}, {"warmup_s", 0}, {"sampling_s", 0}, {"spot_check_s", 0}, {"activity_s", 0}};
  for (std::size_t k = 0; k < rounds.size(); ++k) {
    const TimingOutcome& round = rounds[k];
    samples.push_back({round.reference_ms, round.candidate_ms});
    speedups.push_back(round.speedup);
    reference_medians.push_back(round.reference_median_ms);
    candidate_medians.push_back(round.candidate_median_ms);
    out.reference_ms.insert(out.reference_ms.end(), round.reference_ms.begin(),
                            round.reference_ms.end());
    out.candidate_ms.insert(out.candidate_ms.end(), round.candidate_ms.begin(),
                            round.candidate_ms.end());
    out.discarded += round.discarded;
    out.findings.merge(round.findings, fmt::format("timing round {}: ", k + 1));
    // A round needs enough pairs for its median; its own noise may be above the target, which
    // applies to the joint interval (short rounds are how many processes fit one budget).
    const auto min_pairs = round.details.value("criterion", nlohmann::json::object())
                               .value("min_samples", NoiseCriterion::Params{}.min_samples);
    if (!short_round && !round.converged && round.reference_ms.size() < min_pairs) short_round = k;
    spot_checks += round.details.value("spot_checks", std::size_t{0});
    for (auto& [key, total] : seconds) total += round.details.value(key, 0.0);
    summaries.push_back(round_summary(round));
  }
  out.reference_median_ms = geometric_mean(reference_medians);
  out.candidate_median_ms = geometric_mean(candidate_medians);
  out.speedup = out.reference_median_ms / out.candidate_median_ms;
  out.ci = bootstrap_rounds_ratio(samples, resamples, 0.95, seed);
  out.relative_noise = relative_half_width(out.ci, out.speedup);
  out.converged = !short_round && out.relative_noise <= max_noise;
  out.buckets = rounds.front().buckets;

  const auto [low, high] = std::minmax_element(speedups.begin(), speedups.end());
  out.details["rounds"] = summaries;
  out.details["round_spread"] = (*high - *low) / median(speedups);
  out.details["pairs"] = out.reference_ms.size();
  out.details["discarded_throttled"] = out.discarded;
  out.details["spot_checks"] = spot_checks;
  for (const auto& [key, total] : seconds) out.details[key] = total;
  out.details["relative_noise"] = std::isfinite(out.relative_noise)
                                      ? nlohmann::json(out.relative_noise)
                                      : nlohmann::json(nullptr);
  // A round too short to count says why; else the joint interval is too wide.
  if (short_round) {
    const std::string why = rounds[*short_round].details.value("stop", "time_budget");
    out.details["stop"] = why;
    out.details["short_round"] = fmt::format("round {}: {}", *short_round + 1, why);
  } else {
    out.details["stop"] = out.converged ? "converged" : "rounds_disagree";
  }
  // All rounds' samples pooled (the verdict's reference_ms and candidate_ms are the geometric
  // means of the rounds' medians instead).
  out.details["reference"] = SampleSummary::of(out.reference_ms).to_json();
  out.details["candidate"] = SampleSummary::of(out.candidate_ms).to_json();
  for (const char* key : {"host_ms", "kernel_ms", "overhead_ms"}) {
    const auto joined = mean_of_sides(rounds, key);
    if (joined.is_null()) {
      out.details.erase(key);
    } else {
      out.details[key] = joined;
    }
  }
  if (out.details.contains("kernel_ms")) {
    out.details["kernel_time_speedup"] = out.details["kernel_ms"]["reference"].get<double>() /
                                         out.details["kernel_ms"]["candidate"].get<double>();
  }
  return out;
}

}  // namespace

TimingOutcome combine_rounds(std::vector<TimingOutcome> rounds, double max_noise, int resamples,
                             std::uint64_t seed) {
  if (rounds.empty()) throw std::invalid_argument("combine_rounds: no rounds");
  // Rounds on both clocks: their numbers cannot be joined, and the window clock (host time in)
  // is the one every round allows, so the queued rounds go.
  const auto on_window = [](const TimingOutcome& r) {
    return r.details.value("mode", "") == "window";
  };
  std::size_t dropped = 0;
  if (std::any_of(rounds.begin(), rounds.end(), on_window)) {
    dropped = std::erase_if(rounds, [&](const TimingOutcome& r) { return !on_window(r); });
  }
  TimingOutcome out =
      rounds.size() == 1 ? std::move(rounds.front()) : join(rounds, max_noise, resamples, seed);
  if (dropped > 0) {
    out.details["rounds_dropped"] = dropped;
    out.details["mode_reason"] = fmt::format(
        "{} round(s) on the queued clock were dropped: a later round could only be timed on the "
        "window clock",
        dropped);
  }
  return out;
}

nlohmann::json RerunInterval::to_json() const {
  const auto number = [](double x) {
    return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr);
  };
  return {{"speedup", number(speedup)},
          {"ci", {number(ci.low), number(ci.high)}},
          {"half_width", number(half_width)},
          {"prior_sd", number(prior_sd)},
          {"between_sd", number(between_sd)},
          {"within_sd", number(within_sd)},
          {"rounds", rounds}};
}

bool runs_library_chosen_kernels(const TimingOutcome& round) {
  const auto& activity = round.details.value("activity", nlohmann::json());
  if (!activity.is_object()) return false;
  for (const char* side : {"reference", "candidate"}) {
    const auto& names =
        activity.value(side, nlohmann::json::object()).value("kernel_names", nlohmann::json());
    if (!names.is_array()) continue;
    for (const auto& name : names) {
      if (!name.is_string()) continue;
      std::string lower = name.get<std::string>();
      std::transform(lower.begin(), lower.end(), lower.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (lower.find("cudnn") != std::string::npos) return true;
    }
  }
  return false;
}

double prior_offset_sd(const TimingOutcome& round, const OffsetPrior& prior,
                       bool per_process_choice) {
  double variance = prior.floor * prior.floor;
  if (round.details.value("mode", "") == "queued") {
    const auto& activity = round.details.value("activity", nlohmann::json::object());
    const std::pair<const char*, double> sides[] = {{"reference", round.reference_median_ms},
                                                    {"candidate", round.candidate_median_ms}};
    for (const auto& [side, ms] : sides) {
      if (!(ms > 0)) continue;
      const auto& trace = activity.is_object() ? activity.value(side, nlohmann::json::object())
                                               : nlohmann::json::object();
      const double kernels = std::max(1.0, trace.value("kernels_per_call", 1.0));
      // Gaps cannot move a call by more than a quarter of its time.
      const double relative = std::min(0.25, prior.per_kernel_us * kernels / (1e3 * ms));
      variance += relative * relative;
    }
  } else {
    variance += prior.window * prior.window;  // host time in, or a CPU shared with other work
  }
  if (per_process_choice) variance += prior.per_process_choice * prior.per_process_choice;
  return std::sqrt(variance);
}

namespace {

// A round's sampling deviation of its log speedup, from its interval (or its noise).
double sampling_sd(const TimingOutcome& round) {
  if (round.ci.low > 0 && round.ci.high >= round.ci.low && std::isfinite(round.ci.high))
    return std::log(round.ci.high / round.ci.low) / (2 * 1.96);
  return std::isfinite(round.relative_noise) ? round.relative_noise / 1.96 : 0.0;
}

}  // namespace

RerunInterval rerun_interval(const std::vector<TimingOutcome>& rounds, const OffsetPrior& prior,
                             bool per_process_choice) {
  RerunInterval out;
  out.rounds = rounds.size();
  std::vector<double> logs;
  double within_sq = 0, prior_sq = 0;
  for (const auto& round : rounds) {
    if (!(round.speedup > 0) || !std::isfinite(round.speedup)) continue;
    logs.push_back(std::log(round.speedup));
    const double w = sampling_sd(round);
    within_sq += w * w;
    const double tau = prior_offset_sd(round, prior, per_process_choice);
    prior_sq += tau * tau;
  }
  if (logs.empty()) {
    out.speedup = NAN;
    out.ci = {NAN, NAN};
    out.half_width = INFINITY;
    return out;
  }
  const double k = static_cast<double>(logs.size());
  within_sq /= k;
  prior_sq /= k;
  double mean = 0;
  for (double y : logs) mean += y;
  mean /= k;
  double excess = 0;  // the rounds' spread beyond their sampling noise, times (k - 1)
  if (logs.size() > 1) {
    double spread_sq = 0;
    for (double y : logs) spread_sq += (y - mean) * (y - mean);
    excess = std::max(0.0, spread_sq - (k - 1) * within_sq);
  }
  const double between_sq = (prior.weight * prior_sq + excess) / (prior.weight + k - 1);
  const double mean_variance = (between_sq + within_sq) / k + prior.run * prior.run;
  const double half = 1.96 * std::sqrt(2 * mean_variance);
  out.speedup = std::exp(mean);
  out.ci = {std::exp(mean - half), std::exp(mean + half)};
  out.half_width = relative_half_width(out.ci, out.speedup);
  out.prior_sd = std::sqrt(prior_sq);
  out.between_sd = std::sqrt(between_sq);
  out.within_sd = std::sqrt(within_sq);
  return out;
}

std::optional<std::size_t> outlying_round(const std::vector<TimingOutcome>& rounds,
                                          const OffsetPrior& prior, bool per_process_choice) {
  if (rounds.size() < kMinRoundsForOutlier || per_process_choice) return std::nullopt;
  std::vector<double> logs;
  double expected_sq = 0;
  for (const auto& round : rounds) {
    if (!(round.speedup > 0) || !std::isfinite(round.speedup)) return std::nullopt;
    logs.push_back(std::log(round.speedup));
    const double w = sampling_sd(round);
    const double tau = prior_offset_sd(round, prior, per_process_choice);
    expected_sq += (w * w + tau * tau) / static_cast<double>(rounds.size());
  }
  const auto median_of = [](std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  };
  const double centre = median_of(logs);
  std::size_t farthest = 0;
  for (std::size_t i = 1; i < logs.size(); ++i) {
    if (std::abs(logs[i] - centre) > std::abs(logs[farthest] - centre)) farthest = i;
  }
  std::vector<double> others;
  for (std::size_t i = 0; i < logs.size(); ++i) {
    if (i != farthest) others.push_back(logs[i]);
  }
  const double others_centre = median_of(others);
  std::vector<double> deviations;
  for (double y : others) deviations.push_back(std::abs(y - others_centre));
  const double robust_sd = 1.4826 * median_of(deviations);
  const double scale = std::max(std::sqrt(expected_sq), robust_sd);
  if (std::abs(logs[farthest] - centre) > kOutlierFactor * scale) return farthest;
  return std::nullopt;
}

bool missed_the_hold(const TimingOutcome& round) {
  return round.details.value("mode", "") == "window" && round.details.value("missed_hold", false);
}

bool missed_rounds_by_chance(const std::vector<TimingOutcome>& rounds) {
  std::size_t missed = 0;
  for (const auto& round : rounds) {
    if (round.details.value("mode", "") != "window") continue;
    if (!missed_the_hold(round)) return false;
    ++missed;
  }
  return missed <= kMaxMissedRounds;
}

std::vector<std::size_t> missed_rounds_replaced(const std::vector<TimingOutcome>& rounds) {
  std::vector<std::size_t> missed;
  bool any_queued = false;
  for (std::size_t i = 0; i < rounds.size(); ++i) {
    if (rounds[i].details.value("mode", "") == "window") {
      missed.push_back(i);
    } else {
      any_queued = true;
    }
  }
  if (!any_queued || !missed_rounds_by_chance(rounds)) missed.clear();
  return missed;
}

nlohmann::json missed_round_record(std::size_t index, const TimingOutcome& round) {
  nlohmann::json record = nlohmann::json::object();
  record["round"] = index + 1;
  record["speedup"] = round.speedup;
  record["mode_reason"] = round.details.value("mode_reason", "");
  return record;
}

std::size_t more_rounds_wanted(const RerunInterval& interval, std::size_t done,
                               const RoundsPolicy& policy) {
  if (done == 0) return 1;
  if (done >= policy.max_rounds || !std::isfinite(interval.half_width) ||
      interval.half_width <= policy.rerun_target || !(policy.rerun_target > 0))
    return 0;
  const double ratio = interval.half_width / policy.rerun_target;
  const double needed = std::ceil(static_cast<double>(done) * ratio * ratio);
  const double more = std::max(1.0, needed - static_cast<double>(done));
  return static_cast<std::size_t>(std::min(more, static_cast<double>(policy.max_rounds - done)));
}

std::size_t pairs_to_stage(std::size_t rounds, double free_bytes, double pair_bytes) {
  if (rounds <= 1 || !(pair_bytes > 0) || !(free_bytes > 0)) return 0;
  const double fit = std::floor(0.5 * free_bytes / pair_bytes);
  return static_cast<std::size_t>(std::min(fit, static_cast<double>(rounds - 1)));
}

}  // namespace cudal1
