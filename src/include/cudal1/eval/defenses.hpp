// The checks that flag a candidate while it is timed and once its timing is joined, as one list
// (docs/reward-hacking.md describes each): every defense is a file of src/eval/defenses/ and one
// line of its list (src/eval/defenses/list.cpp). A defense runs at one phase and reads what that
// phase measured from the context; the flags it may raise are names of the flag table
// (flags.hpp). The correctness trials' own checks (lazy output, aliasing, input mutation, ...)
// run inside the trials and are not in this list.
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cudal1/common/wire.hpp"
#include "cudal1/eval/findings.hpp"

namespace cudal1 {

struct TimingConfig;
struct TimingOutcome;

enum class DefensePhase {
  kInputs,     // timing's input pools are made in both processes, from the same seeds
  kSpotCheck,  // a timed pair's outputs came back from both sides
  kSampled,    // sampling ended: a defense may take more pairs (DefenseContext::pairs)
  kActivity,   // both workers' traces of the timed calls were read
  kVerdict,    // the rounds are joined into the evaluation's timing
};
std::string_view to_string(DefensePhase phase);

// kInputs: both prepare_timing replies. A defense that finds the unseen input sets made unlike
// sets `unseen_sets` to 0: timing then takes no pair on them.
struct InputsMeasured {
  const nlohmann::json& reference;  // the reference's reply header
  const nlohmann::json& candidate;
  std::size_t unseen_sets = 0;
};

// Compares a candidate's sample outputs with the reference's; returns the problem, or "" when
// they agree within tolerance (timing.hpp's SpotCheck is this type).
using OutputCheck =
    std::function<std::string(const wire::Message& candidate, const wire::Message& reference)>;

// kSpotCheck: one pair's outputs, for the same input set on both sides.
struct SpotCheckMeasured {
  const wire::Message& candidate;
  const wire::Message& reference;
  std::string where;  // "timing sample 12", "unseen input set 3": begins the evidence
  const OutputCheck& compare;
};

// One more pair the kSampled defenses ask for, alone in its requests and spot-checked.
struct ExtraPair {
  double reference_ms = 0;
  double candidate_ms = 0;
  // Its input values were new to the candidate (an unseen set, or a pool set's first use).
  bool new_values = false;
  // On the queued clock, a call that could not be queued: the times are the host's.
  bool unqueued = false;
};

// What timing lets the kSampled defenses do after sampling (TimingRun's, or a test's).
class PairSource {
 public:
  virtual ~PairSource() = default;
  // One pair on the next unseen input set (`on_unseen_set`), or on the next pool set.
  virtual ExtraPair take_pair(bool on_unseen_set) = 0;
  // Unseen input sets both sides have and no pair has used yet.
  virtual std::size_t unseen_left() const = 0;
  // Unseen input sets made so far, and whether they are kept out of the garbage collector's view.
  virtual std::size_t unseen_made() const = 0;
  virtual bool unseen_hidden() const = 0;
  // Both processes make `count` more unseen sets from the same seeds: how many they made, or
  // nullopt when the candidate's process made other ones.
  virtual std::optional<std::size_t> more_unseen(std::size_t count) = 0;
  // The run's schedule: a defense's random choices continue its sequence.
  virtual std::mt19937_64& schedule() = 0;
};

// kSampled: the kept pairs, in the order taken, and per pair whether its pool set was used for
// the first time in timing.
struct SampledMeasured {
  const std::vector<double>& reference_ms;
  const std::vector<double>& candidate_ms;
  const std::vector<bool>& first_use;
  bool spot_checks = false;  // outputs are checked (the unseen pairs need that)
  PairSource& pairs;
};

// kActivity: each worker's summary of its trace (TimingSide::activity).
struct ActivityMeasured {
  const nlohmann::json& reference;
  const nlohmann::json& candidate;
};

// kVerdict: the joined timing and what the evaluation knows besides.
struct VerdictMeasured {
  const TimingOutcome& timing;
  double output_bytes = 0;          // the outputs of one call (the correctness trials')
  std::optional<double> bandwidth;  // GB/s, measured before timing; nullopt when unknown
  // Measures the bandwidth once more (before a flag rests on it); nullopt when it cannot.
  std::function<std::optional<double>()> bandwidth_again;
  bool on_cpu = false;
  const std::vector<std::string>& own_kernels;  // the kernels the candidate defines
  bool uses_extension = false;                  // it builds a C++/CUDA extension
};

// What a defense is given: where its flags and records go, and the measurements of its phase
// (the one pointer of its phase is set).
struct DefenseContext {
  DefensePhase phase;
  const TimingConfig& config;
  Findings& findings;
  nlohmann::json& details;  // timing's details; the verdict's details at kVerdict
  InputsMeasured* inputs = nullptr;
  const SpotCheckMeasured* spot_check = nullptr;
  const SampledMeasured* sampled = nullptr;
  const ActivityMeasured* activity = nullptr;
  const VerdictMeasured* verdict = nullptr;
};

struct Defense {
  std::string_view name;
  DefensePhase phase;
  std::span<const std::string_view> flags;  // every flag it may raise (flag table names)
  std::string_view summary;                 // one line: what it catches and how
  void (*run)(DefenseContext& context);
};

// Every defense, in the order each phase runs them.
std::span<const Defense> defense_list();
// Runs the defenses of context.phase, in list order.
void run_defenses(DefenseContext& context);
// The list as JSON: [{name, phase, flags, summary}] (what the docs are checked against).
nlohmann::json defenses_to_json();

}  // namespace cudal1
