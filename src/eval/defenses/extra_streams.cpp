// Streams other than the legacy default one (where the timer's own flush runs): the timer waits
// for every stream, so the work is timed in full, but the verdict says so.
#include <fmt/format.h>

#include <array>

#include "cudal1/eval/defenses.hpp"
#include "cudal1/eval/verdict.hpp"

namespace cudal1::defenses {
namespace {

constexpr std::array<std::string_view, 1> kExtraStreamsFlags = {flag::kExtraStreams};

std::size_t streams_besides_default(const nlohmann::json& activity) {
  std::size_t n = 0;
  const auto& default_stream = activity.value("default_stream", nlohmann::json());
  for (const auto& s : activity.value("streams", nlohmann::json::array())) {
    if (s != default_stream) ++n;
  }
  return n;
}

void check_extra_streams(DefenseContext& context) {
  const ActivityMeasured& activity = *context.activity;
  const std::size_t candidate = streams_besides_default(activity.candidate);
  if (candidate <= streams_besides_default(activity.reference)) return;
  context.findings.add(flag::kExtraStreams,
                       fmt::format("timing: the candidate used {} stream(s) besides the default "
                                   "one (the timer waits for all of them)",
                                   candidate));
}

}  // namespace

Defense extra_streams() {
  return {"extra_streams", DefensePhase::kActivity, kExtraStreamsFlags,
          "the device trace shows the candidate's work on more streams besides the default one "
          "than the reference's",
          &check_extra_streams};
}

}  // namespace cudal1::defenses
