// Two workers in one object, for TimingRun's tests: they answer timing's requests (prepare_timing,
// sample, more_unseen, activity) at once with made-up times, and record every request.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cudal1/eval/timing_run.hpp"

namespace cudal1::test_support {

class FakeWorkers : public TimingLink {
 public:
  // A call of one side: the pool set (counting on, not wrapped) or the unseen set it ran on.
  struct Call {
    Side side;
    std::optional<std::size_t> set;
    std::optional<std::size_t> unseen;
    bool seen_before = false;  // this side had called the same input values before
    std::string mode;          // the clock asked for
  };

  std::size_t pool = 4;
  std::size_t unseen = 4;
  // Whether the workers can queue calls behind a hold (a GPU's); else they answer on the window
  // clock and say why.
  bool queueable = false;
  // Times of a call; by default 1 ms for the reference and 0.5 ms for the candidate.
  std::function<double(const Call&)> ms = [](const Call& call) {
    return call.side == Side::kReference ? 1.0 : 0.5;
  };
  // Whether a queued call was held in full; by default all were.
  std::function<bool(const Call&)> held = [](const Call&) { return true; };
  // The output a checked call returns (compared by output_check()); by default its input set's.
  std::function<std::size_t(const Call&)> output = [](const Call& call) {
    return call.unseen ? 1000 + *call.unseen : *call.set;
  };
  // What each side's prepare_timing and more_unseen replies carry.
  nlohmann::json reference_inputs = "digest", candidate_inputs = "digest";
  nlohmann::json reference_unseen_inputs = "unseen", candidate_unseen_inputs = "unseen";
  std::size_t reference_streams = 1, candidate_streams = 1;
  // Each side's trace of its timed calls (the activity request); null: no trace.
  nlohmann::json reference_activity, candidate_activity;

  // Every request in order: {"to": "reference" | "candidate" | "both", "request": ...}.
  std::vector<nlohmann::json> requests;

  wire::Message call(Side side, const nlohmann::json& request, Clock::time_point) override {
    requests.push_back(
        {{"to", side == Side::kReference ? "reference" : "candidate"}, {"request", request}});
    const std::string op = request.at("op");
    if (op == "sample") return sample(side, request);
    if (op == "activity") {
      return {{{"activity", side == Side::kReference ? reference_activity : candidate_activity}},
              {}};
    }
    throw std::runtime_error("the fake workers do not know " + op);
  }

  std::pair<wire::Message, wire::Message> call_both(const nlohmann::json& request,
                                                    Clock::time_point) override {
    requests.push_back({{"to", "both"}, {"request", request}});
    const std::string op = request.at("op");
    if (op == "prepare_timing") {
      const std::size_t asked = request.value("streams", std::size_t{1});
      const auto reply = [&](const nlohmann::json& inputs, const nlohmann::json& unseen_inputs,
                             std::size_t streams) {
        return wire::Message{{{"pool", pool},
                              {"set_bytes", 4096},
                              {"unseen", request.value("unseen", std::size_t{0}) > 0 ? unseen : 0},
                              {"unseen_hidden", true},
                              {"inputs", inputs},
                              {"last_inputs", inputs},
                              {"unseen_inputs", unseen_inputs},
                              {"streams", std::min(asked, streams)}},
                             {}};
      };
      return {reply(candidate_inputs, candidate_unseen_inputs, candidate_streams),
              reply(reference_inputs, reference_unseen_inputs, reference_streams)};
    }
    if (op == "more_unseen") {
      const std::size_t count = request.at("count");
      const auto reply = [&](const nlohmann::json& made) {
        nlohmann::json sets = nlohmann::json::array();
        for (std::size_t i = 0; i < count; ++i) sets.push_back(made);
        return wire::Message{{{"unseen_inputs", sets}, {"first", unseen}}, {}};
      };
      auto replies = std::make_pair(reply(candidate_unseen_inputs), reply(reference_unseen_inputs));
      unseen += count;
      return replies;
    }
    throw std::runtime_error("the fake workers do not know " + op);
  }

  // A SpotCheck comparing the outputs the fake returned.
  static SpotCheck output_check() {
    return [](const wire::Message& candidate, const wire::Message& reference) -> std::string {
      const auto c = candidate.header.at("output").get<std::size_t>();
      const auto r = reference.header.at("output").get<std::size_t>();
      return c == r ? "" : "output " + std::to_string(c) + " where " + std::to_string(r);
    };
  }

  // The requests of one op, to one side or to both.
  std::vector<nlohmann::json> of(const std::string& op, const std::string& to = "") const {
    std::vector<nlohmann::json> found;
    for (const auto& r : requests) {
      if (r["request"]["op"] == op && (to.empty() || r["to"] == to)) found.push_back(r["request"]);
    }
    return found;
  }

 private:
  wire::Message sample(Side side, const nlohmann::json& request) {
    const std::string mode = request.at("mode");
    nlohmann::json samples = nlohmann::json::array();
    std::optional<std::size_t> output;
    const auto check = request.value("check", nlohmann::json());
    std::size_t index = 0;
    for (const auto& set : request.at("sets")) {
      Call call{side, std::nullopt, std::nullopt, false, mode};
      if (set.is_object()) {
        call.unseen = set.at("unseen").get<std::size_t>();
      } else {
        call.set = set.get<std::size_t>();
        call.seen_before = !seen_[side].insert(*call.set % pool).second;
      }
      const double t = ms(call);
      nlohmann::json s = {{"ms", t}, {"host_ms", t * 1.1}, {"kernels", 1}};
      if (mode == "queued" && queueable) {
        s["mode"] = "queued";
        s["held"] = held(call);
      } else {
        s["mode"] = "window";
        if (mode == "queued") s["queued_unavailable"] = "the fake has no device";
      }
      if (check.is_object() && check.at("index") == index) output = this->output(call);
      samples.push_back(s);
      ++index;
    }
    nlohmann::json header = {{"samples", samples}};
    if (output) header["output"] = *output;
    return {header, {}};
  }

  std::map<Side, std::set<std::size_t>> seen_;
};

}  // namespace cudal1::test_support
