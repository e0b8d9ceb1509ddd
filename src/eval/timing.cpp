#include "cudal1/eval/timing.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <random>

#include "cudal1/eval/verdict.hpp"

namespace cudal1 {
namespace {

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// One side's view of the protocol: its worker, its input-set cursor and what it measured.
struct SideState {
  SideState(WorkerClient* w, Side s) : worker(w), side(s) {}

  WorkerClient* worker;
  Side side;
  std::size_t next_set = 0;
  std::vector<double> overhead_ms;  // orchestrator round trip minus the timed window
  std::size_t warmup_calls = 0;
  std::vector<std::string> own_kernels;

  struct Sample {
    double ms;
    std::optional<unsigned> clock_mhz;
    std::optional<wire::Message> reply;  // with the outputs, for a spot check
  };

  Sample take(const TimingConfig& config, Clock::time_point hard_deadline, const GpuClock* clock,
              bool return_outputs = false) {
    const auto begin = Clock::now();
    const auto deadline =
        std::min(hard_deadline, begin + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(config.call_timeout_s)));
    nlohmann::json request = {{"op", "sample"}, {"set", next_set++}};
    if (return_outputs) request["return_outputs"] = true;
    wire::Message reply = call_as(*worker, side, request, deadline);
    const double round_trip_ms = seconds_since(begin) * 1e3;
    Sample sample{reply.header.at("ms").get<double>(), clock ? clock->sm_mhz() : std::nullopt,
                  std::nullopt};
    if (return_outputs) {
      sample.reply = std::move(reply);
    } else {
      overhead_ms.push_back(round_trip_ms - sample.ms);
    }
    return sample;
  }

  // The worker's CUPTI summary of its timed windows, reduced to the kept samples: the windows are
  // the warm-up calls, then one per pair in the order taken.
  nlohmann::json activity(const std::vector<std::size_t>& kept_pairs, Clock::time_point deadline) {
    const nlohmann::json trace = call_as(*worker, side, {{"op", "activity"}}, deadline)
                                     .header.value("activity", nlohmann::json());
    if (!trace.is_object()) return nullptr;
    const auto busy = trace.value("busy_ms", std::vector<double>{});
    const auto kernels = trace.value("kernels", std::vector<double>{});
    std::vector<double> kept_busy, kept_kernels;
    for (std::size_t pair : kept_pairs) {
      const std::size_t window = warmup_calls + pair;
      if (window >= busy.size()) break;
      kept_busy.push_back(busy[window]);
      kept_kernels.push_back(kernels[window]);
    }
    auto names = trace.value("kernel_names", std::vector<std::string>{});
    std::size_t own = 0;
    for (const auto& name : names) {
      for (const auto& mine : own_kernels) {
        if (!mine.empty() && name.find(mine) != std::string::npos) {
          ++own;
          break;
        }
      }
    }
    // Enough names to see whose kernels ran; a candidate could launch thousands of distinct ones.
    constexpr std::size_t kMaxNames = 64;
    if (names.size() > kMaxNames) names.resize(kMaxNames);
    return {{"busy_ms_median", median(kept_busy)},
            {"kernels_per_call", median(kept_kernels)},
            {"kernels_outside_windows", trace.value("outside_kernels", 0)},
            {"copies_outside_windows", trace.value("outside_copies", 0)},
            {"streams", trace.value("streams", nlohmann::json::array())},
            {"default_stream", trace.value("default_stream", nlohmann::json())},
            {"kernel_names", names},
            {"own_kernels", own},
            {"dropped_records", trace.value("dropped_records", 0)}};
  }
};

void prepare_pools(SideState& ref, SideState& cand, const TimingConfig& config, std::uint64_t seed,
                   Clock::time_point deadline, nlohmann::json& details, Findings& findings) {
  const nlohmann::json request = {{"op", "prepare_timing"},
                                  {"seed", seed},
                                  {"pool_size", config.pool_size},
                                  {"max_pool_bytes", config.max_pool_bytes}};
  // Both workers build their pools at the same time.
  ref.worker->send(request);
  cand.worker->send(request);
  wire::Message ref_reply = ref.worker->receive(deadline);
  wire::Message cand_reply = cand.worker->receive(deadline);
  try {
    expect_ok(ref_reply);
  } catch (const WorkerError& e) {
    throw SideFailure(Side::kReference, e);
  }
  try {
    expect_ok(cand_reply);
  } catch (const WorkerError& e) {
    throw SideFailure(Side::kCandidate, e);
  }
  details["input_sets"] = ref_reply.header.value("pool", 0);
  details["input_set_bytes"] = ref_reply.header.value("set_bytes", 0);
  // Both pools come from the task's get_inputs() under the same seeds: the candidate's process
  // must have produced the same bytes, or it changed the task (sizes, generators).
  if (ref_reply.header.value("inputs", nlohmann::json()) !=
          cand_reply.header.value("inputs", nlohmann::json()) ||
      ref_reply.header.value("last_inputs", nlohmann::json()) !=
          cand_reply.header.value("last_inputs", nlohmann::json())) {
    findings.add(flag::kTampering,
                 "timing: the input sets generated in the candidate's process differ from the "
                 "task's (patched sizes, get_inputs or random generators)");
  }
}

void warm_up(SideState& ref, SideState& cand, const TimingConfig& config,
             Clock::time_point deadline, const GpuClock* clock, nlohmann::json& details) {
  const auto start = Clock::now();
  double ref_total = 0, cand_total = 0;
  std::size_t calls = 0;
  // A quarter of the budget at most: a slow model still leaves time for real samples.
  while (calls < config.min_warmup_calls ||
         ((ref_total < config.min_warmup_s * 1e3 || cand_total < config.min_warmup_s * 1e3) &&
          seconds_since(start) < config.budget_s / 4)) {
    ref_total += ref.take(config, deadline, clock).ms;
    cand_total += cand.take(config, deadline, clock).ms;
    ++calls;
  }
  for (SideState* s : {&ref, &cand}) {
    s->overhead_ms.clear();
    s->warmup_calls = calls;
  }
  details["warmup_calls"] = calls;
}

}  // namespace

TimingOutcome measure_speedup(WorkerClient& reference, WorkerClient& candidate,
                              const TimingConfig& config, std::uint64_t input_seed,
                              std::uint64_t schedule_seed, const GpuClock* clock,
                              const TimingProgressCallback& progress, const SpotCheck& spot_check) {
  TimingOutcome out;
  out.details = nlohmann::json::object();
  SideState ref{&reference, Side::kReference};
  SideState cand{&candidate, Side::kCandidate};
  const auto setup_deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(config.call_timeout_s * 4));
  ref.own_kernels = cand.own_kernels = config.own_kernels;
  prepare_pools(ref, cand, config, input_seed, setup_deadline, out.details, out.findings);

  const auto budget =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(config.budget_s));
  const auto grace = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(config.call_timeout_s));
  warm_up(ref, cand, config, Clock::now() + budget + grace, clock, out.details);

  const NoiseCriterion criterion(config.noise);
  std::mt19937_64 schedule(schedule_seed);
  std::vector<unsigned> clocks;
  std::vector<double> all_reference_ms, all_candidate_ms;  // throttled pairs included
  std::vector<std::size_t> kept_pairs;
  const auto start = Clock::now();
  const auto hard_deadline = start + budget + grace;
  std::size_t next_check = config.noise.min_samples;
  NoiseCriterion::Decision decision = NoiseCriterion::Decision::kContinue;
  TimingProgress state;
  const std::size_t spot_every = spot_check ? config.spot_check_every : 0;
  const std::size_t spot_offset = spot_every > 0 ? schedule() % spot_every : 0;
  std::size_t pair_index = 0, spot_checks = 0;
  auto check_pair = [&](const SideState::Sample& r, const SideState::Sample& c, std::size_t at) {
    ++spot_checks;
    const std::string problem = spot_check(*c.reply, *r.reply);
    if (!problem.empty()) {
      out.findings.add(flag::kCachedOutput,
                       fmt::format("timing sample {}: outputs differ from the reference's for the "
                                   "same inputs although the trials matched: {}",
                                   at + 1, problem));
    }
  };

  while (decision == NoiseCriterion::Decision::kContinue && Clock::now() < start + budget) {
    // Random order within each pair: neither side systematically runs on a warmer device.
    const bool reference_first = (schedule() & 1) != 0;
    std::array<SideState*, 2> order = {&ref, &cand};
    if (!reference_first) std::swap(order[0], order[1]);
    const bool spot = spot_every > 0 && pair_index % spot_every == spot_offset;
    std::array<SideState::Sample, 2> taken{};
    for (int i = 0; i < 2; ++i) taken[i] = order[i]->take(config, hard_deadline, clock, spot);
    const auto& ref_sample = reference_first ? taken[0] : taken[1];
    const auto& cand_sample = reference_first ? taken[1] : taken[0];
    if (spot) check_pair(ref_sample, cand_sample, pair_index);
    ++pair_index;

    all_reference_ms.push_back(ref_sample.ms);
    all_candidate_ms.push_back(cand_sample.ms);
    bool throttled = false;
    for (const auto& s : taken) {
      if (!s.clock_mhz) continue;
      clocks.push_back(*s.clock_mhz);
      if (clock && *s.clock_mhz < config.clock_floor * clock->reference_mhz()) throttled = true;
    }
    if (throttled) {
      ++out.discarded;
      continue;
    }
    kept_pairs.push_back(all_reference_ms.size() - 1);
    out.reference_ms.push_back(ref_sample.ms);
    out.candidate_ms.push_back(cand_sample.ms);

    if (out.reference_ms.size() >= next_check) {
      next_check = out.reference_ms.size() + std::max<std::size_t>(5, out.reference_ms.size() / 10);
      const double speedup = median(out.reference_ms) / median(out.candidate_ms);
      const Interval ci =
          bootstrap_median_ratio(out.reference_ms, out.candidate_ms, config.check_resamples, 0.95,
                                 schedule_seed ^ out.reference_ms.size());
      state.pairs = out.reference_ms.size();
      state.elapsed_s = seconds_since(start);
      state.relative_noise = relative_half_width(ci, speedup);
      const auto buckets = check_buckets(out.reference_ms, out.candidate_ms);
      state.bucket_spread = buckets ? std::optional<double>(buckets->spread) : std::nullopt;
      decision = criterion.decide(state);
      if (progress) progress(state, speedup);
    }
  }

  // One more pair after the last, not timed, so that a spot check always follows every sample.
  if (spot_every > 0) {
    const auto r = ref.take(config, hard_deadline, clock, true);
    const auto c = cand.take(config, hard_deadline, clock, true);
    check_pair(r, c, pair_index);
  }
  out.details["spot_checks"] = spot_checks;

  // With (nearly) every sample throttled there is nothing better to report than all samples;
  // the result cannot have converged and is flagged noisy.
  if (out.reference_ms.size() < config.noise.min_samples &&
      all_reference_ms.size() > out.reference_ms.size()) {
    out.reference_ms = all_reference_ms;
    out.candidate_ms = all_candidate_ms;
    kept_pairs.resize(all_reference_ms.size());
    for (std::size_t i = 0; i < kept_pairs.size(); ++i) kept_pairs[i] = i;
    decision = NoiseCriterion::Decision::kContinue;
    out.details["throttled_samples_used"] = true;
  }
  if (out.reference_ms.empty())
    throw std::runtime_error("no timing sample could be taken within the time budget");
  out.speedup = median(out.reference_ms) / median(out.candidate_ms);
  out.ci = bootstrap_median_ratio(out.reference_ms, out.candidate_ms, config.final_resamples, 0.95,
                                  schedule_seed);
  out.relative_noise = relative_half_width(out.ci, out.speedup);
  out.buckets = check_buckets(out.reference_ms, out.candidate_ms);
  out.converged = decision == NoiseCriterion::Decision::kConverged;

  out.details["elapsed_s"] = seconds_since(start);
  out.details["pairs"] = out.reference_ms.size();
  out.details["discarded_throttled"] = out.discarded;
  out.details["relative_noise"] = std::isfinite(out.relative_noise)
                                      ? nlohmann::json(out.relative_noise)
                                      : nlohmann::json(nullptr);
  out.details["stop"] = out.converged                                        ? "converged"
                        : decision == NoiseCriterion::Decision::kSampleLimit ? "sample_limit"
                                                                             : "time_budget";
  out.details["criterion"] = criterion.to_json();
  out.details["buckets"] = out.buckets ? out.buckets->to_json() : nlohmann::json(nullptr);
  out.details["reference"] = SampleSummary::of(out.reference_ms).to_json();
  out.details["candidate"] = SampleSummary::of(out.candidate_ms).to_json();
  out.details["overhead_ms"] = {{"reference", median(ref.overhead_ms)},
                                {"candidate", median(cand.overhead_ms)}};
  if (!clocks.empty()) {
    std::vector<double> mhz(clocks.begin(), clocks.end());
    out.details["sm_clock_mhz"] = {{"median", median(mhz)}, {"min", quantile(mhz, 0.0)}};
  }
  const auto activity_deadline = Clock::now() + grace;
  const auto ref_activity = ref.activity(kept_pairs, activity_deadline);
  if (!ref_activity.is_null()) {
    const auto cand_activity = cand.activity(kept_pairs, activity_deadline);
    out.details["activity"] = {{"reference", ref_activity}, {"candidate", cand_activity}};
    // Kernel time alone, without launch overhead or idle gaps: a second view of the speedup,
    // stable even where host overhead dominates the timed window.
    const auto outside = [](const nlohmann::json& a) {
      return a.value("kernels_outside_windows", 0) + a.value("copies_outside_windows", 0);
    };
    if (outside(cand_activity) > outside(ref_activity)) {
      out.findings.add(
          flag::kBackgroundWork,
          fmt::format("timing: {} kernels/copies of the candidate ran outside its timed "
                      "calls",
                      outside(cand_activity)));
    }
    // Streams other than the legacy default one (where the timer's own flush runs).
    const auto side_streams = [](const nlohmann::json& a) {
      std::size_t n = 0;
      const auto& default_stream = a.value("default_stream", nlohmann::json());
      for (const auto& s : a.value("streams", nlohmann::json::array())) {
        if (s != default_stream) ++n;
      }
      return n;
    };
    if (side_streams(cand_activity) > side_streams(ref_activity)) {
      out.findings.add(flag::kExtraStreams,
                       fmt::format("timing: the candidate used {} stream(s) besides the default "
                                   "one (the timer waits for all of them)",
                                   side_streams(cand_activity)));
    }
    const double ref_busy = ref_activity.value("busy_ms_median", 0.0);
    const double cand_busy = cand_activity.value("busy_ms_median", 0.0);
    if (ref_busy > 0 && cand_busy > 0) out.details["kernel_time_speedup"] = ref_busy / cand_busy;
  }
  return out;
}

}  // namespace cudal1
