// The fourth phase of a timing run: a spot-checked pair after the last sample, then the defenses
// that take pairs of their own (the unseen input values).
#include <fmt/format.h>

#include <array>

#include "cudal1/common/unix_time.hpp"
#include "cudal1/eval/defenses.hpp"
#include "cudal1/eval/timing_run.hpp"
#include "cudal1/worker/protocol.hpp"

namespace cudal1 {

namespace proto = worker_protocol;

// The pairs the kSampled defenses take: each alone in its requests and spot-checked, on the run's
// clock, in random order of the sides.
class TimingRun::ExtraPairs : public PairSource {
 public:
  explicit ExtraPairs(TimingRun& run) : run_(run) {}

  ExtraPair take_pair(bool on_unseen_set) override {
    TimingRun& t = run_;
    const std::optional<std::size_t> set =
        on_unseen_set ? std::optional<std::size_t>(next_unseen_++) : std::nullopt;
    const bool reference_first = (t.schedule_() & 1) != 0;
    const std::uint64_t check_seed = t.schedule_();
    std::array<TimingSide*, 2> order = {&t.ref_, &t.cand_};
    if (!reference_first) std::swap(order[0], order[1]);
    const std::vector<bool> traced = {t.clock_choice_.mode != "window"};
    std::array<TimingSide::Batch, 2> taken;
    for (int k = 0; k < 2; ++k) {
      taken[k] = order[k]->take_batch(t.config_, t.clock_choice_, t.budget_->hard_deadline(),
                                      t.clock_, traced, 0, check_seed, set);
    }
    t.ref_.next_set = t.cand_.next_set = std::max(t.ref_.next_set, t.cand_.next_set);
    const auto& r = reference_first ? taken[0] : taken[1];
    const auto& c = reference_first ? taken[1] : taken[0];
    t.spot_check(*r.checked, *c.checked,
                 set ? fmt::format("unseen input set {}", *set + 1)
                     : fmt::format("timing sample {}", r.first_set + 1));
    const auto& rs = r.samples.front();
    const auto& cs = c.samples.front();
    ExtraPair pair{rs.ms, cs.ms, set || r.first_set < t.pool_, false};
    if (t.clock_choice_.mode == "queued" && !(rs.held && cs.held)) {
      // A call that could not be queued is not dropped (a candidate slow to launch only on
      // values it has not seen would leave no evidence): the pair counts on the host's clock,
      // which holds everything the call took.
      pair = {rs.host_ms, cs.host_ms, pair.new_values, true};
    }
    return pair;
  }

  std::size_t unseen_left() const override {
    return next_unseen_ < run_.unseen_ ? run_.unseen_ - next_unseen_ : 0;
  }
  std::size_t unseen_made() const override { return run_.unseen_; }
  bool unseen_hidden() const override { return run_.hidden_; }

  std::optional<std::size_t> more_unseen(std::size_t count) override {
    TimingRun& t = run_;
    auto [c_more, r_more] = t.workers_.call_both(
        {{proto::request::kOp, proto::op::kMoreUnseen}, {proto::request::kCount, count}},
        t.budget_->hard_deadline());
    const auto& made = r_more.header.at(proto::reply::kUnseenInputs);
    if (made != c_more.header.at(proto::reply::kUnseenInputs) ||
        r_more.header.value(proto::reply::kFirst, std::size_t{0}) != t.unseen_ ||
        c_more.header.value(proto::reply::kFirst, std::size_t{0}) != t.unseen_) {
      return std::nullopt;
    }
    t.unseen_ += made.size();
    return made.size();
  }

  std::mt19937_64& schedule() override { return run_.schedule_; }

 private:
  TimingRun& run_;
  std::size_t next_unseen_ = 0;
};

void TimingRun::final_checks() {
  // One more pair after the last, not timed, so that a spot check always follows every sample.
  if (spots_.on()) {
    const auto pair_start = Clock::now();
    const std::uint64_t check_seed = schedule_();
    const auto r = ref_.take_batch(config_, clock_choice_, budget_->hard_deadline(), clock_, {true},
                                   0, check_seed);
    const auto c = cand_.take_batch(config_, clock_choice_, budget_->hard_deadline(), clock_,
                                    {true}, 0, check_seed);
    spot_check(*r.checked, *c.checked, fmt::format("timing sample {}", pair_index_ + 1));
    spots_.add_time(seconds_since(pair_start));
  }
  ExtraPairs pairs(*this);
  const SampledMeasured sampled{out_.reference_ms, out_.candidate_ms, kept_first_use_, spots_.on(),
                                pairs};
  DefenseContext context{DefensePhase::kSampled, config_, out_.findings, out_.details};
  context.sampled = &sampled;
  run_defenses(context);
}

}  // namespace cudal1
