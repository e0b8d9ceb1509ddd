#include "cudal1/eval/timing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <tuple>

#include "cudal1/common/unix_time.hpp"
#include "cudal1/eval/kernel_name.hpp"
#include "cudal1/eval/verdict.hpp"

namespace cudal1 {
namespace {

constexpr const char* kQueued = "queued";
constexpr const char* kWindow = "window";

// How both sides are being timed, and why not queued when not.
struct ClockChoice {
  std::string mode = kWindow;
  std::string reason;          // why the window clock, when "auto" asked for queued
  double hold_timeout_ms = 0;  // queued only
  bool traced = false;         // both workers record CUPTI activity (kernel times)
};

// The two sides' times of some pairs, pair by pair.
struct PairTimes {
  std::vector<double> reference_ms, candidate_ms;
  void add(double reference, double candidate) {
    reference_ms.push_back(reference);
    candidate_ms.push_back(candidate);
  }
};

// One side's view of the protocol: its worker, its input-set cursor and what it measured.
struct SideState {
  SideState(WorkerClient* w, Side s) : worker(w), side(s) {}

  WorkerClient* worker;
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
  Batch take_batch(const TimingConfig& config, const ClockChoice& clock_choice,
                   Clock::time_point hard_deadline, const GpuClock* clock,
                   const std::vector<bool>& traced, std::optional<std::size_t> check,
                   std::uint64_t check_seed, std::optional<std::size_t> unseen = std::nullopt) {
    const std::size_t count = traced.size();
    const auto begin = Clock::now();
    const auto deadline =
        std::min(hard_deadline,
                 begin + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                             config.call_timeout_s * static_cast<double>(count))));
    nlohmann::json sets = nlohmann::json::array();
    const std::size_t first_set = next_set;
    if (unseen) {
      sets.push_back({{"unseen", *unseen}});  // an input set of its own, used this once
    } else {
      for (std::size_t i = 0; i < count; ++i) sets.push_back(next_set++);
    }
    nlohmann::json request = {
        {"op", "sample"}, {"sets", sets}, {"mode", clock_choice.mode}, {"traced", traced}};
    if (clock_choice.mode == kQueued) request["hold_timeout_ms"] = clock_choice.hold_timeout_ms;
    // A random sample of each output's elements, the same positions on both sides, drawn
    // after the call has returned: cheap for outputs of hundreds of megabytes, and a stale
    // or partly computed result still differs at almost every sampled position. The checked
    // call is one of the batch, at a random place: nothing tells it apart while it runs.
    if (check) {
      request["check"] = {{"index", *check}, {"seed", check_seed}};
      if (config.spot_check_elements > 0) request["check"]["elements"] = config.spot_check_elements;
    }
    wire::Message reply = call_as(*worker, side, request, deadline);
    note_request(reply.header, seconds_since(begin) * 1e3);
    const double round_trip_ms = seconds_since(begin) * 1e3 / static_cast<double>(count);
    if (count > 1) batch_sample_s = round_trip_ms * 1e-3;
    const auto& listed = reply.header.at("samples");
    if (!listed.is_array() || listed.size() != count) {
      throw std::runtime_error(fmt::format("the {} worker returned {} samples for {} input sets",
                                           side == Side::kReference ? "reference" : "candidate",
                                           listed.is_array() ? listed.size() : 0, count));
    }
    const nlohmann::json steps = reply.header.value("steps_s", nlohmann::json::object());
    for (const auto& [step, step_s] : steps.items())
      step_ms[step].push_back(step_s.get<double>() * 1e3 / static_cast<double>(count));
    const auto mhz = clock ? clock->sm_mhz() : std::nullopt;
    Batch batch;
    batch.first_set = first_set;
    batch.samples.reserve(count);
    for (const auto& h : listed) {
      batch.samples.push_back(parse(h, mhz));
      overhead_ms.push_back(round_trip_ms - batch.samples.back().ms);
    }
    if (check) {
      batch.outputs_s = reply.header.value("outputs_s", 0.0);
      batch.checked = std::move(reply);
    }
    return batch;
  }

  void note_request(const nlohmann::json& header, double round_trip_ms) {
    if (header.contains("worker_s"))
      request_ms.push_back(round_trip_ms - header["worker_s"].get<double>() * 1e3);
  }

  static Sample parse(const nlohmann::json& h, std::optional<unsigned> clock_mhz) {
    return Sample{h.at("ms").get<double>(),
                  h.value("host_ms", 0.0),
                  h.value("mode", std::string(kWindow)),
                  h.value("held", false),
                  h.value("queued_unavailable", std::string()),
                  h.contains("kernel_ms") ? std::optional<double>(h["kernel_ms"].get<double>())
                                          : std::nullopt,
                  h.value("kernels", 0.0),
                  clock_mhz};
  }

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
  // and whose kernels.
  nlohmann::json activity(Clock::time_point deadline) {
    const nlohmann::json trace = call_as(*worker, side, {{"op", "activity"}}, deadline)
                                     .header.value("activity", nlohmann::json());
    if (!trace.is_object()) return nullptr;
    auto names = trace.value("kernel_names", std::vector<std::string>{});
    // A kernel is the candidate's own when its function's identifier is one the candidate
    // declares or built (read_kernel_name: a substring is not enough, PyTorch's kernels carry
    // the names of the functions that launch them).
    const auto is_own = [&](const KernelName& kernel) {
      return std::find(own_kernels.begin(), own_kernels.end(), kernel.identifier) !=
             own_kernels.end();
    };
    const auto own = static_cast<std::size_t>(
        std::count_if(names.begin(), names.end(),
                      [&](const std::string& name) { return is_own(read_kernel_name(name)); }));
    // Where the device time of a timed call went, by kernel (longest first).
    const double windows = trace.value("windows", 0.0);
    const double total_ns = trace.value("kernel_time_total_ns", 0.0);
    nlohmann::json top_kernels = nlohmann::json::array();
    for (const auto& k : trace.value("kernel_time", nlohmann::json::array())) {
      if (windows <= 0 || total_ns <= 0) break;
      const KernelName kernel = read_kernel_name(k.value("name", ""));
      const double ns = k.value("ns", 0.0);
      top_kernels.push_back({{"name", kernel.readable},
                             {"ms_per_call", ns / windows / 1e6},
                             {"launches_per_call", k.value("launches", 0.0) / windows},
                             {"share", ns / total_ns},
                             {"own", is_own(kernel)}});
    }
    // Enough names to see whose kernels ran; a candidate could launch thousands of distinct ones.
    constexpr std::size_t kMaxNames = 64;
    if (names.size() > kMaxNames) names.resize(kMaxNames);
    return {{"kernels_outside_windows", trace.value("outside_kernels", 0)},
            {"copies_outside_windows", trace.value("outside_copies", 0)},
            {"streams", trace.value("streams", nlohmann::json::array())},
            {"default_stream", trace.value("default_stream", nlohmann::json())},
            {"rotation_streams", trace.value("rotation_streams", 0)},
            {"kernel_names", names},
            {"own_kernels", own},
            {"top_kernels", top_kernels},
            {"dropped_records", trace.value("dropped_records", 0)}};
  }
};

struct Pools {
  std::size_t streams = 1;  // each side's calls run on these in turn (TimingConfig::streams)
  std::size_t pool = 0;     // input sets in each side's pool
  std::size_t unseen = 0;   // unseen input sets both sides have
  bool hidden = true;       // ... kept as bytes, out of the garbage collector's lists
};

Pools prepare_pools(SideState& ref, SideState& cand, const TimingConfig& config, std::uint64_t seed,
                    Clock::time_point deadline, nlohmann::json& details, Findings& findings) {
  nlohmann::json request = prepare_timing_request(config, seed);
  // Both workers build their pools at the same time (or have them already).
  auto [cand_reply, ref_reply] = call_both(*cand.worker, *ref.worker, request, deadline);
  std::size_t streams_used = 1;
  if (config.streams > 1) {
    const auto streams_of = [](const wire::Message& reply) {
      return reply.header.value("streams", std::size_t{1});
    };
    nlohmann::json streams = {{"asked", config.streams},
                              {"reference", streams_of(ref_reply)},
                              {"candidate", streams_of(cand_reply)}};
    for (const auto* reply : {&ref_reply, &cand_reply}) {
      if (reply->header.contains("streams_unavailable"))
        streams["unavailable"] = reply->header["streams_unavailable"];
    }
    if (streams_of(ref_reply) != streams_of(cand_reply)) {
      // Both sides the same way or not at all: the current stream on both.
      request.erase("streams");
      std::tie(cand_reply, ref_reply) = call_both(*cand.worker, *ref.worker, request, deadline);
      streams["reference"] = streams["candidate"] = 1;
    }
    streams_used = streams["reference"].get<std::size_t>();
    details["streams"] = streams;
  }
  details["input_sets"] = ref_reply.header.value("pool", 0);
  details["input_set_bytes"] = ref_reply.header.value("set_bytes", 0);
  Pools pools{streams_used,
              std::min(ref_reply.header.value("pool", std::size_t{0}),
                       cand_reply.header.value("pool", std::size_t{0})),
              std::min(ref_reply.header.value("unseen", std::size_t{0}),
                       cand_reply.header.value("unseen", std::size_t{0})),
              ref_reply.header.value("unseen_hidden", true) &&
                  cand_reply.header.value("unseen_hidden", true)};
  if (ref_reply.header.value("unseen_inputs", nlohmann::json()) !=
      cand_reply.header.value("unseen_inputs", nlohmann::json())) {
    findings.add(flag::kTampering,
                 "timing: the unseen input sets generated in the candidate's process differ "
                 "from the task's (patched sizes, get_inputs or random generators)");
    pools.unseen = 0;
  }
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
  return pools;
}

// Why a call probed on the queued clock does not allow it; "" when it was queued in full.
std::string queued_refusal(const SideState& side, const SideState::Sample& sample,
                           const ClockChoice& queued) {
  if (sample.mode != kQueued) return "queued clock unavailable: " + sample.queued_unavailable;
  if (sample.held) return "";
  return fmt::format(
      "the {}'s call could not be queued behind the hold within {:.0f} ms (it waits for the "
      "device, or queues more work than a stream takes)",
      side.side == Side::kReference ? "reference" : "candidate", queued.hold_timeout_ms);
}

// Pairs in a batch that fill about batch_s at `pair_s` seconds a pair.
std::size_t batch_fill(const TimingConfig& config, double pair_s) {
  if (config.max_batch <= 1 || pair_s <= 0) return 1;
  return std::clamp<std::size_t>(static_cast<std::size_t>(config.batch_s / pair_s), 1,
                                 config.max_batch);
}

// Warm-up on the window clock, then (mode "auto") a few calls per side on the queued clock: the
// queued clock is used only when every one of them was held.
ClockChoice warm_up(SideState& ref, SideState& cand, const TimingConfig& config,
                    std::size_t streams, Clock::time_point deadline, const GpuClock* clock,
                    nlohmann::json& details) {
  const auto start = Clock::now();
  ClockChoice choice;
  double ref_total = 0, cand_total = 0, slowest_host_ms = 0;
  std::size_t calls = 0;
  // A quarter of the budget at most: a slow model still leaves time for real samples.
  const double wall_cap_s = std::min(config.max_warmup_wall_s, config.budget_s / 4);
  // Every stream in turn gets a warm call at least (a library's first call on a stream may
  // allocate a workspace for it).
  const std::size_t min_calls = std::max(config.min_warmup_calls, streams);
  // One pair per request: no batch has been measured yet to size one.
  while (calls < min_calls ||
         ((ref_total < config.min_warmup_s * 1e3 || cand_total < config.min_warmup_s * 1e3) &&
          seconds_since(start) < wall_cap_s)) {
    const auto r = ref.take_batch(config, choice, deadline, clock, {true}, std::nullopt, 0);
    const auto c = cand.take_batch(config, choice, deadline, clock, {true}, std::nullopt, 0);
    const auto& rs = r.samples.front();
    const auto& cs = c.samples.front();
    choice.traced = rs.kernel_ms && cs.kernel_ms;
    ref_total += rs.ms;
    cand_total += cs.ms;
    // The first call may still compile or autotune; later ones show how long queuing takes.
    if (calls > 0 || config.min_warmup_calls <= 1)
      slowest_host_ms = std::max({slowest_host_ms, rs.host_ms, cs.host_ms});
    ++calls;
  }
  if (config.mode != kWindow) {
    ClockChoice queued{kQueued, "",
                       std::clamp(config.hold_timeout_factor * slowest_host_ms,
                                  config.hold_timeout_min_ms, config.hold_timeout_max_ms),
                       choice.traced};
    const std::vector<bool> traced(std::max<std::size_t>(1, config.queued_probe_calls), true);
    // Twice at most: a call left unqueued by chance (the host descheduled) gets a second try.
    for (int attempt = 0; attempt < 2; ++attempt) {
      queued.reason.clear();
      for (SideState* s : {&ref, &cand}) {
        const auto probe = s->take_batch(config, queued, deadline, clock, traced, std::nullopt, 0);
        for (const auto& sample : probe.samples) {
          queued.reason = queued_refusal(*s, sample, queued);
          if (!queued.reason.empty()) break;
        }
        calls += probe.samples.size();
        if (!queued.reason.empty()) break;
      }
      if (queued.reason.empty() || queued.reason.rfind("queued clock unavailable", 0) == 0) break;
      details["queued_probe_retried"] = true;
    }
    if (queued.reason.empty()) {
      choice = queued;
    } else {
      choice.reason = queued.reason;
    }
  }
  // A probe may have ended after one side's call: both sides take the same input set next, as
  // the spot checks require.
  ref.next_set = cand.next_set = std::max(ref.next_set, cand.next_set);
  for (SideState* s : {&ref, &cand}) {
    s->overhead_ms.clear();
    s->request_ms.clear();
  }
  details["warmup_calls"] = calls;
  details["mode"] = choice.mode;
  if (!choice.reason.empty()) details["mode_reason"] = choice.reason;
  if (choice.mode == kQueued) details["hold_timeout_ms"] = choice.hold_timeout_ms;
  return choice;
}

}  // namespace

nlohmann::json prepare_timing_request(const TimingConfig& config, std::uint64_t input_seed) {
  nlohmann::json request = {{"op", "prepare_timing"},
                            {"seed", input_seed},
                            {"pool_size", config.pool_size},
                            {"max_pool_bytes", config.max_pool_bytes}};
  if (config.streams > 1) request["streams"] = config.streams;
  // The first look's sets; a second look makes its own (more_unseen) when the first trips.
  if (config.unseen_pairs > 0) request["unseen"] = config.unseen_pairs;
  return request;
}

UnseenComparison compare_unseen(const std::vector<double>& seen_reference_ms,
                                const std::vector<double>& seen_candidate_ms,
                                const std::vector<double>& unseen_reference_ms,
                                const std::vector<double>& unseen_candidate_ms, double limit,
                                std::size_t min_seen, double z) {
  UnseenComparison out;
  // Log pair ratios (reference over candidate) of the pairs with both times above zero.
  const auto log_ratios = [](const std::vector<double>& ref, const std::vector<double>& cand) {
    std::vector<double> logs;
    for (std::size_t i = 0; i < ref.size() && i < cand.size(); ++i) {
      if (ref[i] > 0 && cand[i] > 0) logs.push_back(std::log(ref[i] / cand[i]));
    }
    return logs;
  };
  const std::vector<double> seen = log_ratios(seen_reference_ms, seen_candidate_ms);
  const std::vector<double> unseen = log_ratios(unseen_reference_ms, unseen_candidate_ms);
  if (seen.empty() || unseen.empty()) return out;
  out.speedup = median(unseen_reference_ms) / median(unseen_candidate_ms);
  out.seen_speedup = median(seen_reference_ms) / median(seen_candidate_ms);
  // Every difference of a seen pair's log ratio and an unseen one's: their median is the
  // Hodges-Lehmann shift, and the (C+1)-th smallest the low end of its interval, with C from
  // the Mann-Whitney statistic's normal approximation.
  std::vector<double> differences;
  differences.reserve(seen.size() * unseen.size());
  for (double x : seen) {
    for (double y : unseen) differences.push_back(x - y);
  }
  std::sort(differences.begin(), differences.end());
  out.inflation = std::exp(median(differences));
  const double n1 = static_cast<double>(seen.size());
  const double n2 = static_cast<double>(unseen.size());
  const double c = std::floor(n1 * n2 / 2 - z * std::sqrt(n1 * n2 * (n1 + n2 + 1) / 12));
  if (c < 0) return out;  // too few pairs for an interval: no verdict
  out.inflation_low = std::exp(differences[static_cast<std::size_t>(c)]);
  out.tripped = seen.size() >= min_seen && out.inflation_low > limit;
  return out;
}

std::size_t spot_check_mean_gap(double check_s, double plain_pair_s, std::size_t every,
                                double share) {
  share = std::clamp(share, 0.01, 1.0);
  const double by_cost = plain_pair_s > 0 ? check_s * (1 - share) / share / plain_pair_s : 0;
  return static_cast<std::size_t>(
      std::clamp(std::ceil(by_cost), static_cast<double>(std::max<std::size_t>(1, every)), 1e6));
}

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
  Pools pools =
      prepare_pools(ref, cand, config, input_seed, setup_deadline, out.details, out.findings);
  const std::size_t streams = pools.streams;

  const auto budget =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(config.budget_s));
  const auto grace = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(config.call_timeout_s));
  const auto warmup_start = Clock::now();
  ClockChoice clock_choice =
      warm_up(ref, cand, config, streams, Clock::now() + budget + grace, clock, out.details);
  out.details["warmup_s"] = seconds_since(warmup_start);

  const NoiseCriterion criterion(config.noise);
  std::mt19937_64 schedule(schedule_seed);
  std::vector<unsigned> clocks;
  std::vector<double> all_reference_ms, all_candidate_ms;  // throttled pairs included
  // Per pair of those and of the kept ones: the first call of its pool set in timing.
  std::vector<bool> all_first_use, kept_first_use;
  const auto start = Clock::now();
  const auto hard_deadline = start + budget + grace;
  std::size_t next_check = config.noise.min_samples;
  NoiseCriterion::Decision decision = NoiseCriterion::Decision::kContinue;
  TimingProgress state;
  // Spot checks: the first at a random pair among the first `spot_every`, then each after a
  // random gap averaging `spot_every` pairs, or more where large outputs make a check slow (the
  // device-to-host copies, the pipe and the comparison), so that checks take about
  // config.spot_check_share of the sampling time at most.
  const std::size_t spot_every = spot_check ? config.spot_check_every : 0;
  constexpr std::size_t kNoSpot = std::numeric_limits<std::size_t>::max();
  std::size_t next_spot = spot_every > 0 ? schedule() % spot_every : kNoSpot;
  std::size_t pair_index = 0, spot_checks = 0, spot_pairs = 0;
  double spot_check_s = 0;  // pairs that returned their outputs, and comparing them
  // After a check that took check_s, with `taken` pairs so far.
  const auto schedule_next_spot = [&](double check_s, std::size_t taken) {
    const double plain_s = (seconds_since(start) - spot_check_s) /
                           static_cast<double>(std::max<std::size_t>(1, taken - spot_pairs));
    const std::size_t mean_gap =
        spot_check_mean_gap(check_s, plain_s, spot_every, config.spot_check_share);
    next_spot = taken + schedule() % (2 * mean_gap);
  };
  // On the window clock, which counts the host's time, CUPTI's cost per launch would count too:
  // pairs are timed untraced, and a random pair in about every kTracedEvery is traced for the
  // kernel statistics and not kept as a sample (on the queued clock every call is traced).
  constexpr std::size_t kTracedEvery = 8;
  std::size_t next_traced = schedule() % kTracedEvery, traced_pairs = 0;
  std::vector<double> traced_reference_ms, traced_candidate_ms;  // what the trace costs
  std::size_t batches = 0;  // requests that took more than one pair
  std::size_t unqueued_pairs = 0;
  auto check_pair = [&](const wire::Message& r, const wire::Message& c, std::size_t at) {
    ++spot_checks;
    const std::string problem = spot_check(c, r);
    if (!problem.empty()) {
      out.findings.add(flag::kCachedOutput,
                       fmt::format("timing sample {}: outputs differ from the reference's for the "
                                   "same inputs although the trials matched: {}",
                                   at + 1, problem));
    }
  };

  // What one pair adds (pair_index already counts it): false when sampling must stop (the noise
  // criterion decided) or start over (the queued clock failed) before the rest of its batch.
  const auto add_pair = [&](const SideState::Sample& ref_sample,
                            const SideState::Sample& cand_sample, bool traced_pair,
                            std::size_t set) -> bool {
    // The first time timing calls this pool set (warm-up took the first ones): its values are
    // as new to the candidate as an unseen set's.
    const bool first_use = set < pools.pool;
    const bool window = clock_choice.mode == kWindow;
    if (clock_choice.mode == kQueued && !(ref_sample.held && cand_sample.held) &&
        unqueued_pairs < config.max_unqueued_pairs) {
      ++unqueued_pairs;  // dropped: a call left unqueued by chance
      out.details["unqueued_pairs_dropped"] = unqueued_pairs;
      return true;
    }
    if (clock_choice.mode == kQueued && !(ref_sample.held && cand_sample.held)) {
      // A call that queued in warm-up no longer does: the clocks of the samples so far cannot be
      // mixed with window ones, so sampling starts over on the window clock.
      clock_choice = ClockChoice{
          kWindow,
          fmt::format("the {}'s call at timed pair {} could not be queued behind the hold; "
                      "restarted on the window clock",
                      ref_sample.held ? "candidate" : "reference", pair_index),
          0, clock_choice.traced};
      next_traced = pair_index + schedule() % kTracedEvery;
      out.details["mode"] = clock_choice.mode;
      out.details["mode_reason"] = clock_choice.reason;
      all_reference_ms.clear();
      all_candidate_ms.clear();
      all_first_use.clear();
      kept_first_use.clear();
      ref.forget_kept();
      cand.forget_kept();
      out.reference_ms.clear();
      out.candidate_ms.clear();
      out.discarded = 0;
      clocks.clear();
      next_check = config.noise.min_samples;
      return false;
    }

    if (window && traced_pair) {
      if (ref_sample.kernel_ms && cand_sample.kernel_ms) {
        ref.keep_kernels(ref_sample);
        cand.keep_kernels(cand_sample);
      }
      traced_reference_ms.push_back(ref_sample.ms);
      traced_candidate_ms.push_back(cand_sample.ms);
      ++traced_pairs;
      return true;
    }
    all_reference_ms.push_back(ref_sample.ms);
    all_candidate_ms.push_back(cand_sample.ms);
    all_first_use.push_back(first_use);
    bool throttled = false;
    for (const auto* s : {&ref_sample, &cand_sample}) {
      if (!s->clock_mhz) continue;
      clocks.push_back(*s->clock_mhz);
      if (clock && *s->clock_mhz < config.clock_floor * clock->reference_mhz()) throttled = true;
    }
    if (throttled) {
      ++out.discarded;
      return true;
    }
    out.reference_ms.push_back(ref_sample.ms);
    out.candidate_ms.push_back(cand_sample.ms);
    kept_first_use.push_back(first_use);
    ref.keep_host(ref_sample);
    cand.keep_host(cand_sample);
    if (ref_sample.kernel_ms && cand_sample.kernel_ms) {
      ref.keep_kernels(ref_sample);
      cand.keep_kernels(cand_sample);
    }

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
      if (decision != NoiseCriterion::Decision::kContinue) return false;
    }
    return true;
  };

  // Pairs the next request takes: as many as fill about batch_s at the rate of the last batch,
  // up to the next noise check.
  const auto batch_size = [&]() -> std::size_t {
    std::size_t k = batch_fill(config, ref.batch_sample_s + cand.batch_sample_s);
    const std::size_t kept = out.reference_ms.size();
    if (next_check > kept) k = std::min(k, next_check - kept);
    return std::max<std::size_t>(1, k);
  };

  // The budget ends sampling, but never before a pair could count: where calls are longer than
  // the budget (a first round's share of it, on a slow or busy machine), the only pair taken may
  // be a traced one or one dropped as unqueued, and neither is a sample. Throttled pairs count
  // here (with nothing better, the result reports them).
  const auto sampling_time_left = [&] {
    const auto now = Clock::now();
    return now < start + budget || (all_reference_ms.empty() && now < hard_deadline);
  };
  while (decision == NoiseCriterion::Decision::kContinue && sampling_time_left()) {
    // Random order within each batch of pairs: neither side systematically runs on a warmer
    // device.
    const bool reference_first = (schedule() & 1) != 0;
    std::array<SideState*, 2> order = {&ref, &cand};
    if (!reference_first) std::swap(order[0], order[1]);
    const bool window = clock_choice.mode == kWindow;
    const std::size_t count = batch_size();
    // Which pairs of the batch are traced (the window clock traces a random one in about every
    // kTracedEvery; the queued clock all), and which one is spot-checked.
    std::vector<bool> traced(count, !window);
    if (window && clock_choice.traced) {
      while (next_traced < pair_index + count) {
        traced[next_traced - pair_index] = true;
        next_traced += 1 + schedule() % (2 * kTracedEvery);
      }
    }
    std::optional<std::size_t> check;
    if (next_spot < pair_index + count) check = next_spot - pair_index;
    const std::uint64_t check_seed = check ? schedule() : 0;
    const auto batch_start = Clock::now();
    std::array<SideState::Batch, 2> taken;
    for (int i = 0; i < 2; ++i) {
      taken[i] = order[i]->take_batch(config, clock_choice, hard_deadline, clock, traced, check,
                                      check_seed);
    }
    const auto& ref_batch = reference_first ? taken[0] : taken[1];
    const auto& cand_batch = reference_first ? taken[1] : taken[0];
    if (count > 1) ++batches;
    if (check) {
      const auto check_start = Clock::now();
      check_pair(*ref_batch.checked, *cand_batch.checked, pair_index + *check);
      // What the check added: the comparison here and both workers' copies of the outputs (a
      // batch of one is all check).
      const double check_s =
          count == 1 ? seconds_since(batch_start)
                     : seconds_since(check_start) + ref_batch.outputs_s + cand_batch.outputs_s;
      spot_check_s += check_s;
      ++spot_pairs;
      schedule_next_spot(check_s, pair_index + count);
    }
    for (std::size_t i = 0; i < count; ++i) {
      ++pair_index;
      if (!add_pair(ref_batch.samples[i], cand_batch.samples[i], traced[i],
                    ref_batch.first_set + i))
        break;
    }
    // Both sides go on with the next input set (a stop inside the batch skips the rest).
    ref.next_set = cand.next_set = std::max(ref.next_set, cand.next_set);
  }

  // One more pair after the last, not timed, so that a spot check always follows every sample.
  const double sampling_s = seconds_since(start);
  if (spot_every > 0) {
    const auto pair_start = Clock::now();
    const std::uint64_t check_seed = schedule();
    const auto r =
        ref.take_batch(config, clock_choice, hard_deadline, clock, {true}, 0, check_seed);
    const auto c =
        cand.take_batch(config, clock_choice, hard_deadline, clock, {true}, 0, check_seed);
    check_pair(*r.checked, *c.checked, pair_index);
    spot_check_s += seconds_since(pair_start);
  }
  // The candidate's speedup on input values it has not seen before, next to its speedup on pool
  // sets timing had called before (where a cache keyed on values hits): the first are pairs on
  // input sets of their own (unseen sets, each spot-checked), and the pool's pairs on a set's
  // first call in timing (as new to the candidate; a slow or loaded machine may go round the
  // pool only once or twice).
  PairTimes first_seen, first_unseen;
  for (std::size_t i = 0; i < out.reference_ms.size() && i < kept_first_use.size(); ++i)
    (kept_first_use[i] ? first_unseen : first_seen).add(out.reference_ms[i], out.candidate_ms[i]);
  const std::size_t first_use_pairs = first_unseen.reference_ms.size();
  // Pairs on seen sets needed for a comparison: with fewer, the median is the first calls'.
  constexpr std::size_t kMinSeenPairs = 5;
  if (spot_every > 0 && config.unseen_pairs > 0 && first_seen.reference_ms.size() < kMinSeenPairs) {
    out.details["unseen"] = {{"skipped", fmt::format("{} pair(s) on pool sets timing had called "
                                                     "before: a cache keyed on input values had "
                                                     "little to gain",
                                                     first_seen.reference_ms.size())},
                             {"first_use_pairs", first_use_pairs}};
  } else if (spot_every > 0 && config.unseen_pairs > 0) {
    const auto unseen_start = Clock::now();
    nlohmann::json record = {
        {"available", pools.unseen}, {"hidden", pools.hidden}, {"limit", config.unseen_limit}};
    std::size_t next_unseen = 0, unqueued = 0;
    const std::vector<bool> traced = {clock_choice.mode != kWindow};
    // One pair, alone in its requests and spot-checked: on the next unseen set, or on the next
    // pool set. Adds it to `unseen` when its values were new to the candidate, else to `seen`.
    const auto take_pair = [&](bool on_unseen_set, PairTimes& unseen, PairTimes& seen) {
      const std::optional<std::size_t> set =
          on_unseen_set ? std::optional<std::size_t>(next_unseen++) : std::nullopt;
      const bool reference_first = (schedule() & 1) != 0;
      const std::uint64_t check_seed = schedule();
      std::array<SideState*, 2> order = {&ref, &cand};
      if (!reference_first) std::swap(order[0], order[1]);
      std::array<SideState::Batch, 2> taken;
      for (int k = 0; k < 2; ++k) {
        taken[k] = order[k]->take_batch(config, clock_choice, hard_deadline, clock, traced, 0,
                                        check_seed, set);
      }
      ref.next_set = cand.next_set = std::max(ref.next_set, cand.next_set);
      const auto& r = reference_first ? taken[0] : taken[1];
      const auto& c = reference_first ? taken[1] : taken[0];
      ++spot_checks;
      const std::string problem = spot_check(*c.checked, *r.checked);
      if (!problem.empty()) {
        out.findings.add(flag::kCachedOutput,
                         set ? fmt::format("unseen input set {}: outputs differ from the "
                                           "reference's for the same inputs although the trials "
                                           "matched: {}",
                                           *set + 1, problem)
                             : fmt::format("timing sample {}: outputs differ from the "
                                           "reference's for the same inputs although the trials "
                                           "matched: {}",
                                           r.first_set + 1, problem));
      }
      PairTimes& group = set || r.first_set < pools.pool ? unseen : seen;
      const auto& rs = r.samples.front();
      const auto& cs = c.samples.front();
      if (clock_choice.mode == kQueued && !(rs.held && cs.held)) {
        // A call that could not be queued is not dropped (a candidate slow to launch only on
        // values it has not seen would leave no evidence): the pair counts on the host's clock,
        // which holds everything the call took.
        ++unqueued;
        group.add(rs.host_ms, cs.host_ms);
        return;
      }
      group.add(rs.ms, cs.ms);
    };
    // The first look: the unseen sets made before timing, against every pair sampling took.
    for (std::size_t i = 0; i < config.unseen_pairs && next_unseen < pools.unseen; ++i)
      take_pair(true, first_unseen, first_seen);
    // The first look at 99 %; the second, a controlled comparison that only a first look over
    // the limit leads to, at 95 %.
    const auto compare = [&](const PairTimes& seen, const PairTimes& unseen, double z) {
      return compare_unseen(seen.reference_ms, seen.candidate_ms, unseen.reference_ms,
                            unseen.candidate_ms, config.unseen_limit, kMinSeenPairs, z);
    };
    UnseenComparison comparison = compare(first_seen, first_unseen, 2.576);
    const PairTimes* shown_unseen = &first_unseen;
    record["pairs"] = first_unseen.reference_ms.size() - first_use_pairs;  // on unseen sets
    record["first_use_pairs"] = first_use_pairs;
    record["seen_pairs"] = first_seen.reference_ms.size();
    PairTimes second_unseen, second_seen;
    // Over the limit, or not decisive with its point over it (four unseen pairs against
    // hundreds on a loaded machine: a cache at 8x had an inflation_low of 1.28 at 99 %).
    if (comparison.tripped || comparison.inflation > config.unseen_limit) {
      record["first_look"] = {{"inflation", comparison.inflation},
                              {"inflation_low", comparison.inflation_low},
                              {"speedup", comparison.speedup},
                              {"pool_speedup", comparison.seen_speedup}};
      // The second look decides: as many new unseen sets, their pairs among four times as many
      // pool pairs in random order, in one stretch of time, compared with each other only (the
      // load of a machine changes between sampling and the pairs after it; here it falls on
      // both groups alike). Both sides make the sets now, from the same seeds, or the
      // candidate's process changed the task's generators.
      // A look: new unseen sets, their pairs among four times as many pool pairs in random
      // order, added to the second look's. False when the sets could not be made alike.
      const auto look = [&] {
        auto [c_more, r_more] =
            call_both(*cand.worker, *ref.worker,
                      {{"op", "more_unseen"}, {"count", config.unseen_pairs}}, hard_deadline);
        const auto& made = r_more.header.at("unseen_inputs");
        if (made != c_more.header.at("unseen_inputs") ||
            r_more.header.value("first", std::size_t{0}) != pools.unseen ||
            c_more.header.value("first", std::size_t{0}) != pools.unseen) {
          out.findings.add(flag::kTampering,
                           "timing: the unseen input sets generated in the candidate's process "
                           "differ from the task's (patched sizes, get_inputs or random "
                           "generators)");
          return false;
        }
        const std::size_t new_sets = made.size();
        pools.unseen += new_sets;
        std::vector<bool> plan(new_sets, true);
        plan.resize(5 * new_sets, false);
        std::shuffle(plan.begin(), plan.end(), schedule);
        for (const bool on_unseen_set : plan) take_pair(on_unseen_set, second_unseen, second_seen);
        return new_sets > 0;
      };
      // A first look over the limit at 99 % is strong evidence that load drift between sampling
      // and the unseen pairs may still explain; the second look, whose pairs share one stretch
      // of time, then confirms it when its own 95 % interval excludes no gain (inflation_low
      // over 1) and its point is over the limit. A first look that was only not decisive needs
      // the second look over the limit on its own.
      const bool strong_first = comparison.tripped;
      const auto confirmed = [&] {
        return strong_first && comparison.inflation > config.unseen_limit &&
               comparison.inflation_low > 1.0;
      };
      const auto decided = [&] {
        // After a strong first look, a few unseen pairs under the limit do not clear it (a
        // burst of load on the reference's 4 calls did): all looks are taken.
        return comparison.tripped || confirmed() ||
               (!strong_first && comparison.inflation <= config.unseen_limit);
      };
      std::size_t looks = 0;
      bool alike = look();
      ++looks;
      comparison = compare(second_seen, second_unseen, 1.96);
      // Not decided (over the limit, its interval reaching under what decides: a few unseen
      // pairs on a loaded machine): look again with as many more sets, at most twice.
      constexpr std::size_t kMaxLooks = 3;
      while (alike && looks < kMaxLooks && !decided()) {
        alike = look();
        ++looks;
        comparison = compare(second_seen, second_unseen, 1.96);
      }
      if (!comparison.tripped && confirmed()) {
        comparison.tripped = true;
        record["confirmed"] = true;
      }
      shown_unseen = &second_unseen;
      record["second_look"] = {{"unseen_pairs", second_unseen.reference_ms.size()},
                               {"seen_pairs", second_seen.reference_ms.size()},
                               {"looks", looks}};
      // Too few pool pairs on seen sets in it (the pool barely used): no verdict.
      if (second_seen.reference_ms.size() < kMinSeenPairs) comparison.tripped = false;
    }
    record["available"] = pools.unseen;
    if (unqueued > 0) record["unqueued_pairs"] = unqueued;
    if (comparison.speedup > 0) {
      record["reference_ms"] = median(shown_unseen->reference_ms);
      record["candidate_ms"] = median(shown_unseen->candidate_ms);
      record["speedup"] = comparison.speedup;
      record["pool_speedup"] = comparison.seen_speedup;
      record["inflation"] = comparison.inflation;
      record["inflation_low"] = comparison.inflation_low;
      if (comparison.tripped) {
        out.findings.add(
            flag::kCachedOutput,
            fmt::format("in {} calls on input values it had never seen, the candidate's speedup "
                        "was {:.3g} ({:.4g} ms against the reference's {:.4g} ms), in pairs on "
                        "inputs it had seen before, taken among them, {:.3g}: {:.3g} times "
                        "faster on inputs seen before ({:.3g} at least, by a 95 % interval of "
                        "the pairs' ratios; the limit is {:.3g}), the mark of results kept by "
                        "input content",
                        shown_unseen->reference_ms.size(), comparison.speedup,
                        median(shown_unseen->candidate_ms), median(shown_unseen->reference_ms),
                        comparison.seen_speedup, comparison.inflation, comparison.inflation_low,
                        config.unseen_limit));
      }
    } else {
      record["skipped"] = "no call on unseen input values to compare with";
    }
    record["s"] = seconds_since(unseen_start);
    out.details["unseen"] = record;
  }
  out.details["spot_checks"] = spot_checks;
  out.details["spot_check_s"] = spot_check_s;
  if (clock_choice.mode == kWindow && clock_choice.traced) {
    out.details["traced_pairs"] = traced_pairs;
    // The traced pairs' own window times: next to the medians, the trace's cost in this process.
    if (!traced_reference_ms.empty()) {
      out.details["traced_window_ms"] = {{"reference", median(traced_reference_ms)},
                                         {"candidate", median(traced_candidate_ms)}};
    }
  }
  out.details["sampling_s"] = sampling_s;
  out.details["batches"] = batches;

  // With (nearly) every sample throttled there is nothing better to report than all samples;
  // the result cannot have converged and is flagged noisy.
  if (out.reference_ms.size() < config.noise.min_samples &&
      all_reference_ms.size() > out.reference_ms.size()) {
    out.reference_ms = all_reference_ms;
    kept_first_use = all_first_use;
    out.candidate_ms = all_candidate_ms;
    decision = NoiseCriterion::Decision::kContinue;
    out.details["throttled_samples_used"] = true;
  }
  if (out.reference_ms.empty())
    throw std::runtime_error("no timing sample could be taken within the time budget");
  out.reference_median_ms = median(out.reference_ms);
  out.candidate_median_ms = median(out.candidate_ms);
  out.speedup = out.reference_median_ms / out.candidate_median_ms;
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
  if (!ref.request_ms.empty() && !cand.request_ms.empty()) {
    out.details["request_ms"] = {{"reference", median(ref.request_ms)},
                                 {"candidate", median(cand.request_ms)}};
  }
  // Where a sample's time goes in the workers (median over the requests, per sample).
  for (const SideState* s : {&ref, &cand}) {
    nlohmann::json steps = nlohmann::json::object();
    for (const auto& [step, values] : s->step_ms) steps[step] = median(values);
    if (!steps.empty())
      out.details["sample_steps_ms"][s->side == Side::kReference ? "reference" : "candidate"] =
          steps;
  }
  if (!clocks.empty()) {
    std::vector<double> mhz(clocks.begin(), clocks.end());
    out.details["sm_clock_mhz"] = {{"median", median(mhz)}, {"min", quantile(mhz, 0.0)}};
  }
  const auto activity_start = Clock::now();
  const auto activity_deadline = activity_start + grace;
  if (!ref.kept_host_ms.empty()) {
    // The host's wall time for the call until its work finished: on the queued clock the
    // launch overhead the speedup leaves out is visible here.
    out.details["host_ms"] = {{"reference", median(ref.kept_host_ms)},
                              {"candidate", median(cand.kept_host_ms)}};
  }
  const bool traced = !ref.kept_kernel_ms.empty();
  const double ref_kernel_ms = traced ? median(ref.kept_kernel_ms) : 0;
  const double cand_kernel_ms = traced ? median(cand.kept_kernel_ms) : 0;
  if (traced) {
    // Kernel time alone, without launch overhead or idle gaps: a second view of the speedup.
    out.details["kernel_ms"] = {{"reference", ref_kernel_ms}, {"candidate", cand_kernel_ms}};
    if (ref_kernel_ms > 0 && cand_kernel_ms > 0)
      out.details["kernel_time_speedup"] = ref_kernel_ms / cand_kernel_ms;
  }
  auto ref_activity = ref.activity(activity_deadline);
  if (!ref_activity.is_null()) {
    auto cand_activity = cand.activity(activity_deadline);
    if (traced) {
      ref_activity["busy_ms_median"] = ref_kernel_ms;
      ref_activity["kernels_per_call"] = median(ref.kept_kernels);
      cand_activity["busy_ms_median"] = cand_kernel_ms;
      cand_activity["kernels_per_call"] = median(cand.kept_kernels);
    }
    out.details["activity"] = {{"reference", ref_activity}, {"candidate", cand_activity}};
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
  }
  out.details["activity_s"] = seconds_since(activity_start);
  return out;
}

}  // namespace cudal1
