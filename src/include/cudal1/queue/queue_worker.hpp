// `cudal1 worker`: joins the consumer group of a job stream, evaluates each job with this host's
// engine (its GPUs, its build cache), publishes the verdict to the submitter's result stream and
// acknowledges it, while a heartbeat keeps its record and its jobs' leases fresh. Jobs of workers
// that stopped beating are claimed again after the visibility timeout; a job delivered too many
// times without a result is failed as runtime_error instead of retried.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cudal1/eval/evaluation.hpp"
#include "cudal1/queue/queue_builds.hpp"
#include "cudal1/queue/redis_address.hpp"

namespace cudal1::queue {

struct WorkerSettings {
  RedisAddress address;
  // The consumer's name in the group; two live workers may not share one.
  std::string name;
  // {"cpu"}, or the GPUs this worker evaluates on ({"cuda:0", "cuda:1"}): it takes jobs of that
  // kind only, and gives each job the GPU with the fewest evaluations in flight.
  std::vector<std::string> devices;
  // The local engine: cache_dir (builds and job files), lock_dir, worker program.
  EngineConfig engine;
  // Jobs taken from the queue at once (built in parallel, timed one per GPU at a time).
  unsigned jobs = 1;
  // A job whose lease is not renewed for this long is claimed by another worker (XAUTOCLAIM);
  // live workers renew theirs every third of it.
  double visibility_s = 60;
  // A job delivered this many times without a result is failed (runtime_error, with the reason)
  // by the worker that would take it next.
  unsigned max_deliveries = 3;
  // --role build: takes the build jobs of this host's build toolchain (keys::build_kind), not
  // evaluations; `devices` is then {"build"}. Needs the build secret and the sandbox.
  bool build_role = false;
  // An evaluating worker: where its candidates' builds are made (--builds); kHere without a
  // build secret.
  BuildsMode builds = BuildsMode::kHere;
  std::string build_secret;  // CUDAL1_BUILD_SECRET: signs (build role) or checks the builds
  // One line per event (job taken, finished, failed; connection lost and back).
  std::function<void(const std::string&)> log;
};

class QueueWorker {
 public:
  explicit QueueWorker(WorkerSettings settings);
  ~QueueWorker();
  QueueWorker(const QueueWorker&) = delete;
  QueueWorker& operator=(const QueueWorker&) = delete;

  // Takes and evaluates jobs until `stop`; then takes no more, finishes and publishes those it
  // holds, and leaves. Throws InputError when it cannot serve (another live worker has its
  // name, its PyTorch sees no GPU for a GPU worker, Redis refuses the password).
  void run(const std::atomic<bool>& stop);

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace cudal1::queue
