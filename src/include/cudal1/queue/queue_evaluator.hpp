// The Evaluator of a Redis queue: each evaluation becomes a job on the queue, run by whichever
// `cudal1 worker` takes it, and its verdict comes back on this submitter's result stream. Bench,
// optimize and serve use it as they use the local engine.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cudal1/eval/evaluator.hpp"
#include "cudal1/queue/redis_address.hpp"

namespace cudal1::queue {

struct QueueSettings {
  RedisAddress address;
  // Stable across runs of the same work (see cli::EvaluatorSettings::submitter); results come
  // back on keys::results(submitter).
  std::string submitter;
  // Static source checks run here with its worker program; build_jobs bounds them.
  EngineConfig engine;
  // Jobs on the queue at once for this submitter (submit blocks beyond); 0: kDefaultInFlight.
  unsigned max_in_flight = 0;
  // toolchain() waits this long for a worker to join before it gives up.
  double worker_wait_s = 600;
  // How often the jobs still awaited are looked up: added again where Redis lost them (a
  // restart without persistence), their results read again where published but never read.
  double lost_check_s = 15;
  // Told about connection losses and waits, for a log line.
  std::function<void(const std::string&)> note;
};

// Enough for every worker of a large fleet to have jobs at hand.
inline constexpr unsigned kDefaultInFlight = 1024;

class QueueEvaluator final : public Evaluator {
 public:
  // Connects to check the address and the password (InputError naming --queue otherwise).
  explicit QueueEvaluator(QueueSettings settings);
  // Stops collecting; verdicts still awaited are abandoned (their futures report it).
  ~QueueEvaluator() override;
  QueueEvaluator(const QueueEvaluator&) = delete;
  QueueEvaluator& operator=(const QueueEvaluator&) = delete;

  // Reads both sources here (an InputError through the future, as locally) and queues the job.
  std::future<Verdict> submit(EvalRequest request) override;
  Verdict evaluate(const EvalRequest& request) override;
  // The toolchain of a live worker (a GPU worker's where there is one); waits for one to join.
  const Toolchain& toolchain() override;
  const EngineConfig& config() const override;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace cudal1::queue
