#include "cudal1/serve/metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace cudal1::serve {
namespace {

// Raw rewards are speedups (or the floor): buckets around 1x, where the policy's progress shows.
const std::vector<double> kRewardBounds = {0, 0.5, 0.9, 1.0, 1.1, 1.25, 1.5, 2, 3, 5, 10};
// Requests answer in milliseconds (cached rewards, prompts) to many minutes (a batch of new
// kernels built with nvcc and timed).
const std::vector<double> kLatencyBounds = {0.01, 0.05, 0.1, 0.5, 1,   5,   10,
                                            30,   60,   120, 300, 600, 1800};

std::string label_text(const Labels& labels) {
  if (labels.empty()) return "";
  std::string text = "{";
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) text += ",";
    text += labels[i].first + "=\"" + escape_label_value(labels[i].second) + "\"";
  }
  return text + "}";
}

std::string number(double value) {
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (std::isnan(value)) return "NaN";
  return fmt::format("{}", value);
}

void header(std::string& page, const std::string& name, const std::string& type,
            const std::string& help) {
  page += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

std::string escape_label_value(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {
  std::sort(bounds_.begin(), bounds_.end());
}

void Histogram::observe(double value) {
  const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), value);
  ++counts_[static_cast<std::size_t>(it - bounds_.begin())];
  sum_ += value;
  ++count_;
}

std::string Histogram::lines(const std::string& name, const Labels& labels) const {
  std::string text;
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    Labels with_le = labels;
    with_le.emplace_back("le", i < bounds_.size() ? number(bounds_[i]) : "+Inf");
    text += fmt::format("{}_bucket{} {}\n", name, label_text(with_le), cumulative);
  }
  text += fmt::format("{}_sum{} {}\n", name, label_text(labels), number(sum_));
  text += fmt::format("{}_count{} {}\n", name, label_text(labels), count_);
  return text;
}

Metrics::Metrics() : raw_rewards_(kRewardBounds) {}

void Metrics::count_evaluation(const std::string& status) {
  std::lock_guard lock(mutex_);
  ++evaluations_[status];
}

void Metrics::count_review(const std::string& outcome) {
  std::lock_guard lock(mutex_);
  ++reviews_[outcome];
}

void Metrics::count_rewards(std::size_t items, std::size_t cached) {
  std::lock_guard lock(mutex_);
  rewards_ += items;
  cached_ += cached;
}

void Metrics::add_device_seconds(const std::string& device, double seconds) {
  if (!(seconds > 0)) return;
  std::lock_guard lock(mutex_);
  device_seconds_[device] += seconds;
}

void Metrics::count_loads(const nlohmann::json& load_parts) {
  if (!load_parts.is_object()) return;
  std::lock_guard lock(mutex_);
  for (const char* side : {"reference", "candidate"}) {
    const auto& parts = load_parts.value(side, nlohmann::json::object());
    if (!parts.is_object()) continue;
    const double loads = parts.value("loads", 0.0);
    const double ready = parts.value("ready", 0.0);
    const double kept = parts.value("kept", 0.0);
    if (!(loads > 0)) continue;
    loads_[{side, "new"}] += std::max(0.0, loads - ready - kept);
    loads_[{side, "ready"}] += ready;
    loads_[{side, "kept"}] += kept;
  }
}

void Metrics::observe_raw_reward(double raw) {
  std::lock_guard lock(mutex_);
  raw_rewards_.observe(raw);
}

void Metrics::observe_request(const std::string& endpoint, int http_status, double seconds) {
  std::lock_guard lock(mutex_);
  ++requests_[{endpoint, http_status}];
  latency_.try_emplace(endpoint, kLatencyBounds).first->second.observe(seconds);
}

std::string Metrics::exposition(const Gauges& gauges) const {
  std::lock_guard lock(mutex_);
  std::string page;
  header(page, "cudal1_evaluations_total", "counter",
         "Evaluations finished (each distinct code once), by verdict status.");
  for (const auto& [status, count] : evaluations_) {
    page += fmt::format("cudal1_evaluations_total{} {}\n", label_text({{"status", status}}), count);
  }
  header(page, "cudal1_reviews_total", "counter",
         "Suspicious verdicts sent to the reward checker, by outcome (hack: rejected, floor "
         "reward; unreviewed: no reviewer configured; failed: the review request failed).");
  for (const auto& [outcome, count] : reviews_) {
    page += fmt::format("cudal1_reviews_total{} {}\n", label_text({{"outcome", outcome}}), count);
  }
  header(page, "cudal1_rewards_total", "counter", "Rewards answered, one per item of a request.");
  page += fmt::format("cudal1_rewards_total {}\n", rewards_);
  header(page, "cudal1_reward_cache_hits_total", "counter",
         "Rewards answered from an earlier evaluation of the same code for the same task.");
  page += fmt::format("cudal1_reward_cache_hits_total {}\n", cached_);
  header(page, "cudal1_queue_depth", "gauge", "Evaluations waiting for a slot.");
  page += fmt::format("cudal1_queue_depth {}\n", gauges.queue_depth);
  header(page, "cudal1_evaluations_in_flight", "gauge", "Evaluations running now.");
  page += fmt::format("cudal1_evaluations_in_flight {}\n", gauges.evaluations_in_flight);
  header(page, "cudal1_requests_in_flight", "gauge", "HTTP requests being answered now.");
  page += fmt::format("cudal1_requests_in_flight {}\n", gauges.requests_in_flight);
  header(
      page, "cudal1_worker_loads_total", "counter",
      "Worker loads of the evaluations, by side and where the worker came from: new (a process "
      "of its own, a CUDA context on a GPU), ready (made ahead) or kept (a reference worker of an "
      "earlier evaluation of the task).");
  for (const auto& [key, count] : loads_) {
    page += fmt::format("cudal1_worker_loads_total{} {}\n",
                        label_text({{"side", key.first}, {"from", key.second}}), number(count));
  }
  header(page, "cudal1_worker_pool_events_total", "counter",
         "The engine's ready workers and kept references: made, taken, evicted, expired, ...");
  std::string idle, waited;
  for (const auto& [pool, counts] : gauges.worker_pools.items()) {
    if (!counts.is_object()) continue;
    for (const auto& [event, count] : counts.items()) {
      if (!count.is_number()) continue;
      const std::string value = number(count.get<double>());
      if (event == "waiting") {
        idle += fmt::format("cudal1_worker_pool_idle{} {}\n", label_text({{"pool", pool}}), value);
      } else if (event == "waited_s") {  // seconds, not events
        waited += fmt::format("cudal1_worker_pool_wait_seconds_total{} {}\n",
                              label_text({{"pool", pool}}), value);
      } else {
        page += fmt::format("cudal1_worker_pool_events_total{} {}\n",
                            label_text({{"pool", pool}, {"event", event}}), value);
      }
    }
  }
  header(page, "cudal1_worker_pool_idle", "gauge", "Workers a pool holds idle now.");
  page += idle;
  header(page, "cudal1_worker_pool_wait_seconds_total", "counter",
         "Seconds evaluations waited for a pool's worker (kept references: --task-references).");
  page += waited;
  header(page, "cudal1_device_busy_seconds_total", "counter",
         "Seconds each device was held for correctness and timing phases.");
  for (const auto& [device, seconds] : device_seconds_) {
    page += fmt::format("cudal1_device_busy_seconds_total{} {}\n", label_text({{"device", device}}),
                        number(seconds));
  }
  header(page, "cudal1_raw_reward", "histogram", "Raw rewards answered (speedups, or the floor).");
  page += raw_rewards_.lines("cudal1_raw_reward", {});
  header(page, "cudal1_http_requests_total", "counter", "HTTP requests, by endpoint and status.");
  for (const auto& [key, count] : requests_) {
    page += fmt::format("cudal1_http_requests_total{} {}\n",
                        label_text({{"endpoint", key.first}, {"code", std::to_string(key.second)}}),
                        count);
  }
  header(page, "cudal1_request_duration_seconds", "histogram",
         "Time to answer an HTTP request, by endpoint.");
  for (const auto& [endpoint, histogram] : latency_) {
    page += histogram.lines("cudal1_request_duration_seconds", {{"endpoint", endpoint}});
  }
  return page;
}

}  // namespace cudal1::serve
