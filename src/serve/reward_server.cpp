#include "cudal1/serve/reward_server.hpp"

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <random>

#include "cudal1/common/error.hpp"
#include "cudal1/serve/request_replay.hpp"
#include "cudal1/serve/reward_protocol.hpp"

namespace cudal1::serve {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kJson = "application/json";
constexpr const char* kEndpoints =
    "POST /get_reward, POST /v1/rewards, GET /v1/prompts?task=KEY&n=K, GET /v1/tasks, GET "
    "/healthz, GET /metrics";

// Compares without stopping at the first difference, so the time taken says nothing of the
// token.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char difference = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    difference |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return difference == 0;
}

std::string summary_of(const std::vector<RewardResult>& results) {
  std::map<std::string, int> by_status;
  int cached = 0;
  for (const auto& r : results) {
    ++by_status[r.status];
    if (r.cached) ++cached;
  }
  std::string text;
  for (const auto& [status, count] : by_status) {
    text += fmt::format("{}{} {}", text.empty() ? "" : ", ", count, status);
  }
  return fmt::format("{} ({} cached)", text, cached);
}

// A positive integer query parameter, or `fallback` when absent.
long long integer_parameter(const httplib::Request& req, const char* name, long long fallback) {
  if (!req.has_param(name)) return fallback;
  const std::string text = req.get_param_value(name);
  try {
    std::size_t used = 0;
    const long long value = std::stoll(text, &used);
    if (used == text.size()) return value;
  } catch (const std::exception&) {
  }
  throw BadRequest(400, fmt::format("query parameter {}='{}' is not an integer", name, text));
}

}  // namespace

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

struct RewardServer::State {
  RewardService& rewards;
  search::PromptService& prompts;
  const TaskCatalog& catalog;
  Metrics& metrics;
  ServerSettings settings;
  httplib::Server server;
  RequestReplay replay;
  std::atomic<std::size_t> in_flight{0};
  std::atomic<std::uint64_t> requests{0};
  std::atomic<bool> stopping{false};
  std::mutex prompt_mutex;  // the prompt library and sampler are used one request at a time

  State(RewardService& r, search::PromptService& p, const TaskCatalog& c, Metrics& m,
        ServerSettings s)
      : rewards(r), prompts(p), catalog(c), metrics(m), settings(std::move(s)) {}

  std::string new_request_id() {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
    return fmt::format("r{:x}-{}", ms, requests++);
  }

  // Runs a handler with the bookkeeping every endpoint shares: request counting, latency, and
  // errors turned into JSON bodies.
  void answer(const httplib::Request& req, httplib::Response& res,
              const std::function<Answer()>& handler) {
    const auto start = Clock::now();
    ++in_flight;
    Answer answer;
    try {
      answer = handler();
    } catch (const BadRequest& e) {
      answer = {e.status(), error_body(e.what())};
    } catch (const std::exception& e) {
      spdlog::error("cudal1 serve: {} {} failed: {}", req.method, req.path, e.what());
      answer = {500, error_body(fmt::format("internal error: {}", e.what()))};
    }
    --in_flight;
    res.status = answer.status;
    res.set_content(answer.body, answer.status == 200 && req.path == "/metrics"
                                     ? "text/plain; version=0.0.4"
                                     : kJson);
    metrics.observe_request(req.path, answer.status,
                            std::chrono::duration<double>(Clock::now() - start).count());
  }

  // The two reward endpoints: parse, then answer once per distinct request, whatever server
  // process is asked again.
  Answer rewards_answer(const httplib::Request& req, bool openrlhf) {
    RewardRequest parsed = openrlhf ? parse_openrlhf_request(req.body, catalog, settings.max_items)
                                    : parse_native_request(req.body, catalog, settings.max_items);
    RequestIdentity identity;
    identity.key = request_key(req.path, req.body);
    identity.endpoint = req.path;
    identity.step = parsed.step;
    if (parsed.request_id.empty()) identity.replay_seconds = settings.replay_seconds;
    bool shared = false;
    Answer answer = replay.answer_once(
        identity.key,
        [&] {
          const auto start = Clock::now();
          identity.request_id = parsed.request_id.empty() ? new_request_id() : parsed.request_id;
          const ServedAnswer served =
              rewards.answer(parsed.items, identity, [&](const std::vector<RewardResult>& results) {
                const json body = openrlhf ? openrlhf_reply(results, settings.text_logs)
                                           : native_reply(results, identity.request_id);
                return body.dump(-1, ' ', false, json::error_handler_t::replace);
              });
          if (served.replayed) {
            spdlog::info("cudal1 serve: {} answered at {} already; the recorded answer is sent",
                         req.path, served.answered_at);
          } else {
            spdlog::info("cudal1 serve: {} {} items in {:.1f} s: {}", req.path,
                         served.results.size(),
                         std::chrono::duration<double>(Clock::now() - start).count(),
                         summary_of(served.results));
          }
          return Answer{200, served.body};
        },
        shared);
    if (shared)
      spdlog::info("cudal1 serve: {} repeated while in flight; its answer is sent", req.path);
    return answer;
  }

  Answer prompts_answer(const httplib::Request& req) {
    if (!req.has_param("task")) {
      throw BadRequest(400, "GET /v1/prompts needs ?task=KEY (GET /v1/tasks lists the keys)");
    }
    const std::string key = req.get_param_value("task");
    const CatalogTask* task = catalog.find(key);
    if (task == nullptr) {
      throw BadRequest(400, fmt::format("unknown task '{}' (GET /v1/tasks lists the keys)", key));
    }
    const long long n = integer_parameter(req, "n", 1);
    if (n < 1 || n > settings.max_prompts) {
      throw BadRequest(400, fmt::format("n={} is out of range: 1 to {} prompts per request", n,
                                        settings.max_prompts));
    }
    const auto seed = static_cast<std::uint64_t>(
        integer_parameter(req, "seed", static_cast<long long>(std::random_device{}() >> 1)));
    std::lock_guard lock(prompt_mutex);
    const search::PromptTask shown{task->key, task->name, task->source, task->source_sha256};
    return {200, prompts.prompts(shown, static_cast<int>(n), seed).dump()};
  }

  Answer tasks_answer() const {
    json tasks = json::array();
    for (const auto& t : catalog.tasks()) tasks.push_back({{"key", t.key}, {"name", t.name}});
    return {200, json{{"suite", catalog.root().string()}, {"tasks", tasks}}.dump()};
  }

  Answer health_answer() const {
    const auto& options = rewards.options();
    json body = {{"status", stopping ? "draining" : "ok"},
                 {"tasks", catalog.tasks().size()},
                 {"devices", options.devices},
                 {"queue_depth", rewards.queue_depth()},
                 {"evaluations_in_flight", rewards.evaluations_in_flight()},
                 {"requests_in_flight", in_flight.load()}};
    return {stopping ? 503 : 200, body.dump()};
  }

  void install_routes() {
    server.new_task_queue = [threads = settings.threads] {
      return new httplib::ThreadPool(threads);
    };
    server.set_payload_max_length(settings.max_body_bytes);
    // A batch is sent once and answered much later: reading it must not wait on a slow client
    // for ever, and the answer of a long evaluation must still be written.
    server.set_read_timeout(std::chrono::seconds(60));
    server.set_write_timeout(std::chrono::seconds(60));
    server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (settings.token.empty() || req.path == "/healthz") {
        return httplib::Server::HandlerResponse::Unhandled;
      }
      if (same_secret(req.get_header_value("Authorization"), "Bearer " + settings.token)) {
        return httplib::Server::HandlerResponse::Unhandled;
      }
      res.status = 401;
      res.set_content(error_body("missing or wrong bearer token: send the header "
                                 "'Authorization: Bearer <the --token of cudal1 serve>'"),
                      kJson);
      metrics.observe_request(req.path, 401, 0);
      return httplib::Server::HandlerResponse::Handled;
    });
    server.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      std::string message;
      if (res.status == 404) {
        message = fmt::format("no endpoint {} {}; the endpoints are {}", req.method, req.path,
                              kEndpoints);
      } else if (res.status == 413) {
        message = fmt::format("the body is larger than {} bytes (--max-body-mb): split the batch",
                              settings.max_body_bytes);
      } else {
        message = fmt::format("HTTP {} for {} {}", res.status, req.method, req.path);
      }
      res.set_content(error_body(message), kJson);
    });
    server.Post("/get_reward", [this](const httplib::Request& req, httplib::Response& res) {
      answer(req, res, [&] { return rewards_answer(req, true); });
    });
    server.Post("/v1/rewards", [this](const httplib::Request& req, httplib::Response& res) {
      answer(req, res, [&] { return rewards_answer(req, false); });
    });
    server.Get("/v1/prompts", [this](const httplib::Request& req, httplib::Response& res) {
      answer(req, res, [&] { return prompts_answer(req); });
    });
    server.Get("/v1/tasks", [this](const httplib::Request& req, httplib::Response& res) {
      answer(req, res, [&] { return tasks_answer(); });
    });
    server.Get("/healthz", [this](const httplib::Request& req, httplib::Response& res) {
      answer(req, res, [&] { return health_answer(); });
    });
    server.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
      answer(req, res, [&] {
        Gauges gauges;
        gauges.queue_depth = rewards.queue_depth();
        gauges.evaluations_in_flight = rewards.evaluations_in_flight();
        gauges.requests_in_flight = in_flight.load() - 1;  // not this one
        gauges.worker_pools = rewards.worker_pools();
        return Answer{200, metrics.exposition(gauges)};
      });
    });
  }
};

RewardServer::RewardServer(RewardService& rewards, search::PromptService& prompts,
                           const TaskCatalog& catalog, Metrics& metrics, ServerSettings settings)
    : state_(std::make_unique<State>(rewards, prompts, catalog, metrics, std::move(settings))) {
  state_->install_routes();
}

RewardServer::~RewardServer() = default;

int RewardServer::bind() {
  auto& s = *state_;
  if (s.settings.port == 0) {
    const int port = s.server.bind_to_any_port(s.settings.host);
    if (port > 0) return port;
  } else if (s.server.bind_to_port(s.settings.host, s.settings.port)) {
    return s.settings.port;
  }
  throw InputError(fmt::format(
      "cannot listen on {}:{} (the port is taken, or the host is not an address of this "
      "machine); pass another --port or --host",
      s.settings.host, s.settings.port));
}

void RewardServer::serve() {
  state_->server.listen_after_bind();
}

void RewardServer::stop() {
  state_->stopping = true;
  state_->server.stop();
}

}  // namespace cudal1::serve
