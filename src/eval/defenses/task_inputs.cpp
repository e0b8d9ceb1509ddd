// The timing pools come from the task's get_inputs() under the same seeds in both processes: the
// candidate's must have produced the same bytes (a digest of each set), or it changed the task
// (patched sizes, get_inputs or random generators).
#include <array>

#include "cudal1/eval/defenses.hpp"
#include "cudal1/eval/verdict.hpp"

namespace cudal1::defenses {
namespace {

constexpr std::array<std::string_view, 1> kTaskInputsFlags = {flag::kTampering};

void check_task_inputs(DefenseContext& context) {
  InputsMeasured& inputs = *context.inputs;
  const auto differ = [&](const char* key) {
    return inputs.reference.value(key, nlohmann::json()) !=
           inputs.candidate.value(key, nlohmann::json());
  };
  if (differ("unseen_inputs")) {
    context.findings.add(flag::kTampering,
                         "timing: the unseen input sets generated in the candidate's process "
                         "differ from the task's (patched sizes, get_inputs or random generators)");
    inputs.unseen_sets = 0;  // no comparison on sets that are not the task's
  }
  if (differ("inputs") || differ("last_inputs")) {
    context.findings.add(flag::kTampering,
                         "timing: the input sets generated in the candidate's process differ from "
                         "the task's (patched sizes, get_inputs or random generators)");
  }
}

}  // namespace

Defense task_inputs() {
  return {"task_inputs", DefensePhase::kInputs, kTaskInputsFlags,
          "the timing input sets (pool and unseen) made in the candidate's process must equal the "
          "reference's, made from the same seeds",
          &check_task_inputs};
}

}  // namespace cudal1::defenses
