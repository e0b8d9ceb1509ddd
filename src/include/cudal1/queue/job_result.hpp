// A job's one final result, as a worker publishes it to the submitter's result stream: the
// verdict, or the error the local engine would have thrown (unusable input, internal failure).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cudal1/common/error.hpp"
#include "cudal1/eval/verdict.hpp"

namespace cudal1::queue {

struct JobResult {
  std::string job_id;
  std::optional<Verdict> verdict;
  // Without a verdict: "input" (an InputError of `subject`) or "internal".
  std::string error_kind;
  InputError::Subject subject = InputError::Subject::kOther;
  std::string message;
  std::string worker;
  std::size_t deliveries = 1;
  // A build job's result (a build worker's): the record, the packed folder's key and digest,
  // the signature (docs/scale-out.md, "Builds on CPU hosts"); null otherwise.
  nlohmann::json build;

  static JobResult of_build(std::string job_id, nlohmann::json build);

  static JobResult of_verdict(std::string job_id, Verdict verdict);
  static JobResult of_input_error(std::string job_id, const InputError& error);
  static JobResult of_internal_error(std::string job_id, const std::string& message);

  nlohmann::json to_json() const;
  // Throws std::runtime_error for something that is not a result.
  static JobResult from_json(const nlohmann::json& json);
  // The verdict, or the error thrown as the local engine throws it.
  Verdict verdict_or_throw() const;
};

}  // namespace cudal1::queue
