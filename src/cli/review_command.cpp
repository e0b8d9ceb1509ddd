// cudal1 review: reviews stored candidates flagged unreviewed, later (docs/review.md, "Reviewing
// later").
#include <fmt/format.h>
#include <unistd.h>

#include <iostream>
#include <memory>
#include <stdexcept>

#include "commands.hpp"
#include "cudal1/common/error.hpp"
#include "cudal1/data/stored_review.hpp"
#include "guarded_command.hpp"
#include "option_domains.hpp"
#include "output_format.hpp"
#include "review_options.hpp"
#include "store_option.hpp"

namespace cudal1::cli {
namespace {

struct StoredReviewArguments {
  std::string db = "cudal1.db";
  std::optional<std::int64_t> run;
  std::string stage = "all";
  ReviewArguments review;
  bool quiet = false;
  std::string format = "auto";
};

int review_later(const StoredReviewArguments& args) {
  return guarded("cudal1 review", [&] {
    if (args.review.llm.empty() || args.review.llm == "none" || args.review.llm == "batch") {
      throw InputError(
          "cudal1 review needs a reviewer: --review-llm URL (with --review-model) or "
          "--review-llm cmd:COMMAND");
    }
    const auto checker = make_reward_checker(args.review);
    store::Store store = open_existing_store(args.db, "cudal1 generate, optimize or serve wrote");
    data::StoredReviewFilter filter;
    filter.run = args.run;
    filter.stage = args.stage;
    data::StoredReviewCounts counts;
    try {
      counts = data::review_stored(store, *checker, filter, [&](const std::string& line) {
        if (!args.quiet) std::cerr << "cudal1 review: " << line << std::endl;
      });
    } catch (const std::invalid_argument& e) {
      throw InputError(e.what());
    }
    const nlohmann::json summary = {{"db", args.db},           {"unreviewed", counts.unreviewed},
                                    {"reviews", counts.asked}, {"legitimate", counts.legitimate},
                                    {"hack", counts.hack},     {"uncertain", counts.uncertain},
                                    {"failed", counts.failed}, {"updated", counts.updated}};
    if (!text_output(args.format)) std::cout << summary.dump(2) << std::endl;
    if (counts.unreviewed == 0) {
      std::cerr << fmt::format("cudal1 review: no verdict in {} is flagged unreviewed", args.db)
                << std::endl;
    } else {
      std::cerr << fmt::format(
                       "cudal1 review: {} verdict{} flagged unreviewed, {} review{} asked: {} "
                       "legitimate, {} hack (now rejected), {} uncertain, {} failed (still "
                       "unreviewed)",
                       counts.unreviewed, counts.unreviewed == 1 ? "" : "s", counts.asked,
                       counts.asked == 1 ? "" : "s", counts.legitimate, counts.hack,
                       counts.uncertain, counts.failed)
                << std::endl;
    }
    return kExitOk;
  });
}

}  // namespace

Command add_review_command(CLI::App& app) {
  auto args = std::make_shared<StoredReviewArguments>();
  CLI::App* review = app.add_subcommand(
      "review",
      "Review stored candidates flagged unreviewed with the reward-checking model, updating "
      "their verdicts");
  review->add_option("--db", args->db, "the store")
      ->check(CLI::ExistingFile)
      ->capture_default_str();
  review->add_option("--run", args->run, "only this run")->check(whole_number(1));
  review->add_option("--stage", args->stage, "only runs of this stage")
      ->check(CLI::IsMember({"generate", "optimize", "rl", "all"}))
      ->capture_default_str();
  review
      ->add_option("--review-llm", args->review.llm,
                   "the reviewing LLM: an OpenAI-compatible base URL or cmd:COMMAND")
      ->required();
  review->add_option("--review-model", args->review.model, "model name for --review-llm");
  review
      ->add_option("--review-cases", args->review.similar_cases,
                   "similar hack cases shown to the reviewer (0: none)")
      ->check(whole_number(0))
      ->capture_default_str();
  review
      ->add_option("--hacks", args->review.hacks,
                   "hack corpus directory (default: $CUDAL1_HACKS_DIR, else the repository's "
                   "hacks/)")
      ->check(CLI::ExistingDirectory);
  review->add_flag("--quiet,-q", args->quiet, "no line per review");
  add_format_option(*review, args->format);
  return [args] { return review_later(*args); };
}

}  // namespace cudal1::cli
