// `cudal1 serve`'s HTTP front (cpp-httplib): the reward endpoints, contrastive prompts, the task
// list, health and Prometheus metrics, with a bearer token, a body size limit, JSON errors that
// name the problem, and replay of a request repeated while it runs or at any time after, across
// restarts too (trainers retry on their own time-outs: a retry must not count its rewards
// twice). docs/rl.md lists the API.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "cudal1/search/prompt_service.hpp"
#include "cudal1/serve/metrics.hpp"
#include "cudal1/serve/reward_service.hpp"
#include "cudal1/serve/task_catalog.hpp"

namespace cudal1::serve {

struct ServerSettings {
  std::string host = "127.0.0.1";
  int port = 8765;    // 0: any free port
  std::string token;  // when set, every endpoint but /healthz needs "Authorization: Bearer T"
  std::size_t max_body_bytes = 64u << 20;
  std::size_t max_items = 4096;  // items per reward request
  std::size_t threads = 64;      // requests answered at once (each may wait minutes)
  int max_prompts = 64;          // n of GET /v1/prompts
  bool text_logs = true;         // status and flags in OpenRLHF's extra_logs
  // A reward request without a request_id sent again within this many seconds of its answer is
  // taken for a retry and answered from the store; later, for a new request (verl sends each
  // completion alone, and a policy writes the same completion again). With a request_id, the
  // same request is answered from the store whenever it comes.
  double replay_seconds = 900;
};

class RewardServer {
 public:
  RewardServer(RewardService& rewards, search::PromptService& prompts, const TaskCatalog& catalog,
               Metrics& metrics, ServerSettings settings);
  ~RewardServer();
  RewardServer(const RewardServer&) = delete;
  RewardServer& operator=(const RewardServer&) = delete;

  // Binds the address and returns the port. Throws InputError when it cannot be bound.
  int bind();
  // Answers requests until stop(); returns once the requests in flight have been answered.
  void serve();
  // Stops taking connections (callable from any thread).
  void stop();

  struct State;

 private:
  std::unique_ptr<State> state_;
};

// Whether `host` names this machine only: 127.0.0.0/8, ::1 or localhost.
bool is_loopback_host(const std::string& host);

}  // namespace cudal1::serve
