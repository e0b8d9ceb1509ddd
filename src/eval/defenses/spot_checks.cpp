// Spot checks: about every spot_check_every pairs while timed (and once after the last), both
// sides return their outputs for the same input set and they are compared; a candidate correct in
// the trials but reusing results while timed returns stale outputs.
#include <fmt/format.h>

#include <array>

#include "cudal1/eval/defenses.hpp"
#include "cudal1/eval/verdict.hpp"

namespace cudal1::defenses {
namespace {

constexpr std::array<std::string_view, 1> kSpotCheckFlags = {flag::kCachedOutput};

void check_spot_outputs(DefenseContext& context) {
  const SpotCheckMeasured& pair = *context.spot_check;
  const std::string problem = pair.compare(pair.candidate, pair.reference);
  if (problem.empty()) return;
  context.findings.add(flag::kCachedOutput,
                       fmt::format("{}: outputs differ from the reference's for the same inputs "
                                   "although the trials matched: {}",
                                   pair.where, problem));
}

}  // namespace

Defense spot_checks() {
  return {"spot_checks", DefensePhase::kSpotCheck, kSpotCheckFlags,
          "timed pairs at random return their outputs, compared with the reference's for the same "
          "input set: results reused while timed differ",
          &check_spot_outputs};
}

}  // namespace cudal1::defenses
