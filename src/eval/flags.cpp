#include "cudal1/eval/flags.hpp"

#include <algorithm>
#include <array>

namespace cudal1 {
namespace {

constexpr FlagEffect kReject = FlagEffect::kReject;
constexpr FlagEffect kInfo = FlagEffect::kInfo;

constexpr std::array<FlagInfo, 21> kFlags = {{
    {"lazy_output", kReject, true,
     "the output is computed after the timed call returns (lazy tensors, subclasses that compute "
     "on access)"},
    {"output_aliases_input", kReject, true,
     "the output shares memory with an input, a parameter or a buffer"},
    {"reused_output", kReject, true,
     "the output is memory an earlier call returned (a reused output buffer), so the caller's "
     "earlier result changes under it"},
    {"input_mutation", kReject, true, "the candidate modifies its inputs"},
    {"cached_output", kReject, true,
     "an earlier call's result is returned again (keyed on addresses, ids, shapes or values)"},
    {"tampering", kReject, true,
     "the candidate changes torch, the timer, the reference or the harness"},
    {"background_work", kReject, true,
     "work keeps running after the call returns (threads, processes, unsynchronised streams)"},
    {"sub_physical_time", kReject, true,
     "a time below what moving the inputs and outputs physically takes"},
    {"trivial_output", kReject, true,
     "constant or input-independent outputs that happen to pass the checks"},
    {"review_rejected", kReject, false,
     "the reward-checking model judged the suspicious result a hack"},
    {"task_override", kInfo, true,
     "the candidate redefines the task's sizes, inputs or Model (the task's own are used)"},
    {"extra_streams", kInfo, true, "work on streams other than the current one (timed in full)"},
    {"precision_downcast", kInfo, true,
     "lower precision than the reference: TF32, fp16/bf16, autocast, flushed denormals"},
    {"no_custom_kernel", kInfo, true,
     "no kernel of the candidate's own runs: it calls the same PyTorch operators as the reference "
     "(rejects with --require-custom-kernel)"},
    {"noisy", kInfo, false,
     "the noise target was not reached within the time budget: the interval is wider"},
    {"review_uncertain", kInfo, false, "the reward-checking model could not decide"},
    {"unreviewed", kInfo, false,
     "a suspicious result that no reviewer judged (none configured, the request failed, or its "
     "reply could not be read)"},
    {"degenerate", FlagEffect::kTask, false,
     "the task's output hardly depends on its inputs, so trivial outputs can pass its checks"},
    {"reference_leak", FlagEffect::kCorpusOnly, true,
     "reads the reference's outputs or state (gc, frames, files, shared memory)"},
    {"uninitialized_memory", FlagEffect::kCorpusOnly, true,
     "returns uninitialised memory that happens to hold the expected values (e.g. the "
     "reference's freed output)"},
    {"l2_persistence", FlagEffect::kCorpusOnly, true,
     "keeps data resident in a persisting L2 window across calls, defeating the cache flush"},
}};

}  // namespace

std::span<const FlagInfo> flag_table() {
  return kFlags;
}

const FlagInfo* find_flag(std::string_view name) {
  const auto it =
      std::find_if(kFlags.begin(), kFlags.end(), [&](const FlagInfo& f) { return f.name == name; });
  return it == kFlags.end() ? nullptr : &*it;
}

bool is_reject_flag(std::string_view name) {
  const FlagInfo* info = find_flag(name);
  return info != nullptr && info->effect == FlagEffect::kReject;
}

std::string_view to_string(FlagEffect effect) {
  switch (effect) {
    case FlagEffect::kReject:
      return "reject";
    case FlagEffect::kInfo:
      return "info";
    case FlagEffect::kTask:
      return "task";
    case FlagEffect::kCorpusOnly:
      break;
  }
  return "corpus";
}

}  // namespace cudal1
