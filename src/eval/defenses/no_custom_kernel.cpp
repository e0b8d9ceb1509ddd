// Whether any kernel of the candidate's own ran while it was timed (its worker's trace names the
// kernels), or on the CPU, without a trace, whether it builds an extension at all. Informational
// unless --require-custom-kernel (the evaluation then rejects).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>

#include "cudal1/eval/defenses.hpp"
#include "cudal1/eval/timing.hpp"
#include "cudal1/eval/verdict.hpp"

namespace cudal1::defenses {
namespace {

constexpr std::array<std::string_view, 1> kNoCustomKernelFlags = {flag::kNoCustomKernel};

void check_custom_kernel(DefenseContext& context) {
  const VerdictMeasured& measured = *context.verdict;
  const nlohmann::json activity = measured.timing.details.value("activity", nlohmann::json());
  if (activity.is_object() && activity.contains("candidate")) {
    if (activity.at("candidate").value("own_kernels", 0) == 0) {
      context.findings.add(
          flag::kNoCustomKernel,
          measured.own_kernels.empty()
              ? "the candidate defines no kernel of its own"
              : fmt::format("none of the candidate's kernels ({}) ran while it was timed",
                            fmt::join(measured.own_kernels, ", ")));
    }
  } else if (measured.on_cpu && !measured.uses_extension) {
    // No kernel trace on the CPU: an extension of its own is the only sign of custom code.
    context.findings.add(flag::kNoCustomKernel, "the candidate builds no C++/CUDA extension");
  }
}

}  // namespace

Defense no_custom_kernel() {
  return {"no_custom_kernel", DefensePhase::kVerdict, kNoCustomKernelFlags,
          "no kernel the candidate defines ran while it was timed (on the CPU: it builds no "
          "extension); rejects with --require-custom-kernel",
          &check_custom_kernel};
}

}  // namespace cudal1::defenses
