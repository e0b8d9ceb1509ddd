// measure_speedup: one timing run (timing_run.hpp) between two worker processes.
#include "cudal1/eval/timing.hpp"

#include <algorithm>

#include "cudal1/common/unix_time.hpp"
#include "cudal1/eval/correctness.hpp"
#include "cudal1/eval/timing_rules.hpp"
#include "cudal1/eval/timing_run.hpp"
#include "cudal1/worker/protocol.hpp"

namespace cudal1 {

namespace proto = worker_protocol;
namespace {

// The two worker processes of an evaluation as TimingRun's link to them.
class WorkerClientLink : public TimingLink {
 public:
  WorkerClientLink(WorkerClient& reference, WorkerClient& candidate)
      : reference_(reference), candidate_(candidate) {}

  wire::Message call(Side side, const nlohmann::json& request,
                     Clock::time_point deadline) override {
    return call_as(side == Side::kReference ? reference_ : candidate_, side, request, deadline);
  }
  std::pair<wire::Message, wire::Message> call_both(const nlohmann::json& request,
                                                    Clock::time_point deadline) override {
    return cudal1::call_both(candidate_, reference_, request, deadline);
  }

 private:
  WorkerClient& reference_;
  WorkerClient& candidate_;
};

}  // namespace

nlohmann::json prepare_timing_request(const TimingConfig& config, std::uint64_t input_seed) {
  nlohmann::json request = {{proto::request::kOp, proto::op::kPrepareTiming},
                            {proto::request::kSeed, input_seed},
                            {proto::request::kPoolSize, config.pool_size},
                            {proto::request::kMaxPoolBytes, config.max_pool_bytes}};
  if (config.streams > 1) request[proto::request::kStreams] = config.streams;
  // The first look's sets; a second look makes its own (more_unseen) when the first trips.
  if (config.unseen_pairs > 0) request[proto::request::kUnseen] = config.unseen_pairs;
  return request;
}

Prewarm prewarm_timing(WorkerClient& reference, WorkerClient& candidate, const TimingConfig& config,
                       DeviceHolds& holds, Clock::time_point deadline) {
  TimingConfig unwarmed = config;
  unwarmed.prewarmed_sets = 0;
  const WarmupRule rule(unwarmed, std::max<std::size_t>(1, config.streams));
  const auto start = Clock::now();
  Prewarm done;
  std::size_t batch = 1;
  double reference_ms = 0, candidate_ms = 0;
  const auto summed_ms = [](const wire::Message& reply) {
    double ms = 0;
    for (const auto& sample : reply.header.at(proto::reply::kSamples))
      ms += sample.at(proto::reply::kMs).get<double>();
    return ms;
  };
  while (rule.more(done.sets, reference_ms, candidate_ms, seconds_since(start))) {
    nlohmann::json listed = nlohmann::json::array();
    for (std::size_t i = 0; i < batch; ++i) listed.push_back(done.sets + i);
    const nlohmann::json request = {{proto::request::kOp, proto::op::kSample},
                                    {proto::request::kSets, listed},
                                    {proto::request::kMode, proto::timing_mode::kWindow},
                                    {proto::request::kTraced, std::vector<bool>(batch, true)}};
    const auto asked = Clock::now();
    const auto [candidate_reply, reference_reply] =
        call_both_on_device(candidate, reference, request, holds, deadline);
    reference_ms += summed_ms(reference_reply);
    candidate_ms += summed_ms(candidate_reply);
    done.sets += batch;
    ++done.requests;
    // One pair at first (a first call may still be slow); then about batch_s of calls a request.
    const double per_call_s = seconds_since(asked) / static_cast<double>(batch);
    batch = static_cast<std::size_t>(std::clamp(config.batch_s / std::max(per_call_s, 1e-6), 1.0,
                                                static_cast<double>(config.max_batch)));
  }
  done.seconds = seconds_since(start);
  return done;
}

TimingOutcome measure_speedup(WorkerClient& reference, WorkerClient& candidate,
                              const TimingConfig& config, std::uint64_t input_seed,
                              std::uint64_t schedule_seed, const GpuClock* clock,
                              const TimingProgressCallback& progress, const SpotCheck& spot_check) {
  WorkerClientLink workers(reference, candidate);
  return TimingRun(workers, config, input_seed, schedule_seed, clock, progress, spot_check).run();
}

}  // namespace cudal1
