// measure_speedup: one timing run (timing_run.hpp) between two worker processes.
#include "cudal1/eval/timing.hpp"

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

TimingOutcome measure_speedup(WorkerClient& reference, WorkerClient& candidate,
                              const TimingConfig& config, std::uint64_t input_seed,
                              std::uint64_t schedule_seed, const GpuClock* clock,
                              const TimingProgressCallback& progress, const SpotCheck& spot_check) {
  WorkerClientLink workers(reference, candidate);
  return TimingRun(workers, config, input_seed, schedule_seed, clock, progress, spot_check).run();
}

}  // namespace cudal1
