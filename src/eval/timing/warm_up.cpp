// The second phase of a timing run: warm-up on the window clock, then the choice of clock.
#include <algorithm>

#include "cudal1/common/unix_time.hpp"
#include "cudal1/eval/timing_run.hpp"

namespace cudal1 {

Clock::time_point TimingRun::after_budget() const {
  const auto budget =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(config_.budget_s));
  const auto grace = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(config_.call_timeout_s));
  return Clock::now() + budget + grace;
}

void TimingRun::warm_up() {
  const auto warmup_start = Clock::now();
  const auto deadline = after_budget();
  const auto start = Clock::now();
  ClockChoice choice;
  double ref_total = 0, cand_total = 0, slowest_host_ms = 0;
  std::size_t calls = 0;
  const WarmupRule rule(config_, streams_);
  // One pair per request: no batch has been measured yet to size one.
  while (rule.more(calls, ref_total, cand_total, seconds_since(start))) {
    const auto r = ref_.take_batch(config_, choice, deadline, clock_, {true}, std::nullopt, 0);
    const auto c = cand_.take_batch(config_, choice, deadline, clock_, {true}, std::nullopt, 0);
    const auto& rs = r.samples.front();
    const auto& cs = c.samples.front();
    choice.traced = rs.kernel_ms && cs.kernel_ms;
    ref_total += rs.ms;
    cand_total += cs.ms;
    // The first call may still compile or autotune; later ones show how long queuing takes.
    if (calls > 0 || config_.min_warmup_calls <= 1)
      slowest_host_ms = std::max({slowest_host_ms, rs.host_ms, cs.host_ms});
    ++calls;
  }
  if (config_.mode != "window") {
    const ClockChoice queued = probe_queued_clock(choice.traced, slowest_host_ms, deadline, calls);
    if (queued.reason.empty()) {
      choice = queued;
    } else {
      choice.reason = queued.reason;
      choice.missed_hold = queued.missed_hold;
    }
  }
  // A probe may have ended after one side's call: both sides take the same input set next, as
  // the spot checks require.
  ref_.next_set = cand_.next_set = std::max(ref_.next_set, cand_.next_set);
  for (TimingSide* s : {&ref_, &cand_}) {
    s->overhead_ms.clear();
    s->request_ms.clear();
  }
  clock_choice_ = choice;
  out_.details["warmup_calls"] = calls;
  out_.details["mode"] = choice.mode;
  if (!choice.reason.empty()) out_.details["mode_reason"] = choice.reason;
  if (choice.missed_hold) out_.details["missed_hold"] = true;
  if (choice.mode == "queued") out_.details["hold_timeout_ms"] = choice.hold_timeout_ms;
  out_.details["warmup_s"] = seconds_since(warmup_start);
}

ClockChoice TimingRun::probe_queued_clock(bool traceable, double slowest_host_ms,
                                          Clock::time_point deadline, std::size_t& calls) {
  // The queued clock is used only when every probe of both sides was held.
  ClockChoice queued{"queued", "", hold_timeout_ms(config_, slowest_host_ms), traceable};
  const std::vector<bool> traced(std::max<std::size_t>(1, config_.queued_probe_calls), true);
  // Twice at most: a call left unqueued by chance (the host descheduled) gets a second try,
  // with four times the time-out (within the most allowed): a thread that waited once for a busy
  // host's cores may wait as long again. The time-out only says when to give up; a call that
  // waits for the device cannot be queued however long the hold waits.
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (attempt > 0) {
      queued.hold_timeout_ms =
          std::max(queued.hold_timeout_ms,
                   std::min(config_.hold_timeout_max_ms, 4 * queued.hold_timeout_ms));
    }
    queued.reason.clear();
    for (TimingSide* s : {&ref_, &cand_}) {
      const auto probe = s->take_batch(config_, queued, deadline, clock_, traced, std::nullopt, 0);
      for (const auto& sample : probe.samples) {
        queued.reason = queued_refusal(*s, sample, queued);
        if (!queued.reason.empty()) break;
      }
      calls += probe.samples.size();
      if (!queued.reason.empty()) break;
    }
    // Refused for missing the hold, not because a side cannot be queued: worth a second try.
    queued.missed_hold =
        !queued.reason.empty() && queued.reason.rfind("queued clock unavailable", 0) != 0;
    if (!queued.missed_hold) break;
    out_.details["queued_probe_retried"] = true;
  }
  return queued;
}

}  // namespace cudal1
