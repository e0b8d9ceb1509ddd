#include "review_options.hpp"

#include <fmt/format.h>

#include <iostream>

#include "cudal1/common/error.hpp"
#include "cudal1/common/text_file.hpp"
#include "cudal1/llm/client.hpp"
#include "option_domains.hpp"

namespace cudal1::cli {
namespace {

namespace fs = std::filesystem;

std::shared_ptr<llm::LlmClient> make_review_client(const std::string& spec) {
#ifdef CUDAL1_WITH_LLM
  try {
    return std::shared_ptr<llm::LlmClient>(llm::make_client(spec));
  } catch (const std::invalid_argument& e) {
    throw InputError(fmt::format("--review-llm: {}", e.what()));
  }
#else
  throw InputError(fmt::format(
      "--review-llm {}: this cudal1 was built without the LLM client (libcurl headers were "
      "missing); review on a machine that has it, or leave --review-llm out (suspicious results "
      "are then flagged unreviewed)",
      spec));
#endif
}

fs::path review_prompt_file(const ReviewDefaults& defaults) {
  if (!defaults.prompts_dir.empty()) {
    const fs::path beside = defaults.prompts_dir / "review.md";
    std::error_code ec;
    if (fs::is_regular_file(beside, ec)) return beside;
  }
  return review::ReviewPrompt::default_file();
}

}  // namespace

void add_review_options(CLI::App& command, ReviewArguments& args, bool best_known_option,
                        bool hacks_option) {
  command.add_option("--review-llm", args.llm,
                     "LLM that reviews suspicious results: an OpenAI-compatible base URL, "
                     "cmd:COMMAND, or none (without a reviewer they are flagged unreviewed)");
  command.add_option("--review-model", args.model, "model name for --review-llm");
  command
      .add_option("--review-threshold", args.threshold,
                  "speedups above this are reviewed (as are those above 2x the best known)")
      ->check(positive_number())
      ->capture_default_str();
  command
      .add_option("--review-cases", args.similar_cases,
                  "similar hack cases shown to the reviewer (0: none)")
      ->check(whole_number(0))
      ->capture_default_str();
  if (hacks_option) {
    command
        .add_option("--hacks", args.hacks,
                    "hack corpus directory (default: $CUDAL1_HACKS_DIR, else the repository's "
                    "hacks/)")
        ->check(CLI::ExistingDirectory);
  }
  if (best_known_option) {
    command
        .add_option("--best-known", args.best_known,
                    "best verified speedup known for the task: more than 2x it is reviewed")
        ->check(positive_number());
  }
}

std::optional<review::ReviewerSettings> make_reviewer(const ReviewArguments& args,
                                                      const ReviewDefaults& defaults) {
  const std::string spec = args.llm.empty() ? defaults.llm : args.llm;
  if (spec.empty() || spec == "batch" || spec == "none") return std::nullopt;
  review::ReviewerSettings settings;
  settings.model = args.model.empty() ? defaults.model : args.model;
  if (settings.model.empty()) {
    if (spec.rfind("cmd:", 0) != 0) {
      throw InputError(
          "--review-model is required with an HTTP --review-llm (the model name the server "
          "knows)");
    }
    settings.model = "cmd";
  }
  settings.prompt = review::ReviewPrompt::load(review_prompt_file(defaults));
  settings.client = make_review_client(spec);
  return settings;
}

std::shared_ptr<review::RewardChecker> make_reward_checker(const ReviewArguments& args,
                                                           const ReviewDefaults& defaults) {
  review::SuspicionPolicy policy;
  policy.threshold = args.threshold;
  policy.best_known = args.best_known;
  std::optional<review::ReviewerSettings> reviewer = make_reviewer(args, defaults);
  // A corpus named on the command line must be there; the default one is read when a review
  // needs it, so a missing default corpus never stops an evaluation.
  if (!args.hacks.empty()) {
    review::HackCorpus corpus = review::HackCorpus::load(args.hacks);
    for (const auto& warning : corpus.warnings()) {
      std::cerr << "cudal1: hack corpus: warning: " << warning << std::endl;
    }
    return std::make_shared<review::RewardChecker>(policy, std::move(corpus), std::move(reviewer),
                                                   args.similar_cases);
  }
  return std::make_shared<review::RewardChecker>(policy, review::default_hacks_dir(),
                                                 std::move(reviewer), args.similar_cases);
}

void review_evaluation(const review::RewardChecker& checker, Verdict& verdict, const fs::path& task,
                       const fs::path& candidate) {
  const review::ReviewSubject subject{task.stem().string(), read_file(task), read_file(candidate)};
  const auto result = checker.check(verdict, subject);
  if (!result) return;
  if (!result->corpus_error.empty()) {
    std::cerr << "cudal1 eval: hack corpus: " << result->corpus_error << std::endl;
  }
  std::cerr << "cudal1 eval: " << review::review_line(*result) << std::endl;
}

}  // namespace cudal1::cli
