#include "cudal1/queue/job_result.hpp"

#include <fmt/format.h>

namespace cudal1::queue {
namespace {

using nlohmann::json;

std::string subject_name(InputError::Subject subject) {
  switch (subject) {
    case InputError::Subject::kTask:
      return "task";
    case InputError::Subject::kCandidate:
      return "candidate";
    case InputError::Subject::kOther:
      break;
  }
  return "other";
}

}  // namespace

JobResult JobResult::of_verdict(std::string job_id, Verdict verdict) {
  JobResult result;
  result.job_id = std::move(job_id);
  result.verdict = std::move(verdict);
  return result;
}

JobResult JobResult::of_build(std::string job_id, nlohmann::json build) {
  JobResult result;
  result.job_id = std::move(job_id);
  result.build = std::move(build);
  return result;
}

JobResult JobResult::of_input_error(std::string job_id, const InputError& error) {
  JobResult result;
  result.job_id = std::move(job_id);
  result.error_kind = "input";
  result.subject = error.subject();
  result.message = error.what();
  return result;
}

JobResult JobResult::of_internal_error(std::string job_id, const std::string& message) {
  JobResult result;
  result.job_id = std::move(job_id);
  result.error_kind = "internal";
  result.message = message;
  return result;
}

json JobResult::to_json() const {
  json out = {{"job", job_id}, {"worker", worker}, {"deliveries", deliveries}};
  if (!build.is_null()) {
    out["build"] = build;
  } else if (verdict) {
    out["verdict"] = verdict->to_json();
  } else {
    out["error"] = {{"kind", error_kind}, {"subject", subject_name(subject)}, {"message", message}};
  }
  return out;
}

JobResult JobResult::from_json(const json& j) {
  if (!j.is_object() || !j.contains("job") || !j["job"].is_string()) {
    throw std::runtime_error("a result is a JSON object with a \"job\" id");
  }
  JobResult result;
  result.job_id = j["job"].get<std::string>();
  result.worker = j.value("worker", "");
  result.deliveries = j.value("deliveries", std::size_t{1});
  if (j.contains("build") && j["build"].is_object()) {
    result.build = j["build"];
    return result;
  }
  if (j.contains("verdict") && j["verdict"].is_object()) {
    result.verdict = Verdict::from_json(j["verdict"]);
    return result;
  }
  const json error = j.value("error", json::object());
  result.error_kind = error.value("kind", "internal");
  const std::string subject = error.value("subject", "other");
  result.subject = subject_of_role(subject);
  result.message = error.value("message", "the worker gave neither a verdict nor an error");
  return result;
}

Verdict JobResult::verdict_or_throw() const {
  if (verdict) return *verdict;
  if (error_kind == "input") throw InputError(message, subject);
  throw std::runtime_error(
      fmt::format("worker {}: {}", worker.empty() ? "(unnamed)" : worker, message));
}

}  // namespace cudal1::queue
