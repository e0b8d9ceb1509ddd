#include "cudal1/eval/correctness.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "cudal1/eval/tensor_compare.hpp"

namespace cudal1 {
namespace {

wire::Message run_trial(WorkerClient& worker, Side side, std::uint64_t seed,
                        Clock::time_point deadline) {
  return call_as(worker, side, {{"op", "trial"}, {"seed", seed}}, deadline);
}

// The outputs of a trial reply as views into its payload.
std::vector<TensorBytes> outputs_of(const wire::Message& reply) {
  std::vector<TensorBytes> out;
  std::size_t offset = 0;
  for (const auto& described : reply.header.at("outputs")) {
    TensorBytes tensor;
    tensor.dtype = described.at("dtype").get<std::string>();
    tensor.shape = described.at("shape").get<std::vector<std::int64_t>>();
    const auto size = described.at("nbytes").get<std::size_t>();
    if (offset + size > reply.payload.size())
      throw std::runtime_error("a trial reply's payload is truncated");
    tensor.bytes = std::span<const std::byte>(reply.payload.data() + offset, size);
    offset += size;
    out.push_back(tensor);
  }
  return out;
}

}  // namespace

CorrectnessOutcome run_correctness_trials(WorkerClient& reference, WorkerClient& candidate,
                                          const SeedPlan& seeds, const Tolerance& tolerance,
                                          Clock::time_point deadline) {
  CorrectnessOutcome outcome;
  for (std::size_t t = 0; t < seeds.trials.size(); ++t) {
    const std::uint64_t seed = seeds.trials[t];
    const wire::Message got = run_trial(candidate, Side::kCandidate, seed, deadline);
    const wire::Message expected = run_trial(reference, Side::kReference, seed, deadline);
    const auto got_outputs = outputs_of(got);
    const auto expected_outputs = outputs_of(expected);

    nlohmann::json trial = {{"seed", seed},
                            {"reference_ms", expected.header.value("ms", 0.0)},
                            {"candidate_ms", got.header.value("ms", 0.0)},
                            {"outputs", expected_outputs.size()}};
    std::string problem;
    if (got_outputs.size() != expected_outputs.size()) {
      problem = fmt::format("forward returned {} tensors, the reference {}", got_outputs.size(),
                            expected_outputs.size());
    }
    double trial_abs = 0, trial_rel = 0;
    for (std::size_t i = 0; problem.empty() && i < expected_outputs.size(); ++i) {
      const Bounds bounds = tolerance.for_dtype(expected_outputs[i].dtype);
      const TensorComparison c = compare_tensors(got_outputs[i], expected_outputs[i], bounds);
      trial_abs = std::max(trial_abs, c.max_abs_error);
      trial_rel = std::max(trial_rel, c.max_rel_error);
      if (!c.match) {
        problem =
            expected_outputs.size() > 1 ? fmt::format("output {}: {}", i, c.problem) : c.problem;
      }
    }
    outcome.max_abs_error = std::max(outcome.max_abs_error, trial_abs);
    outcome.max_rel_error = std::max(outcome.max_rel_error, trial_rel);
    trial["max_abs_error"] =
        std::isfinite(trial_abs) ? nlohmann::json(trial_abs) : nlohmann::json(nullptr);
    trial["max_rel_error"] =
        std::isfinite(trial_rel) ? nlohmann::json(trial_rel) : nlohmann::json(nullptr);
    trial["match"] = problem.empty();
    outcome.trials.push_back(trial);
    if (!problem.empty()) {
      // Further trials cannot make the candidate correct; stopping saves the device for others.
      outcome.correct = false;
      outcome.problem = fmt::format("trial {} (seed {}): {}", t + 1, seed, problem);
      break;
    }
  }
  return outcome;
}

}  // namespace cudal1
