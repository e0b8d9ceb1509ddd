// cudal1 optimize: the contrastive optimisation loop against an LLM (or batch files).
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "cudal1/common/error.hpp"
#include "cudal1/search/contrastive_prompt.hpp"
#include "cudal1/search/optimizer.hpp"
#include "evaluator_factory.hpp"
#include "guarded_command.hpp"
#include "option_domains.hpp"
#include "output_format.hpp"
#include "progress_line.hpp"
#include "review_options.hpp"
#include "run_options.hpp"
#include "store_option.hpp"

namespace cudal1::cli {
namespace {

struct OptimizeArguments {
  std::string task;
  std::string db = "cudal1.db";
  std::string out = "cudal1-out";
  bool out_given = false;  // on --resume the run's own directory is used unless --out is given
  std::string prompts;
  bool resume = false;
  std::optional<std::int64_t> run;
  search::OptimizeSettings settings;
  EvaluationArguments evaluation;
  LlmArguments llm;
  bool quiet = false;
  std::string format = "auto";
  ReviewArguments review;
  const CLI::App* command = nullptr;  // which options the command line gave
};

std::string describe(const search::OptimizeProgress& p) {
  std::string line = fmt::format(
      "cudal1 optimize: round {}/{} | requests in flight {} | replies waiting {} | "
      "evaluations {} done, {} running | best ",
      p.round, p.rounds, p.requests_in_flight, p.prompts_waiting, p.evaluations_done,
      p.evaluations_running);
  line += p.best_speedup ? fmt::format("{:.3f}x", *p.best_speedup) : "-";
  return line + fmt::format(" | tokens {}", p.tokens);
}

// The one summary line on stderr at the end.
std::string closing_line(const search::OptimizeOutcome& outcome, const std::string& db) {
  const auto& s = outcome.summary;
  std::string best = s.value("best_speedup", nlohmann::json()).is_number()
                         ? fmt::format("best {:.3f}x -> {}", s["best_speedup"].get<double>(),
                                       s.value("best_file", ""))
                         : "no correct candidate yet";
  std::string line =
      fmt::format("{}: run {} | rounds {}/{} | {} candidates, {} evaluations | tokens {} | {}",
                  outcome.stop_reason, outcome.run_id, s.value("rounds", 0),
                  s.value("rounds_planned", 0), s.value("candidates", 0), s.value("evaluations", 0),
                  s.value("prompt_tokens", 0LL) + s.value("completion_tokens", 0LL), best);
  if (outcome.stop_reason == "waiting for batch replies") {
    line += fmt::format(
        "\n{} prompts wait for replies: cudal1 prompts export --db {} --out prompts.jsonl, run "
        "them, then "
        "cudal1 responses import --db {} results.jsonl and cudal1 optimize --db {} --resume",
        outcome.pending_prompts, db, db, db);
  }
  return line;
}

// The latest run of `cudal1 optimize` (the store may hold generate and serve runs too).
std::optional<store::RunRecord> latest_optimize_run(store::Store& store) {
  const auto runs = store.runs();
  const auto it = std::find_if(runs.rbegin(), runs.rend(), [](const store::RunRecord& run) {
    return search::stage_of_run(run.options, run.llm) == search::kStageOptimize;
  });
  return it == runs.rend() ? std::nullopt : std::optional<store::RunRecord>(*it);
}

int run_optimize(OptimizeArguments args) {
  ProgressLine progress(!args.quiet);
  try {
    if (!args.resume && (args.task.empty() || args.llm.llm.empty())) {
      throw InputError(
          "a new run needs --task and --llm (or pass --resume to continue one in --db)");
    }
    store::Store store = open_store(args.db);
    std::optional<store::RunRecord> resumed;
    if (args.resume) {
      resumed = args.run ? store.run(*args.run) : latest_optimize_run(store);
      if (!resumed)
        throw InputError(fmt::format("--resume: no optimize run{} in {}",
                                     args.run ? " " + std::to_string(*args.run) : "", args.db));
    }
    // The LLM: --llm, else (on resume) the one the run was started with.
    const std::string llm_spec = !args.llm.llm.empty() ? args.llm.llm : resumed->llm;
    // A resumed run evaluates as it started, unless the command line says otherwise.
    if (resumed) {
      inherit_evaluation_options(
          *args.command, resumed->options.value("evaluation", nlohmann::json()), args.evaluation);
    } else {
      args.settings.evaluation = evaluation_record(args.evaluation);
    }
    std::unique_ptr<llm::LlmClient> client = make_llm_client(llm_spec, args.llm);
    const EvalOptions eval = evaluation_options(args.evaluation);
    // --resume of the same store collects what the workers published while it was away.
    const std::unique_ptr<Evaluator> owned =
        make_evaluator(evaluator_settings(args.evaluation, "optimize", args.db));
    Evaluator& evaluator = *owned;
    if (resumed && !args.out_given) args.out = resumed->options.value("out", args.out);
    const std::filesystem::path prompts = args.prompts.empty()
                                              ? search::PromptLibrary::default_dir()
                                              : std::filesystem::path(args.prompts);
    // Suspicious verdicts are reviewed by the run's own LLM and model unless --review-llm says
    // otherwise.
    const std::string run_model = !args.settings.model.empty() ? args.settings.model
                                  : resumed                    ? resumed->model
                                                               : "";
    const auto reward_checker = make_reward_checker(args.review, {llm_spec, run_model, prompts});
    search::Optimizer optimizer(evaluator, store, std::move(client), args.out, prompts, eval);
    optimizer.set_reward_checker(reward_checker);
    optimizer.on_progress(
        [&progress](const search::OptimizeProgress& p) { progress.show(describe(p)); });
    const search::OptimizeOutcome outcome =
        resumed ? optimizer.resume(resumed->id) : optimizer.start(args.task, args.settings);
    progress.clear();
    if (text_output(args.format)) {
      std::cerr << closing_line(outcome, args.db)
                << fmt::format("\nsummary: {}/summary.json", args.out) << std::endl;
    } else {
      std::cout << outcome.summary.dump(2) << std::endl;
      std::cerr << closing_line(outcome, args.db) << std::endl;
    }
    return kExitOk;
  } catch (...) {
    progress.clear();
    return exit_after_failure("cudal1 optimize", args.db);
  }
}

}  // namespace

Command add_optimize_command(CLI::App& app) {
  auto a = std::make_shared<OptimizeArguments>();
  CLI::App* cmd = app.add_subcommand(
      "optimize", "Make a task faster with an LLM: contrastive prompts, verified rewards");
  cmd->add_option("--task", a->task, "KernelBench-format task file");
  add_llm_options(*cmd, a->llm);
  cmd->add_option("--model", a->settings.model, "model name sent to the server");
  cmd->add_option("--rounds", a->settings.rounds, "rounds of prompting")
      ->check(whole_number(1))
      ->capture_default_str();
  cmd->add_option("--samples", a->settings.samples, "replies requested per round")
      ->check(whole_number(1))
      ->capture_default_str();
  add_prompt_options(*cmd, a->settings.exemplars, a->settings.sampler, a->settings.show_failures,
                     a->settings.prompt_profile);
  cmd->add_option("--temperature", a->settings.temperature, "sampling temperature of the LLM")
      ->check(non_negative_number())
      ->capture_default_str();
  cmd->add_option("--max-tokens", a->settings.max_tokens, "max_tokens of each request")
      ->check(whole_number(1));
  cmd->add_option("--budget-tokens", a->settings.budget_tokens,
                  "stop sending requests after this many tokens")
      ->check(whole_number(1));
  cmd->add_option("--bucket-width", a->settings.sampler_options.bucket_width,
                  "bucket width in ln(speedup)")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--tau", a->settings.sampler_options.temperature, "bucket sampler temperature")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--islands", a->settings.sampler_options.islands, "islands of the island sampler")
      ->check(whole_number(1))
      ->capture_default_str();
  cmd->add_option("--seed", a->settings.seed, "seed of exemplar sampling")
      ->check(whole_number(0))
      ->capture_default_str();
  add_evaluation_options(*cmd, a->evaluation, kSearchCommands);
  cmd->add_option("--db", a->db, "SQLite store of every prompt, reply, candidate and verdict")
      ->check(output_file())
      ->capture_default_str();
  CLI::Option* out =
      cmd->add_option("--out", a->out, "directory for best.py, summary.json and candidate files")
          ->check(output_folder())
          ->capture_default_str();
  cmd->add_option("--prompts", a->prompts,
                  "directory of the prompt templates (system.md, contrastive.md)")
      ->check(CLI::ExistingDirectory);
  cmd->add_flag("--resume", a->resume, "continue the latest optimize run in --db (or --run ID)");
  cmd->add_option("--run", a->run, "with --resume: the run to continue")->check(whole_number(1));
  cmd->add_flag("--quiet,-q", a->quiet, "no progress line");
  add_format_option(*cmd, a->format);
  add_review_options(*cmd, a->review, false);
  return [a, out, cmd] {
    a->out_given = out->count() > 0;
    a->command = cmd;
    return run_optimize(*a);
  };
}

}  // namespace cudal1::cli
