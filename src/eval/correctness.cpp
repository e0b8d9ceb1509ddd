#include "cudal1/eval/correctness.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <string>
#include <utility>

#include "cudal1/common/digest.hpp"
#include "cudal1/eval/tensor_compare.hpp"
#include "cudal1/eval/verdict.hpp"
#include "cudal1/worker/protocol.hpp"

namespace cudal1 {

namespace proto = worker_protocol;
namespace {

// The outputs of a trial reply as views into its payload.
std::vector<TensorBytes> outputs_of(const wire::Message& reply) {
  std::vector<TensorBytes> out;
  std::size_t offset = 0;
  for (const auto& described : reply.header.at(proto::reply::kOutputs)) {
    TensorBytes tensor;
    tensor.dtype = described.at(proto::tensor::kDtype).get<std::string>();
    tensor.shape = described.at(proto::tensor::kShape).get<std::vector<std::int64_t>>();
    const auto size = described.at(proto::tensor::kNbytes).get<std::size_t>();
    if (offset + size > reply.payload.size())
      throw std::runtime_error("a trial reply's payload is truncated");
    tensor.bytes = std::span<const std::byte>(reply.payload.data() + offset, size);
    offset += size;
    out.push_back(tensor);
  }
  return out;
}

bool flag_of(const nlohmann::json& output, const char* key) {
  return output.is_object() && output.value(key, false);
}

// What one trial reveals besides the values: inputs generated differently in the candidate's
// process, inputs changed by the call, outputs that are not plain dense tensors of the task's
// device, outputs sharing memory with inputs, parameters or the previous call's outputs, work
// that went on after the call returned, and replaced functions or settings.
void inspect_trial(const wire::Message& got, const wire::Message& expected, std::size_t t,
                   Findings& findings) {
  const auto& got_inputs = got.header.at(proto::reply::kInputs);
  const auto& expected_inputs = expected.header.at(proto::reply::kInputs);
  const auto& got_after = got.header.at(proto::reply::kInputsAfter);
  const auto& expected_after = expected.header.at(proto::reply::kInputsAfter);
  const std::string trial = fmt::format("trial {}", t + 1);
  if (got_inputs.size() != expected_inputs.size()) {
    findings.add(flag::kTampering,
                 fmt::format("{}: the candidate's process produced {} inputs, the task {}", trial,
                             got_inputs.size(), expected_inputs.size()));
    return;
  }
  for (std::size_t i = 0; i < got_inputs.size(); ++i) {
    const auto& g = got_inputs[i];
    const auto& e = expected_inputs[i];
    const bool same =
        g.value("kind", "") == "tensor"
            ? g.value("digest", 0ull) == e.value("digest", 1ull) &&
                  g.value("shape", nlohmann::json()) == e.value("shape", nlohmann::json())
            : g.value("repr", "") == e.value("repr", "-");
    if (!same) {
      findings.add(flag::kTampering,
                   fmt::format("{}: input {} generated in the candidate's process differs from the "
                               "task's (patched sizes, get_inputs or random generators)",
                               trial, i));
    }
    if (g.value("kind", "") != "tensor") continue;
    const bool candidate_mutated = g.value("digest", 0ull) != got_after[i].value("digest", 0ull);
    const bool reference_mutates =
        e.value("digest", 0ull) != expected_after[i].value("digest", 0ull);
    if (candidate_mutated && !reference_mutates) {
      findings.add(flag::kInputMutation,
                   fmt::format("{}: the candidate changed input {} in place", trial, i));
    }
  }

  const auto& got_outputs = got.header.at(proto::reply::kOutputs);
  const auto& expected_outputs = expected.header.at(proto::reply::kOutputs);
  for (std::size_t i = 0; i < got_outputs.size() && i < expected_outputs.size(); ++i) {
    const auto& g = got_outputs[i];
    const auto& e = expected_outputs[i];
    const std::string which = fmt::format("{}: output {}", trial, i);
    if (!g.value("exact_type", true)) {
      findings.add(flag::kLazyOutput, which + " is a Tensor subclass, not a plain torch.Tensor");
    }
    if (g.value("device", "") != e.value("device", "")) {
      findings.add(flag::kLazyOutput, fmt::format("{} is on {}, the reference's on {}", which,
                                                  g.value("device", "?"), e.value("device", "?")));
    }
    if (!flag_of(g, "dense") && g.contains("dense") && flag_of(e, "dense")) {
      findings.add(flag::kLazyOutput,
                   which + " has no storage of its own for every element (an expanded view)");
    }
    if (flag_of(g, "aliases_input") && !flag_of(e, "aliases_input")) {
      findings.add(flag::kOutputAliasesInput, which + " shares memory with an input");
    }
    const bool aliases_model = flag_of(g, "aliases_parameter") && !flag_of(e, "aliases_parameter");
    if (aliases_model) {
      findings.add(flag::kOutputAliasesInput,
                   which + " shares memory with a parameter or buffer of the model");
    }
    // A parameter's memory returned on every call is that (output_aliases_input), not a reused
    // output buffer of the candidate's own.
    if (flag_of(g, "aliases_previous_output") && !flag_of(e, "aliases_previous_output") &&
        !aliases_model) {
      findings.add(flag::kReusedOutput,
                   which +
                       " is memory the previous call returned, so the caller's earlier result "
                       "changed when the model was called again (return memory of its own, "
                       "e.g. a clone of a static buffer)");
    }
    if (flag_of(g, "changed_after_return") && !flag_of(e, "changed_after_return")) {
      findings.add(flag::kBackgroundWork,
                   which + " kept changing after forward returned and the device was idle");
    }
  }
  const long busy = got.header.value(proto::reply::kBusyTicksAfterReturn, 0L);
  // Clock ticks (usually 10 ms) of other threads while the worker slept after the call.
  if (busy >= 2 && expected.header.value(proto::reply::kBusyTicksAfterReturn, 0L) < 2) {
    std::string threads;
    for (const auto& t : got.header.value(proto::reply::kBusyThreads, nlohmann::json::array())) {
      threads += fmt::format("{}{} {}", threads.empty() ? " (" : ", ",
                             t.value(proto::reply::kThreadName, "?"),
                             t.value(proto::reply::kThreadTicks, 0L));
    }
    if (!threads.empty()) threads += ")";
    findings.add(flag::kBackgroundWork,
                 fmt::format("{}: other threads of the candidate used {} CPU ticks after forward "
                             "returned, while nothing was running{}",
                             trial, busy, threads));
  }
  const auto new_threads = got.header.value(proto::reply::kNewThreads, 0);
  if (new_threads > 0 && expected.header.value(proto::reply::kNewThreads, 0) == 0) {
    findings.add(flag::kBackgroundWork,
                 fmt::format("{}: {} thread(s) started by forward were still alive after it "
                             "returned",
                             trial, new_threads));
  }
  add_guard_findings(findings, got.header.value(proto::reply::kGuards, nlohmann::json::object()),
                     expected.header.value(proto::reply::kGuards, nlohmann::json::object()), trial);
}

// One request to both workers, with the hold the workers take themselves where they do.
std::pair<wire::Message, wire::Message> call_both_holding(WorkerClient& candidate,
                                                          WorkerClient& reference,
                                                          nlohmann::json request,
                                                          DeviceHolds& holds,
                                                          Clock::time_point deadline) {
  nlohmann::json hold = holds.worker_hold();
  if (!hold.is_null()) request["hold"] = std::move(hold);
  // The limit counts the workers' own time, not the waits for the device before this call.
  const auto moved = deadline + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(holds.waited_s()));
  auto replies = call_both(candidate, reference, request, moved);
  holds.reported(replies.first, replies.second);
  return replies;
}

// Every output one value repeated (or empty): the same bytes for any input, kept or not.
bool all_constant(const std::vector<TensorBytes>& outputs) {
  for (const auto& out : outputs) {
    const std::size_t width = dtype_size(out.dtype);
    if (width == 0 || out.bytes.size() % width != 0) return false;
    for (std::size_t at = width; at < out.bytes.size(); at += width) {
      if (std::memcmp(out.bytes.data() + at, out.bytes.data(), width) != 0) return false;
    }
  }
  return true;
}

// Both workers make one seed's inputs on the host and digest them, outside the caller's holds
// (a task whose get_inputs() puts tensors on the device gets them there under a worker's own).
void prepare_inputs(WorkerClient& reference, WorkerClient& candidate, std::uint64_t seed,
                    DeviceHolds& holds, Clock::time_point deadline) {
  call_both_holding(candidate, reference,
                    {{proto::request::kOp, proto::op::kPrepareTrials},
                     {proto::request::kSeeds, nlohmann::json::array({seed})}},
                    holds, deadline);
}

// One trial's outputs against the reference's: the first mismatch, the largest errors, and the
// digests of every output of each side (for seed invariance and for spotting a reused answer).
struct TrialComparison {
  std::string problem;  // empty when every output matched
  double max_abs_error = 0, max_rel_error = 0, relative_l2_error = 0;
  std::uint64_t output_bytes = 0;
  std::vector<std::uint64_t> got_hashes, expected_hashes;
};

TrialComparison compare_trial_outputs(const std::vector<TensorBytes>& got_outputs,
                                      const std::vector<TensorBytes>& expected_outputs,
                                      const Tolerance& tolerance, std::size_t t,
                                      Findings& findings) {
  TrialComparison out;
  if (got_outputs.size() != expected_outputs.size()) {
    out.problem = fmt::format("forward returned {} tensors, the reference {}", got_outputs.size(),
                              expected_outputs.size());
  }
  for (const auto& output : got_outputs)
    out.got_hashes.push_back(digest_bytes(output.bytes.data(), output.bytes.size()));
  for (const auto& output : expected_outputs)
    out.expected_hashes.push_back(digest_bytes(output.bytes.data(), output.bytes.size()));
  for (std::size_t i = 0; out.problem.empty() && i < expected_outputs.size(); ++i) {
    const Bounds bounds = tolerance.for_dtype(expected_outputs[i].dtype);
    const TensorComparison c = compare_tensors(got_outputs[i], expected_outputs[i], bounds);
    out.max_abs_error = std::max(out.max_abs_error, c.max_abs_error);
    out.max_rel_error = std::max(out.max_rel_error, c.max_rel_error);
    out.output_bytes += expected_outputs[i].bytes.size();
    if (!c.match) {
      out.problem =
          expected_outputs.size() > 1 ? fmt::format("output {}: {}", i, c.problem) : c.problem;
      continue;
    }
    // Within tolerance element by element, but judged against the reference's own scale: an
    // output that passes only because the reference is small next to atol (zeros, noise).
    const double l2 = c.relative_l2_error();
    out.relative_l2_error = std::max(out.relative_l2_error, l2);
    const double limit = std::max(10 * bounds.rtol, 1e-2);
    if (l2 > limit && c.elements > 0) {
      findings.add(flag::kTrivialOutput,
                   fmt::format("trial {}: output {} is within the absolute tolerance but its error "
                               "relative to the reference's scale is {:.3g} (limit {:.3g})",
                               t + 1, i, l2, limit));
    }
  }
  return out;
}

// What a trial's record holds before its times and errors.
nlohmann::json trial_record(const wire::Message& got, const wire::Message& expected,
                            std::uint64_t seed, std::size_t outputs) {
  return {{"seed", seed},
          {"reference_ms", expected.header.value(proto::reply::kMs, 0.0)},
          {"candidate_ms", got.header.value(proto::reply::kMs, 0.0)},
          {"candidate_checks",
           {{"busy_ticks_after_return", got.header.value(proto::reply::kBusyTicksAfterReturn, 0L)},
            {"busy_threads", got.header.value(proto::reply::kBusyThreads, nlohmann::json::array())},
            {"new_threads", got.header.value(proto::reply::kNewThreads, 0)},
            {"outputs", got.header.value(proto::reply::kOutputs, nlohmann::json::array())}}},
          {"outputs", outputs}};
}

nlohmann::json finite_or_null(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

// A wrong answer that is exactly an answer the candidate gave before: a reused result. (A
// constant fill, zeros say, is the same for any input without having been kept.)
void flag_earlier_answer(
    const std::vector<std::uint64_t>& got_hashes,
    const std::vector<std::pair<std::string, std::vector<std::uint64_t>>>& earlier_answers,
    std::size_t t, Findings& findings) {
  for (const auto& [source, hashes] : earlier_answers) {
    if (hashes == got_hashes) {
      findings.add(flag::kCachedOutput,
                   fmt::format("trial {}: the candidate returned exactly its output "
                               "of {} for new inputs",
                               t + 1, source));
      break;
    }
  }
}

// Seed invariance over the trials that matched.
void check_seed_invariance(const std::vector<std::vector<std::uint64_t>>& got_digests,
                           const std::vector<std::vector<std::uint64_t>>& expected_digests,
                           Findings& findings) {
  if (expected_digests.size() < 2) return;
  auto distinct = [](const std::vector<std::vector<std::uint64_t>>& d) {
    std::vector<std::vector<std::uint64_t>> sorted = d;
    std::sort(sorted.begin(), sorted.end());
    return static_cast<std::size_t>(std::unique(sorted.begin(), sorted.end()) - sorted.begin());
  };
  if (distinct(expected_digests) == 1) {
    findings.add_task_flag(
        flag::kDegenerate,
        fmt::format("the reference returned identical outputs for {} different input seeds",
                    expected_digests.size()));
  } else if (distinct(got_digests) == 1) {
    findings.add(flag::kTrivialOutput,
                 fmt::format("the candidate returned identical outputs for {} input "
                             "seeds where the reference's outputs differed",
                             got_digests.size()));
  }
}

}  // namespace

std::pair<wire::Message, wire::Message> call_both_on_device(WorkerClient& candidate,
                                                            WorkerClient& reference,
                                                            nlohmann::json request,
                                                            DeviceHolds& holds,
                                                            Clock::time_point deadline) {
  holds.take();
  auto replies = call_both_holding(candidate, reference, std::move(request), holds, deadline);
  holds.give_back();
  return replies;
}

FirstCalls run_first_calls(WorkerClient& reference, WorkerClient& candidate, const SeedPlan& seeds,
                           DeviceHolds& holds, Clock::time_point deadline) {
  prepare_inputs(reference, candidate, seeds.warm, holds, deadline);
  const auto [got, expected] = call_both_on_device(
      candidate, reference,
      {{proto::request::kOp, proto::op::kFirstCall}, {proto::request::kSeed, seeds.warm}}, holds,
      deadline);
  FirstCalls calls;
  calls.seconds = {{"reference", expected.header.value(proto::reply::kMs, 0.0) / 1e3},
                   {"candidate", got.header.value(proto::reply::kMs, 0.0) / 1e3}};
  calls.candidate_outputs =
      got.header.value(proto::reply::kOutputDigests, std::vector<std::uint64_t>{});
  if (expected.header.contains(proto::reply::kFlops) &&
      expected.header[proto::reply::kFlops].is_object())
    calls.reference_flops = expected.header[proto::reply::kFlops];
  return calls;
}

CorrectnessOutcome run_correctness_trials(WorkerClient& reference, WorkerClient& candidate,
                                          const SeedPlan& seeds, const Tolerance& tolerance,
                                          DeviceHolds& holds, Clock::time_point deadline,
                                          const std::vector<std::uint64_t>& first_call_outputs) {
  CorrectnessOutcome outcome;
  // Output digests per trial: an output that does not change when the reference's does is a
  // constant, whatever the tolerance says.
  std::vector<std::vector<std::uint64_t>> got_digests, expected_digests;
  // The candidate's earlier answers, by where they came from: its first call's, then each trial's.
  std::vector<std::pair<std::string, std::vector<std::uint64_t>>> earlier_answers;
  if (!first_call_outputs.empty())
    earlier_answers.emplace_back("the first call (other inputs)", first_call_outputs);
  for (std::size_t t = 0; t < seeds.trials.size(); ++t) {
    const std::uint64_t seed = seeds.trials[t];
    const auto prepare_start = Clock::now();
    prepare_inputs(reference, candidate, seed, holds, deadline);
    const auto hold_start = Clock::now();
    holds.take();
    const auto trial_start = Clock::now();
    // Both workers run the trial at once: correctness is not timed, and each side's checks after
    // its call (the settle time for background work above all) overlap the other's.
    auto [got, expected] = call_both_holding(
        candidate, reference,
        {{proto::request::kOp, proto::op::kTrial}, {proto::request::kSeed, seed}}, holds, deadline);
    holds.give_back();  // the comparison below is the host's work
    const auto compare_start = Clock::now();
    const auto got_outputs = outputs_of(got);
    const auto expected_outputs = outputs_of(expected);
    inspect_trial(got, expected, t, outcome.findings);

    nlohmann::json trial = trial_record(got, expected, seed, expected_outputs.size());
    const TrialComparison compared =
        compare_trial_outputs(got_outputs, expected_outputs, tolerance, t, outcome.findings);
    const std::string& problem = compared.problem;
    outcome.output_bytes = std::max(outcome.output_bytes, compared.output_bytes);
    // Where the trial's time went: both calls (the workers' own parts in *_parts_ms), then the
    // comparison here.
    trial["prepare_s"] = std::chrono::duration<double>(hold_start - prepare_start).count();
    // Waits for the holds: the caller's, or the workers' own (both sides', added).
    trial["hold_wait_s"] = std::chrono::duration<double>(trial_start - hold_start).count() +
                           got.header.value(proto::reply::kHoldWaitS, 0.0) +
                           expected.header.value(proto::reply::kHoldWaitS, 0.0);
    trial["calls_s"] = std::chrono::duration<double>(compare_start - trial_start).count();
    trial["compare_s"] = std::chrono::duration<double>(Clock::now() - compare_start).count();
    trial["candidate_parts_ms"] =
        got.header.value(proto::reply::kPartsMs, nlohmann::json::object());
    trial["reference_parts_ms"] =
        expected.header.value(proto::reply::kPartsMs, nlohmann::json::object());
    if (problem.empty()) {
      got_digests.push_back(compared.got_hashes);
      expected_digests.push_back(compared.expected_hashes);
    }
    outcome.max_abs_error = std::max(outcome.max_abs_error, compared.max_abs_error);
    outcome.max_rel_error = std::max(outcome.max_rel_error, compared.max_rel_error);
    trial["max_abs_error"] = finite_or_null(compared.max_abs_error);
    trial["max_rel_error"] = finite_or_null(compared.max_rel_error);
    trial["relative_l2_error"] = finite_or_null(compared.relative_l2_error);
    trial["match"] = problem.empty();
    outcome.trials.push_back(trial);
    if (!problem.empty() && !compared.got_hashes.empty() && !all_constant(got_outputs))
      flag_earlier_answer(compared.got_hashes, earlier_answers, t, outcome.findings);
    earlier_answers.emplace_back(fmt::format("trial {}", t + 1), compared.got_hashes);
    if (!problem.empty()) {
      // Further trials cannot make the candidate correct; stopping saves the device for others.
      outcome.correct = false;
      outcome.problem = fmt::format("trial {} (seed {}): {}", t + 1, seed, problem);
      break;
    }
  }
  check_seed_invariance(got_digests, expected_digests, outcome.findings);
  return outcome;
}

std::string compare_sample_outputs(const wire::Message& candidate, const wire::Message& reference,
                                   const Tolerance& tolerance) {
  const auto got = outputs_of(candidate);
  const auto expected = outputs_of(reference);
  if (got.size() != expected.size())
    return fmt::format("{} outputs instead of {}", got.size(), expected.size());
  // Sampled elements: the shapes they were drawn from must agree too.
  const auto& got_described = candidate.header.at(proto::reply::kOutputs);
  const auto& expected_described = reference.header.at(proto::reply::kOutputs);
  for (std::size_t i = 0; i < got.size(); ++i) {
    const auto got_shape = got_described[i].value("full_shape", nlohmann::json());
    const auto expected_shape = expected_described[i].value("full_shape", nlohmann::json());
    if (got_shape != expected_shape) {
      const std::string what =
          fmt::format("shape {} instead of {}", got_shape.dump(), expected_shape.dump());
      return got.size() > 1 ? fmt::format("output {}: {}", i, what) : what;
    }
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    const auto c = compare_tensors(got[i], expected[i], tolerance.for_dtype(expected[i].dtype));
    if (!c.match) return got.size() > 1 ? fmt::format("output {}: {}", i, c.problem) : c.problem;
  }
  return "";
}

}  // namespace cudal1
