// A job on the queue: everything a worker on another host needs for one evaluation (the task's
// and the candidate's sources, the options, the seed), so that workers share no file system.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "cudal1/eval/evaluation.hpp"

namespace cudal1::queue {

struct Job {
  std::string id;         // stable: the same work from the same submitter has the same id
  std::string submitter;  // its results go to keys::results(submitter)
  // The files as the submitter named them: workers write the sources under these base names
  // and put these paths back into the messages they return.
  std::string task_path;
  std::string task_source;
  std::string candidate_path;
  std::string candidate_source;
  // device: "cpu" or "cuda" (the worker picks one of its GPUs); progress is not sent.
  EvalOptions options;
  double submitted_at = 0;  // Unix seconds
  // A build job (for a `--role build` worker): the rest of cudal1::BuildJob (key, toolchain,
  // init_seed, build_s); null for an evaluation.
  nlohmann::json build;

  nlohmann::json to_json() const;
  // Throws std::runtime_error naming the field that is missing or of the wrong type.
  static Job from_json(const nlohmann::json& json);
};

// The options a remote evaluation needs, every field (progress aside), so that it runs exactly
// as a local one would.
nlohmann::json options_to_json(const EvalOptions& options);
EvalOptions options_from_json(const nlohmann::json& json);

// The id of the `occurrence`-th submission (0, 1, ...) of this work by this submitter. The same
// command run again asks for the same ids, and so finds the results published meanwhile; the
// same work asked for twice in one run is two jobs.
std::string job_id(const std::string& submitter, const std::string& task_source,
                   const std::string& candidate_source, const nlohmann::json& options,
                   std::size_t occurrence);

}  // namespace cudal1::queue
