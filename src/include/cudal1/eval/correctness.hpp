// Correctness trials: both workers draw inputs from the task's get_inputs() under the same fresh
// seed, run their model, and send their outputs here, where they are compared byte by byte.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cudal1/eval/findings.hpp"
#include "cudal1/eval/seeds.hpp"
#include "cudal1/eval/tolerance.hpp"
#include "cudal1/eval/worker_client.hpp"

namespace cudal1 {

struct CorrectnessOutcome {
  bool correct = true;
  std::string problem;  // the first mismatch, when !correct
  double max_abs_error = 0;
  double max_rel_error = 0;
  nlohmann::json trials = nlohmann::json::array();  // per trial: seed, times, errors
  Findings findings;  // hack defenses (see findings.hpp), task flags (degenerate)
  // Bytes of one call's outputs (for the speed-of-light floor).
  std::uint64_t output_bytes = 0;
};

// The device, held around each call on it (the first call and every trial) and given back in
// between, so that a timing phase waiting for it passes between the trials of a long evaluation.
// A hold a failure left taken stays taken until the object is gone: the caller stops the
// candidate's worker first.
//
// Where both workers can hold the device themselves (their device gates), take() and
// give_back() do nothing: each request on the device carries worker_hold(), each worker holds
// the device only while its CUDA calls use it (not while a call compiles on the host), and its
// reply lists the holds, which reported() records.
//
// Time spent waiting for the device is not the candidate's: the trials' time limit is moved by
// waited_s(), what this process and the reference's worker waited (never the candidate's worker's
// word: a candidate could claim any wait to run for ever). Other evaluations' timing phases can
// keep the device for minutes on a busy machine (bench, serve).
class DeviceHolds {
 public:
  virtual ~DeviceHolds() = default;
  virtual void take() = 0;
  virtual void give_back() = 0;
  // The "hold" a request carries when the workers hold the device; null otherwise.
  virtual nlohmann::json worker_hold() const { return nullptr; }
  virtual void reported(const wire::Message& /*candidate_reply*/,
                        const wire::Message& /*reference_reply*/) {}
  // Seconds waited for the device so far, as seen by this process and the reference's worker.
  virtual double waited_s() const { return 0; }
};

// One request to both workers that may use the device, under `holds` (taken and given back
// here, or each worker's own).
std::pair<wire::Message, wire::Message> call_both_on_device(WorkerClient& candidate,
                                                            WorkerClient& reference,
                                                            nlohmann::json request,
                                                            DeviceHolds& holds,
                                                            Clock::time_point deadline);

// What the first calls left: their times and the digests of the candidate's outputs.
struct FirstCalls {
  nlohmann::json seconds;  // {"reference": s, "candidate": s}
  // One per output (empty when the worker could not digest them): a wrong trial answer equal
  // to these is a result kept from the first call.
  std::vector<std::uint64_t> candidate_outputs;
  // The reference's arithmetic per call, {precision: flops}, counted in its first call (null
  // where it could not be counted). The candidate's own count would be its word: never asked.
  nlohmann::json reference_flops;
};

// Each model's first call, on inputs of its own (seed `seeds.warm`), its result dropped: what a
// first call costs (lazy initialisation, autotuning, compilation inside forward) stays out of
// the trials' numbers and checks.
FirstCalls run_first_calls(WorkerClient& reference, WorkerClient& candidate, const SeedPlan& seeds,
                           DeviceHolds& holds, Clock::time_point deadline);

// Runs one trial per seed of `seeds.trials`, both workers at once. A trial's inputs are made
// and digested on the host before its hold, its outputs compared after it. Throws SideFailure
// when a worker reports an error and WorkerFailure when one times out or dies.
// `first_call_outputs` (FirstCalls::candidate_outputs) counts as the candidate's answer before
// the first trial.
CorrectnessOutcome run_correctness_trials(
    WorkerClient& reference, WorkerClient& candidate, const SeedPlan& seeds,
    const Tolerance& tolerance, DeviceHolds& holds, Clock::time_point deadline,
    const std::vector<std::uint64_t>& first_call_outputs = {});

// Compares the outputs two sample replies carry (timing spot checks); "" when they agree.
std::string compare_sample_outputs(const wire::Message& candidate, const wire::Message& reference,
                                   const Tolerance& tolerance);

}  // namespace cudal1
