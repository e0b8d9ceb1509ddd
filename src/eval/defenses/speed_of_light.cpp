// A floor from physics: a call reads every input and writes every output at least once, which at
// the device's measured bandwidth takes bytes / bandwidth. A tenth of the candidate's calls
// under it (with a margin) means it did not do the work: results kept, or work done elsewhere.
#include <fmt/format.h>

#include <array>

#include "cudal1/eval/defenses.hpp"
#include "cudal1/eval/statistics.hpp"
#include "cudal1/eval/timing.hpp"
#include "cudal1/eval/verdict.hpp"

namespace cudal1::defenses {
namespace {

constexpr std::array<std::string_view, 1> kSpeedOfLightFlags = {flag::kSubPhysicalTime};

void check_speed_of_light(DefenseContext& context) {
  const VerdictMeasured& measured = *context.verdict;
  const TimingOutcome& timing = measured.timing;
  std::optional<double> gbs = measured.bandwidth;
  if (!gbs || *gbs <= 0 || timing.candidate_ms.empty() || timing.reference_ms.empty()) return;
  const double bytes = timing.details.value("input_set_bytes", 0.0) + measured.output_bytes;
  // On the CPU the memory bus is shared with whatever else runs, so the margin is wider.
  const double factor = measured.on_cpu ? 0.5 : 0.9;
  // A fast tenth of the samples is enough: no legitimate call is ever faster than physics, while
  // a cache that only hits sometimes pulls the low quantile, not the median, under the floor.
  const double candidate_fast = quantile(timing.candidate_ms, 0.1);
  const double reference_fast = quantile(timing.reference_ms, 0.1);
  // Reading every input and writing every output once, at the measured bandwidth.
  const auto floor_of = [&](double at_gbs) { return bytes / (at_gbs * 1e6); };
  // The floor must never be too high: before flagging, the bandwidth is measured again (other
  // work on a CPU's memory bus made one measurement 11 GB/s where calls had moved 23 GB/s).
  std::optional<double> first_gbs;
  if (candidate_fast < factor * floor_of(*gbs) && reference_fast >= factor * floor_of(*gbs) &&
      measured.bandwidth_again) {
    const auto again = measured.bandwidth_again();
    if (again && *again > *gbs) {
      first_gbs = gbs;
      gbs = again;
    }
  }
  const double floor_ms = floor_of(*gbs);
  nlohmann::json& record = context.details["speed_of_light"];
  record = {{"bytes", bytes},
            {"bandwidth_gbs", *gbs},
            {"floor_ms", floor_ms},
            {"factor", factor},
            {"candidate_p10_ms", candidate_fast},
            {"reference_p10_ms", reference_fast}};
  if (first_gbs) record["first_bandwidth_gbs"] = *first_gbs;
  // A task whose reference itself beats the floor does not read all of its inputs: no floor.
  if (reference_fast < factor * floor_ms) {
    record["applies"] = false;
    return;
  }
  if (candidate_fast < factor * floor_ms) {
    context.findings.add(
        flag::kSubPhysicalTime,
        fmt::format("a tenth of the candidate's calls took under {:.4g} ms; moving its {:.4g} MB "
                    "of inputs and outputs once at {:.0f} GB/s takes at least {:.4g} ms",
                    candidate_fast, bytes / 1e6, *gbs, floor_ms));
  }
}

}  // namespace

Defense speed_of_light() {
  return {"speed_of_light", DefensePhase::kVerdict, kSpeedOfLightFlags,
          "a tenth of the candidate's calls faster than moving its inputs and outputs once at the "
          "device's measured bandwidth (a margin below it)",
          &check_speed_of_light};
}

}  // namespace cudal1::defenses
