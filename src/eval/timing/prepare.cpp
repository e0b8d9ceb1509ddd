// The first phase of a timing run: both workers make their pools of input sets.
#include <tuple>

#include "cudal1/eval/defenses.hpp"
#include "cudal1/eval/timing_run.hpp"
#include "cudal1/worker/protocol.hpp"

namespace cudal1 {

namespace proto = worker_protocol;

TimingRun::TimingRun(TimingLink& workers, const TimingConfig& config, std::uint64_t input_seed,
                     std::uint64_t schedule_seed, const GpuClock* clock,
                     TimingProgressCallback progress, SpotCheck spot_check)
    : workers_(workers),
      config_(config),
      input_seed_(input_seed),
      schedule_seed_(schedule_seed),
      clock_(clock),
      progress_(std::move(progress)),
      spot_check_(std::move(spot_check)),
      ref_(workers, Side::kReference),
      cand_(workers, Side::kCandidate),
      schedule_(schedule_seed),
      stop_(config) {
  out_.details = nlohmann::json::object();
  ref_.own_kernels = cand_.own_kernels = config.own_kernels;
  ref_.next_set = cand_.next_set = config.prewarmed_sets;
}

TimingOutcome TimingRun::run() {
  prepare_pools();
  warm_up();
  sample();
  final_checks();
  summarise();
  return take_outcome();
}

void TimingRun::prepare_pools() {
  setup_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(config_.call_timeout_s * 4));
  nlohmann::json request = prepare_timing_request(config_, input_seed_);
  // Both workers build their pools at the same time (or have them already).
  auto [cand_reply, ref_reply] = workers_.call_both(request, setup_deadline_);
  std::size_t streams_used = 1;
  if (config_.streams > 1) {
    const auto streams_of = [](const wire::Message& reply) {
      return reply.header.value(proto::reply::kStreams, std::size_t{1});
    };
    nlohmann::json streams = {{"asked", config_.streams},
                              {"reference", streams_of(ref_reply)},
                              {"candidate", streams_of(cand_reply)}};
    for (const auto* reply : {&ref_reply, &cand_reply}) {
      if (reply->header.contains(proto::reply::kStreamsUnavailable))
        streams["unavailable"] = reply->header[proto::reply::kStreamsUnavailable];
    }
    if (streams_of(ref_reply) != streams_of(cand_reply)) {
      // Both sides the same way or not at all: the current stream on both.
      request.erase(proto::request::kStreams);
      std::tie(cand_reply, ref_reply) = workers_.call_both(request, setup_deadline_);
      streams["reference"] = streams["candidate"] = 1;
    }
    streams_used = streams["reference"].get<std::size_t>();
    out_.details["streams"] = streams;
  }
  const nlohmann::json& r = ref_reply.header;
  const nlohmann::json& c = cand_reply.header;
  out_.details["input_sets"] = r.value(proto::reply::kPool, 0);
  out_.details["input_set_bytes"] = r.value(proto::reply::kSetBytes, 0);
  streams_ = streams_used;
  pool_ = std::min(r.value(proto::reply::kPool, std::size_t{0}),
                   c.value(proto::reply::kPool, std::size_t{0}));
  hidden_ =
      r.value(proto::reply::kUnseenHidden, true) && c.value(proto::reply::kUnseenHidden, true);
  // Both pools come from the task's get_inputs() under the same seeds: the candidate's process
  // must have produced the same bytes, or it changed the task.
  InputsMeasured inputs{r, c,
                        std::min(r.value(proto::reply::kUnseen, std::size_t{0}),
                                 c.value(proto::reply::kUnseen, std::size_t{0}))};
  DefenseContext context{DefensePhase::kInputs, config_, out_.findings, out_.details};
  context.inputs = &inputs;
  run_defenses(context);
  unseen_ = inputs.unseen_sets;
}

}  // namespace cudal1
