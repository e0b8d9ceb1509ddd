// One side's requests while it is timed: batches of samples, and its worker's trace.
#include <fmt/format.h>

#include <algorithm>

#include "cudal1/common/unix_time.hpp"
#include "cudal1/eval/kernel_name.hpp"
#include "cudal1/eval/timing_run.hpp"
#include "cudal1/worker/protocol.hpp"

namespace cudal1 {

namespace proto = worker_protocol;

TimingSide::Batch TimingSide::take_batch(const TimingConfig& config,
                                         const ClockChoice& clock_choice,
                                         Clock::time_point hard_deadline, const GpuClock* clock,
                                         const std::vector<bool>& traced,
                                         std::optional<std::size_t> check, std::uint64_t check_seed,
                                         std::optional<std::size_t> unseen) {
  const std::size_t count = traced.size();
  const auto begin = Clock::now();
  const auto deadline =
      std::min(hard_deadline,
               begin + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                           config.call_timeout_s * static_cast<double>(count))));
  nlohmann::json sets = nlohmann::json::array();
  const std::size_t first_set = next_set;
  if (unseen) {
    sets.push_back(
        {{proto::request::kUnseen, *unseen}});  // an input set of its own, used this once
  } else {
    for (std::size_t i = 0; i < count; ++i) sets.push_back(next_set++);
  }
  nlohmann::json request = {{proto::request::kOp, proto::op::kSample},
                            {proto::request::kSets, sets},
                            {proto::request::kMode, clock_choice.mode},
                            {proto::request::kTraced, traced}};
  if (clock_choice.mode == proto::timing_mode::kQueued)
    request[proto::request::kHoldTimeoutMs] = clock_choice.hold_timeout_ms;
  // A random sample of each output's elements, the same positions on both sides, drawn after the
  // call has returned: cheap for outputs of hundreds of megabytes, and a stale or partly
  // computed result still differs at almost every sampled position. The checked call is one of
  // the batch, at a random place: nothing tells it apart while it runs.
  if (check) {
    request[proto::request::kCheck] = {{proto::request::kCheckIndex, *check},
                                       {proto::request::kCheckSeed, check_seed}};
    if (config.spot_check_elements > 0)
      request[proto::request::kCheck][proto::request::kCheckElements] = config.spot_check_elements;
  }
  wire::Message reply = link->call(side, request, deadline);
  note_request(reply.header, seconds_since(begin) * 1e3);
  const double round_trip_ms = seconds_since(begin) * 1e3 / static_cast<double>(count);
  if (count > 1) batch_sample_s = round_trip_ms * 1e-3;
  const auto& listed = reply.header.at(proto::reply::kSamples);
  if (!listed.is_array() || listed.size() != count) {
    throw std::runtime_error(fmt::format("the {} worker returned {} samples for {} input sets",
                                         name(), listed.is_array() ? listed.size() : 0, count));
  }
  const nlohmann::json steps = reply.header.value(proto::reply::kStepsS, nlohmann::json::object());
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
    batch.outputs_s = reply.header.value(proto::reply::kOutputsS, 0.0);
    batch.checked = std::move(reply);
  }
  return batch;
}

void TimingSide::note_request(const nlohmann::json& header, double round_trip_ms) {
  if (header.contains(proto::reply::kWorkerS))
    request_ms.push_back(round_trip_ms - header[proto::reply::kWorkerS].get<double>() * 1e3);
}

TimingSide::Sample TimingSide::parse(const nlohmann::json& h, std::optional<unsigned> clock_mhz) {
  return Sample{h.at(proto::reply::kMs).get<double>(),
                h.value(proto::reply::kHostMs, 0.0),
                h.value(proto::reply::kMode, std::string(proto::timing_mode::kWindow)),
                h.value(proto::reply::kHeld, false),
                h.value(proto::reply::kQueuedUnavailable, std::string()),
                h.contains(proto::reply::kKernelMs)
                    ? std::optional<double>(h[proto::reply::kKernelMs].get<double>())
                    : std::nullopt,
                h.value(proto::reply::kKernels, 0.0),
                clock_mhz};
}

nlohmann::json TimingSide::activity(Clock::time_point deadline) {
  const nlohmann::json trace =
      link->call(side, {{proto::request::kOp, proto::op::kActivity}}, deadline)
          .header.value(proto::reply::kActivity, nlohmann::json());
  if (!trace.is_object()) return nullptr;
  auto names = trace.value(proto::activity::kKernelNames, std::vector<std::string>{});
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
  const double windows = trace.value(proto::activity::kWindows, 0.0);
  const double total_ns = trace.value(proto::activity::kKernelTimeTotalNs, 0.0);
  nlohmann::json top_kernels = nlohmann::json::array();
  for (const auto& k : trace.value(proto::activity::kKernelTime, nlohmann::json::array())) {
    if (windows <= 0 || total_ns <= 0) break;
    const KernelName kernel = read_kernel_name(k.value(proto::activity::kKernelName, ""));
    const double ns = k.value(proto::activity::kKernelNs, 0.0);
    top_kernels.push_back(
        {{"name", kernel.readable},
         {"ms_per_call", ns / windows / 1e6},
         {"launches_per_call", k.value(proto::activity::kKernelLaunches, 0.0) / windows},
         {"share", ns / total_ns},
         {"own", is_own(kernel)}});
  }
  // Enough names to see whose kernels ran; a candidate could launch thousands of distinct ones.
  constexpr std::size_t kMaxNames = 64;
  if (names.size() > kMaxNames) names.resize(kMaxNames);
  return {
      {"kernels_outside_windows", trace.value(proto::activity::kOutsideKernels, 0)},
      {"copies_outside_windows", trace.value(proto::activity::kOutsideCopies, 0)},
      {"outside_at_window_end", trace.value(proto::activity::kOutsideAtWindowEnd, 0)},
      {"outside_overshoot_ns", trace.value(proto::activity::kOutsideOvershootNs, 0)},
      {"outside_before_harness", trace.value(proto::activity::kOutsideBeforeHarness, 0)},
      {"outside_examples", trace.value(proto::activity::kOutsideExamples, nlohmann::json::array())},
      {"trace_shift", trace.value(proto::activity::kTraceShift, nlohmann::json())},
      {"untraced_window_records", trace.value(proto::activity::kUntracedWindowRecords, 0)},
      {"streams", trace.value(proto::activity::kStreams, nlohmann::json::array())},
      {"default_stream", trace.value(proto::activity::kDefaultStream, nlohmann::json())},
      {"rotation_streams", trace.value(proto::activity::kRotationStreams, 0)},
      {"kernel_names", names},
      {"own_kernels", own},
      {"top_kernels", top_kernels},
      {"dropped_records", trace.value(proto::activity::kDroppedRecords, 0)}};
}

std::string queued_refusal(const TimingSide& side, const TimingSide::Sample& sample,
                           const ClockChoice& queued) {
  if (sample.mode != proto::timing_mode::kQueued)
    return "queued clock unavailable: " + sample.queued_unavailable;
  if (sample.held) return "";
  return fmt::format(
      "the {}'s call could not be queued behind the hold within {:.0f} ms (it waits for the "
      "device, or queues more work than a stream takes)",
      side.name(), queued.hold_timeout_ms);
}

}  // namespace cudal1
