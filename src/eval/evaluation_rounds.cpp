// The timing rounds: a fixed number (--timing-rounds N, each on fresh or staged workers), or with
// --timing-rounds auto one round, then more while a rerun's interval is wider than the target;
// then joined into one outcome whose interval covers what a rerun would measure.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "cudal1/common/log_trim.hpp"
#include "cudal1/common/unix_time.hpp"
#include "cudal1/worker/protocol.hpp"
#include "evaluation_internal.hpp"

namespace cudal1 {

namespace proto = worker_protocol;

std::optional<Verdict> Evaluation::time_rounds(StartedWorker& reference, StartedWorker& candidate,
                                               const std::string& build_key,
                                               const TimingConfig& config, TimingPlace& place,
                                               TimingRounds& rounds) {
  // --timing-rounds auto: one round, then more while a rerun's interval is wider than the
  // target. On a CPU one round (a fresh process costs seconds; the prior says how wide), and
  // with a calibration one (it corrects the first pair's offset, not a later pair's).
  const RoundsPolicy& policy = options_.timing.auto_rounds;
  rounds.adaptive = options_.timing.rounds == 0;
  rounds.count =
      rounds.adaptive
          ? (device_ == "cpu" || calibration_ ? 1 : std::max<std::size_t>(1, policy.max_rounds))
          : options_.timing.rounds;
  rounds.per_process_choice = findings_.has(flag::kPrecisionDowncast);
  rounds.budget_left = options_.timing.budget_s;
  TimingConfig later_config = config;  // the adaptive rounds after the first
  later_config.max_warmup_wall_s = std::min(config.max_warmup_wall_s, policy.later_warmup_s);
  later_config.min_warmup_s = std::min(config.min_warmup_s, policy.later_warmup_s);
  later_config.noise.min_time_s = std::min(config.noise.min_time_s, policy.later_min_time_s);
  for (std::size_t round = 0; round < rounds.count; ++round) {
    TimingConfig round_config = rounds.adaptive && round > 0 ? later_config : config;
    round_config.budget_s = round_budget(rounds, round);
    if (round > 0) {
      if (auto failure = next_round_workers(reference, candidate, build_key, round, round_config,
                                            place, rounds))
        return failure;
      // Every round on the clock the first one chose (a round that missed the hold chose none).
      const TimingOutcome& first = rounds.done.front();
      if (first.details.value("mode", "") == "window" && !missed_the_hold(first))
        round_config.mode = "window";
    }
    round_config.prewarmed_sets = prewarmed_sets_;
    auto outcome = time_round(*reference.client, *candidate.client, round_config, place.clock.get(),
                              round, rounds.adaptive ? 0 : rounds.count);
    if (!outcome) return verdict_;
    rounds.budget_left -= outcome->details.value("elapsed_s", round_config.budget_s);
    rounds.per_process_choice = rounds.per_process_choice || runs_library_chosen_kernels(*outcome);
    rounds.done.push_back(std::move(*outcome));
    if (!rounds.adaptive || round + 1 >= rounds.count) continue;
    if (decide_more_rounds(rounds) == 0) break;
  }
  if (rounds.done.size() > 1 || (!rounds.adaptive && rounds.count > 1))
    phases_["timing_restart_s"] = rounds.restart_s;
  if (rounds.released > 0) phases_["timing_released"] = rounds.released;
  return std::nullopt;
}

double Evaluation::round_budget(const TimingRounds& rounds, std::size_t round) const {
  // Rounds share the budget; what a round that converged early left is there for the next ones.
  // An adaptive first round keeps most of it (RoundsPolicy::first_share) for the rounds it may
  // ask for.
  const double budget_s = options_.timing.budget_s;
  if (rounds.adaptive) {
    const RoundsPolicy& policy = options_.timing.auto_rounds;
    if (round == 0 && rounds.count == 1) return budget_s;
    return round == 0 && rounds.count > 1 ? policy.first_share * budget_s
                                          : std::min(policy.later_budget_s, rounds.budget_left);
  }
  const double even_share = budget_s / static_cast<double>(rounds.count);
  return std::max(0.5 * even_share, rounds.budget_left / static_cast<double>(rounds.count - round));
}

std::optional<Verdict> Evaluation::next_round_workers(StartedWorker& reference,
                                                      StartedWorker& candidate,
                                                      const std::string& build_key,
                                                      std::size_t round, const TimingConfig& config,
                                                      TimingPlace& place, TimingRounds& rounds) {
  const auto restart_start = Clock::now();
  if (staged_.empty()) {
    if (rounds.adaptive) {
      std::size_t want = rounds.decisions.back().value("more", std::size_t{1});
      place.exclusive.reset();  // other evaluations may time while these workers load
      ++rounds.released;
      if (auto failure = prepare_more_rounds(reference, candidate, build_key, round, want, config,
                                             *place.shared))
        return failure;
      report("waiting for the device (timing)");
      place.exclusive.emplace(shared_.config.lock_dir, place.device_id, phases_, "device_wait_s",
                              "device_held");
    } else if (auto failure = restart_workers(reference, candidate, build_key, round)) {
      return failure;
    }
  }
  if (!staged_.empty()) {
    report(fmt::format("timing round {}: the next pair of workers", round + 1));
    if (rounds.adaptive) {
      // Stopped now, shut down once the device is given back: a process's exit (its CUDA
      // context's teardown) takes a second or more and is device work.
      reference.client->pause();
      candidate.client->pause();
      retired_.push_back({std::move(reference), std::move(candidate)});
    } else {
      finish_reference(reference);  // kept for another evaluation, not for this one's rounds
      candidate.client->shutdown();
    }
    reference = std::move(staged_.front().reference);
    candidate = std::move(staged_.front().candidate);
    prewarmed_sets_ = staged_.front().prewarmed_sets;
    staged_.pop_front();
    reference.client->resume();
    candidate.client->resume();
  }
  rounds.restart_s += seconds_since(restart_start);
  return std::nullopt;
}

std::size_t Evaluation::decide_more_rounds(TimingRounds& rounds) const {
  const RoundsPolicy& policy = options_.timing.auto_rounds;
  const auto on_window = [](const TimingOutcome& r) {
    return r.details.value("mode", "") != "queued";
  };
  const bool any_window = std::any_of(rounds.done.begin(), rounds.done.end(), on_window);
  // A round that missed the hold by chance is judged by the queued rounds, which replace it.
  const bool by_chance = any_window && missed_rounds_by_chance(rounds.done);
  std::vector<TimingOutcome> queued;
  if (by_chance) {
    std::copy_if(rounds.done.begin(), rounds.done.end(), std::back_inserter(queued),
                 [&](const TimingOutcome& r) { return !on_window(r); });
  }
  const std::vector<TimingOutcome>& judged = by_chance ? queued : rounds.done;
  const RerunInterval so_far = rerun_interval(judged, policy.prior, rounds.per_process_choice);
  const std::size_t left = policy.max_rounds - std::min(policy.max_rounds, rounds.done.size());
  std::size_t more = std::min(left, more_rounds_wanted(so_far, judged.size(), policy));
  // Each later round needs at least its sampling minimum and a warm-up.
  const double per_round = policy.later_min_time_s + policy.later_warmup_s;
  const auto affordable = static_cast<std::size_t>(std::max(0.0, rounds.budget_left / per_round));
  nlohmann::json decision = {{"after_round", rounds.done.size()},
                             {"half_width", so_far.half_width},
                             {"prior_sd", so_far.prior_sd},
                             {"between_sd", so_far.between_sd}};
  // On the window clock a call's time holds the host's, whose speed drifts over minutes more
  // than between processes (docs/evaluation.md, "How repeatable the speedup is"): rounds would
  // cost whole calls of host work and not narrow it. The prior's width stands.
  if (by_chance) decision["missed_hold"] = rounds.done.size() - judged.size();
  if (more > 0 && any_window && !by_chance) {
    decision["window_clock"] = true;
    more = 0;
  }
  if (more > affordable) decision["budget_cut"] = more - affordable;
  more = std::min(more, affordable);
  decision["more"] = more;
  rounds.decisions.push_back(decision);
  return more;
}

TimingOutcome Evaluation::join_rounds(TimingRounds& rounds) const {
  const RoundsPolicy& policy = options_.timing.auto_rounds;
  // Rounds on both clocks are joined on the window clock alone (combine_rounds): so is the
  // interval.
  std::vector<TimingOutcome> joined_rounds;
  const auto on_window = [](const TimingOutcome& r) {
    return r.details.value("mode", "") == "window";
  };
  // Rounds that missed the hold by chance are left out where a queued round replaces them.
  nlohmann::json missed = nlohmann::json::array();
  Findings missed_findings;
  const std::vector<std::size_t> replaced = missed_rounds_replaced(rounds.done);
  for (auto i = replaced.rbegin(); i != replaced.rend(); ++i) {
    const TimingOutcome& round = rounds.done[*i];
    missed.insert(missed.begin(), missed_round_record(*i, round));
    missed_findings.merge(round.findings, fmt::format("timing round {}: ", *i + 1));
    rounds.done.erase(rounds.done.begin() + static_cast<std::ptrdiff_t>(*i));
  }
  const bool any_window = std::any_of(rounds.done.begin(), rounds.done.end(), on_window);
  // A round far from all the others (a pair of processes disturbed once) is left out of both
  // the speedup and the interval (outlying_round).
  // What it found (a defense's flag) still counts.
  nlohmann::json left_out;
  Findings left_out_findings;
  if (!any_window) {
    if (const auto i = outlying_round(rounds.done, policy.prior, rounds.per_process_choice)) {
      left_out = {{"round", *i + 1},
                  {"speedup", rounds.done[*i].speedup},
                  {"rounds_kept", rounds.done.size() - 1}};
      left_out_findings = rounds.done[*i].findings;
      rounds.done.erase(rounds.done.begin() + static_cast<std::ptrdiff_t>(*i));
    }
  }
  for (const auto& r : rounds.done) {
    if (!any_window || on_window(r)) joined_rounds.push_back(r);
  }
  const RerunInterval rerun =
      rerun_interval(joined_rounds, policy.prior, rounds.per_process_choice);
  TimingOutcome timing =
      combine_rounds(std::move(rounds.done), options_.timing.noise.max_noise,
                     options_.timing.final_resamples, seeds_.schedule ^ 0x5eedf00dULL);
  // The interval covers what a rerun would measure (docs/evaluation.md, "Intervals that cover a
  // rerun"); the samples' own interval stays in the details.
  timing.details["sampling_ci"] = {timing.ci.low, timing.ci.high};
  nlohmann::json rerun_record = rerun.to_json();
  rerun_record["per_process_choice"] = rounds.per_process_choice;
  rerun_record["adaptive"] = rounds.adaptive;
  if (rounds.adaptive) {
    rerun_record["target"] = policy.rerun_target;
    rerun_record["decisions"] = rounds.decisions;
  }
  if (std::isfinite(rerun.ci.low) && std::isfinite(rerun.ci.high)) {
    // Never narrower than the samples' own interval.
    timing.ci = {
        std::isfinite(timing.ci.low) ? std::min(rerun.ci.low, timing.ci.low) : rerun.ci.low,
        std::isfinite(timing.ci.high) ? std::max(rerun.ci.high, timing.ci.high) : rerun.ci.high};
  }
  if (!missed.empty()) {
    rerun_record["missed_hold_left_out"] = missed;
    timing.findings.merge(missed_findings, "");
  }
  if (!left_out.is_null()) {
    rerun_record["round_left_out"] = left_out;
    timing.findings.merge(left_out_findings,
                          fmt::format("timing round {}: ", left_out["round"].get<std::size_t>()));
  }
  timing.details["rerun"] = rerun_record;
  if (rounds.adaptive && timing.details.contains("rounds")) {
    // Rounds taken to average processes are judged by the interval they give, not each by its
    // own pairs: noisy when a rerun may still differ by more than the target.
    const bool settled = rerun.half_width <= policy.rerun_target;
    timing.converged = settled;
    timing.details["stop"] = settled ? "converged" : "rounds_disagree";
  }
  return timing;
}

std::optional<TimingOutcome> Evaluation::time_round(WorkerClient& reference,
                                                    WorkerClient& candidate,
                                                    const TimingConfig& config,
                                                    const GpuClock* clock, std::size_t round,
                                                    std::size_t rounds) {
  const Tolerance tolerance = options_.tolerance;
  const std::string label = rounds > 1  ? fmt::format("timing round {}/{}", round + 1, rounds)
                            : round > 0 ? fmt::format("timing round {}", round + 1)
                                        : std::string("timing");
  // Round k replays from its own seeds, derived from the recorded ones.
  const std::uint64_t offset = 0x9e3779b97f4a7c15ULL * round;
  try {
    TimingOutcome outcome = measure_speedup(
        reference, candidate, config, seeds_.timing + offset, seeds_.schedule + offset, clock,
        [this, &label](const TimingProgress& p, double speedup) {
          report(fmt::format("{}: {} samples, speedup {:.3f}x, noise {:.2f}%", label, p.pairs,
                             speedup, 100 * p.relative_noise));
        },
        [tolerance](const wire::Message& c, const wire::Message& r) {
          return compare_sample_outputs(c, r, tolerance);
        });
    // Replacements made while being timed.
    const auto guard_deadline = after(options_.timing.call_timeout_s);
    add_guard_findings(findings_,
                       call_as(candidate, Side::kCandidate,
                               {{proto::request::kOp, proto::op::kGuards}}, guard_deadline)
                           .header[proto::reply::kGuards],
                       call_as(reference, Side::kReference,
                               {{proto::request::kOp, proto::op::kGuards}}, guard_deadline)
                           .header[proto::reply::kGuards],
                       label);
    return outcome;
  } catch (const SideFailure& e) {
    if (e.side() == Side::kReference) throw;
    candidate.shutdown();
    candidate_failure(Status::kRuntimeError, first_line(e.what(), kWholeLine),
                      e.error().traceback() + "\n" + candidate.log_tail());
  } catch (const WorkerFailure& e) {
    if (e.worker() != "candidate") throw;
    const auto status =
        e.kind() == WorkerFailure::Kind::kTimeout ? Status::kTimeout : Status::kRuntimeError;
    candidate_failure(status, fmt::format("the candidate failed while being timed: {}", e.what()),
                      candidate.log_tail());
  }
  return std::nullopt;
}

}  // namespace cudal1
