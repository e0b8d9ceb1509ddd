// The request and reply bodies of the reward endpoints, checked field by field: OpenRLHF's
// remote reward-model protocol (POST /get_reward) and cudal1's own batch form (POST /v1/rewards).
// docs/rl.md describes both.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cudal1/serve/reward_service.hpp"
#include "cudal1/serve/task_catalog.hpp"

namespace cudal1::serve {

// A request the server refuses: the HTTP status (4xx) and a message naming the field.
class BadRequest : public std::runtime_error {
 public:
  BadRequest(int status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

struct RewardRequest {
  std::vector<RewardItem> items;
  std::optional<std::int64_t> step;  // the trainer's step (native form only)
  std::string request_id;            // given by the client (native form), else empty
};

// Parses a body; throws BadRequest(400) for malformed JSON, missing or mistyped fields, lists of
// different lengths or an unknown task key, and BadRequest(413) for more than `max_items` items.
RewardRequest parse_openrlhf_request(const std::string& body, const TaskCatalog& catalog,
                                     std::size_t max_items);
RewardRequest parse_native_request(const std::string& body, const TaskCatalog& catalog,
                                   std::size_t max_items);

// What identifies a reward request across retries and restarts: the SHA-256 of the endpoint and
// the body's JSON written with sorted keys and no spaces, so the same JSON sent again, however a
// client spaces it or orders its keys, is the same request. The body must parse (call after
// parse_*_request).
std::string request_key(const std::string& endpoint, const std::string& body);

// {"rewards": [smoothed], "scores": [raw], "extra_logs": {...}}, in the request's order. With
// `text_logs` false, extra_logs holds numbers only (for trainers that turn every log into a
// tensor).
nlohmann::json openrlhf_reply(const std::vector<RewardResult>& results, bool text_logs);
// {"request_id", "results": [{"task", "status", "speedup", "speedup_ci", "flags", "raw_reward",
// "reward", "advantage", "candidate_id", "cached", "review", "error"}...]}
nlohmann::json native_reply(const std::vector<RewardResult>& results,
                            const std::string& request_id);

// The JSON body of a refused request: {"error": message}.
std::string error_body(const std::string& message);

}  // namespace cudal1::serve
