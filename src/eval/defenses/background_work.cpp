// Work the candidate leaves running after its call returns (threads, processes, unsynchronised
// streams) shows in its worker's trace as kernels and copies outside the timed windows.
#include <fmt/format.h>

#include <array>

#include "cudal1/eval/defenses.hpp"
#include "cudal1/eval/verdict.hpp"

namespace cudal1::defenses {
namespace {

constexpr std::array<std::string_view, 1> kBackgroundWorkFlags = {flag::kBackgroundWork};

int outside_windows(const nlohmann::json& activity) {
  return activity.value("kernels_outside_windows", 0) + activity.value("copies_outside_windows", 0);
}

void check_background_work(DefenseContext& context) {
  const ActivityMeasured& activity = *context.activity;
  // The reference's own count is what the harness does outside windows (its flush, its checks).
  if (outside_windows(activity.candidate) <= outside_windows(activity.reference)) return;
  context.findings.add(flag::kBackgroundWork,
                       fmt::format("timing: {} kernels/copies of the candidate ran outside its "
                                   "timed calls",
                                   outside_windows(activity.candidate)));
}

}  // namespace

Defense background_work() {
  return {
      "background_work", DefensePhase::kActivity, kBackgroundWorkFlags,
      "the device trace shows more of the candidate's kernels or copies outside its timed calls "
      "than of the reference's",
      &check_background_work};
}

}  // namespace cudal1::defenses
