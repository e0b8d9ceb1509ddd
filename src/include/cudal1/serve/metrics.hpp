// The reward server's counters in the Prometheus text exposition format (GET /metrics):
// evaluations by status, rewards, cache hits, device seconds, raw rewards and request latency as
// histograms; gauges (queue depth, evaluations in flight) are read when the page is written.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cudal1::serve {

// Label pairs in order, e.g. {{"status", "ok"}}.
using Labels = std::vector<std::pair<std::string, std::string>>;

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // The _bucket (cumulative), _sum and _count lines of one labelled series.
  std::string lines(const std::string& name, const Labels& labels) const;

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;  // per bucket, the last one for +Inf
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

struct Gauges {
  std::size_t queue_depth = 0;  // evaluations waiting for a slot
  std::size_t evaluations_in_flight = 0;
  std::size_t requests_in_flight = 0;
  // The engine's worker pools (Evaluator::worker_pools): each pool's numeric counts become
  // cudal1_worker_pool_events_total{pool, event}, its "waiting" cudal1_worker_pool_idle{pool}.
  nlohmann::json worker_pools = nlohmann::json::object();
};

class Metrics {
 public:
  Metrics();

  void count_evaluation(const std::string& status);
  // A suspicious verdict's review by its outcome: hack, legitimate, uncertain, unparseable (the
  // reviewer answered), unreviewed (no reviewer), failed (the request failed).
  void count_review(const std::string& outcome);
  void count_rewards(std::size_t items, std::size_t cached);
  void add_device_seconds(const std::string& device, double seconds);
  // An evaluation's worker loads (its verdict's phases.load_parts): per side, those of new
  // processes (each a CUDA context on a GPU), of ready workers and of kept references.
  void count_loads(const nlohmann::json& load_parts);
  void observe_raw_reward(double raw);
  void observe_request(const std::string& endpoint, int http_status, double seconds);

  // The whole page.
  std::string exposition(const Gauges& gauges) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::uint64_t> evaluations_;  // by status
  std::map<std::string, std::uint64_t> reviews_;      // by outcome
  std::uint64_t rewards_ = 0;
  std::uint64_t cached_ = 0;
  std::map<std::string, double> device_seconds_;
  std::map<std::pair<std::string, std::string>, double> loads_;  // (side, from) -> loads
  Histogram raw_rewards_;
  std::map<std::pair<std::string, int>, std::uint64_t> requests_;
  std::map<std::string, Histogram> latency_;  // by endpoint
};

// A label value escaped for the exposition format (backslash, double quote, newline).
std::string escape_label_value(const std::string& value);

}  // namespace cudal1::serve
