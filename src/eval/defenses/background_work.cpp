// Work the candidate leaves running after its call returns (threads, processes, unsynchronised
// streams) shows in its worker's trace as kernels and copies outside the timed windows.
#include <fmt/format.h>

#include <array>
#include <string>
#include <utility>

#include "cudal1/eval/defenses.hpp"
#include "cudal1/eval/kernel_name.hpp"
#include "cudal1/eval/verdict.hpp"

namespace cudal1::defenses {
namespace {

constexpr std::array<std::string_view, 1> kBackgroundWorkFlags = {flag::kBackgroundWork};

int outside_windows(const nlohmann::json& activity) {
  return activity.value("kernels_outside_windows", 0) + activity.value("copies_outside_windows", 0);
}

// What the first records outside the windows were and where they ran, relative to the window
// before them: what tells a candidate's own work from the harness's.
std::string describe_examples(const nlohmann::json& side) {
  std::string out;
  if (const int lead = side.value("outside_before_harness", 0); lead > 0)
    out += fmt::format("; {} of them just before the harness's own work", lead);
  bool first = true;
  for (const auto& example : side.value("outside_examples", nlohmann::json::array())) {
    if (!example.is_array() || example.size() < 3) continue;
    out += fmt::format("{}{} at {:+.0f} us from a window's start, {:+.0f} us from its end",
                       std::exchange(first, false) ? "; first: " : "; ",
                       example[0].get<std::string>().empty()
                           ? std::string("a copy or memset")
                           : read_kernel_name(example[0].get<std::string>()).readable,
                       example[1].get<double>() / 1e3, example[2].get<double>() / 1e3);
    if (example.size() > 3 && example[3].is_number())
      out +=
          fmt::format(", {:.0f} us before the harness's next work", example[3].get<double>() / 1e3);
  }
  return out;
}

void check_background_work(DefenseContext& context) {
  const ActivityMeasured& activity = *context.activity;
  // The reference's own count is what the harness does outside windows (its flush, its checks).
  if (outside_windows(activity.candidate) <= outside_windows(activity.reference)) return;
  context.findings.add(
      flag::kBackgroundWork,
      fmt::format("timing: {} kernels/copies of the candidate ran outside its "
                  "timed calls ({} outside the reference's){}",
                  outside_windows(activity.candidate), outside_windows(activity.reference),
                  describe_examples(activity.candidate)));
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
