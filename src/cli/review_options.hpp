// The reward checker's options, shared by cudal1 eval and cudal1 optimize (docs/review.md).
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "cudal1/eval/verdict.hpp"
#include "cudal1/review/reward_checker.hpp"

namespace cudal1::cli {

struct ReviewArguments {
  std::string llm;    // --review-llm URL|cmd:COMMAND
  std::string model;  // --review-model
  double threshold = review::SuspicionPolicy{}.threshold;
  std::optional<double> best_known;
  std::string hacks;  // --hacks DIR
  std::size_t similar_cases = 3;
};

// --review-llm, --review-model, --review-threshold, --review-cases, with `hacks_option`
// --hacks, and with `best_known_option` --best-known.
void add_review_options(CLI::App& command, ReviewArguments& args, bool best_known_option,
                        bool hacks_option = true);

// What the options fall back to: the optimiser reviews with its own LLM and model.
struct ReviewDefaults {
  std::string llm;
  std::string model;
  std::filesystem::path prompts_dir;  // review.md is taken from here when it is there
};

// The reviewer the options name, or nullopt (none, batch, or no --review-llm and no default).
// Throws InputError for an LLM spec that is not one or a review prompt that is missing or
// broken.
std::optional<review::ReviewerSettings> make_reviewer(const ReviewArguments& args,
                                                      const ReviewDefaults& defaults = {});

// Builds the checker; throws InputError for options only building it shows unusable (a --hacks
// directory without an index, an LLM spec that is not one, a review prompt that is missing or
// broken). The numbers' domains are checked when the command line is parsed.
std::shared_ptr<review::RewardChecker> make_reward_checker(const ReviewArguments& args,
                                                           const ReviewDefaults& defaults = {});

// cudal1 eval's step after the verdict: reviews it when suspicious and says so on stderr.
void review_evaluation(const review::RewardChecker& checker, Verdict& verdict,
                       const std::filesystem::path& task, const std::filesystem::path& candidate);

}  // namespace cudal1::cli
