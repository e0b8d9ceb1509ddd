// cudal1 optimize: the contrastive optimisation loop against an LLM (or batch files).
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "commands.hpp"
#include "cudal1/common/error.hpp"
#include "cudal1/search/contrastive_prompt.hpp"
#include "cudal1/search/optimizer.hpp"
#include "progress_line.hpp"
#include "review_options.hpp"
#include "timing_options.hpp"

namespace cudal1::cli {
namespace {

struct OptimizeArguments {
  std::string task;
  std::string llm;
  std::string db = "cudal1.db";
  std::string out = "cudal1-out";
  bool out_given = false;  // on --resume the run's own directory is used unless --out is given
  std::string prompts;
  bool resume = false;
  std::optional<std::int64_t> run;
  search::OptimizeSettings settings;
  // Evaluation.
  std::string device = "auto";
  std::string tolerance;
  double time_budget = 30;
  std::size_t trials = 5;
  TimingArguments timing;
  // LLM client.
  int concurrency = 8;
  double request_timeout = 600;
  int max_retries = 6;
  bool quiet = false;
  ReviewArguments review;
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

int run_optimize(OptimizeArguments args) {
  ProgressLine progress(!args.quiet);
  try {
    if (!args.resume && (args.task.empty() || args.llm.empty())) {
      throw InputError(
          "a new run needs --task and --llm (or pass --resume to continue one in --db)");
    }
    store::Store store(args.db);
    std::optional<store::RunRecord> resumed;
    if (args.resume) {
      resumed = args.run ? store.run(*args.run) : store.latest_run();
      if (!resumed)
        throw InputError(fmt::format("--resume: no run{} in {}",
                                     args.run ? " " + std::to_string(*args.run) : "", args.db));
    }
    // The LLM: --llm, else (on resume) the one the run was started with.
    const std::string llm_spec = !args.llm.empty() ? args.llm : resumed->llm;
    std::unique_ptr<llm::LlmClient> client;
    if (llm_spec != "batch") {
      llm::ClientOptions options;
      options.concurrency = args.concurrency;
      options.request_timeout_s = args.request_timeout;
      options.max_retries = args.max_retries;
      try {
        client = llm::make_client(llm_spec, options);
      } catch (const std::invalid_argument& e) {
        throw InputError(fmt::format("--llm: {}", e.what()));
      }
    }
    EvalOptions eval;
    eval.device = args.device;
    eval.tolerance = Tolerance::parse(args.tolerance);
    eval.timing.budget_s = args.time_budget;
    apply_timing_options(args.timing, eval.timing);
    eval.trials = args.trials;
    Evaluator evaluator;
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
    std::cout << outcome.summary.dump(2) << std::endl;
    std::cerr << closing_line(outcome, args.db) << std::endl;
    return kExitOk;
  } catch (const InputError& e) {
    progress.clear();
    std::cerr << "cudal1 optimize: " << e.what() << std::endl;
    return kExitBadInput;
  } catch (const store::StoreError& e) {
    progress.clear();
    std::cerr << "cudal1 optimize: " << e.what() << std::endl;
    return kExitBadInput;
  } catch (const search::LlmAbort& e) {
    progress.clear();
    std::cerr << "cudal1 optimize: " << e.what() << "\nEverything received so far is in " << args.db
              << "; fix the problem and continue with: cudal1 optimize --db " << args.db
              << " --resume" << std::endl;
    return kExitLlmFailure;
  } catch (const std::exception& e) {
    progress.clear();
    std::cerr << "cudal1 optimize: internal error: " << e.what() << std::endl;
    return kExitInternal;
  }
}

}  // namespace

Command add_optimize_command(CLI::App& app) {
  auto a = std::make_shared<OptimizeArguments>();
  CLI::App* cmd = app.add_subcommand(
      "optimize", "Make a task faster with an LLM: contrastive prompts, verified rewards");
  cmd->add_option("--task", a->task, "KernelBench-format task file");
  cmd->add_option("--llm", a->llm,
                  "OpenAI-compatible base URL (http://host:8000/v1), cmd:COMMAND (prompt on stdin, "
                  "reply on stdout), "
                  "or batch (export prompts, import replies)");
  cmd->add_option("--model", a->settings.model, "model name sent to the server");
  cmd->add_option("--rounds", a->settings.rounds, "rounds of prompting")->capture_default_str();
  cmd->add_option("--samples", a->settings.samples, "replies requested per round")
      ->capture_default_str();
  cmd->add_option("--exemplars", a->settings.exemplars, "earlier implementations shown per prompt")
      ->capture_default_str();
  cmd->add_option("--temperature", a->settings.temperature, "sampling temperature of the LLM")
      ->capture_default_str();
  cmd->add_option("--max-tokens", a->settings.max_tokens, "max_tokens of each request");
  cmd->add_option("--budget-tokens", a->settings.budget_tokens,
                  "stop sending requests after this many tokens");
  cmd->add_option("--sampler", a->settings.sampler, "exemplar sampler: bucket, random or islands")
      ->capture_default_str();
  cmd->add_option("--bucket-width", a->settings.sampler_options.bucket_width,
                  "bucket width in ln(speedup)")
      ->capture_default_str();
  cmd->add_option("--tau", a->settings.sampler_options.temperature, "bucket sampler temperature")
      ->capture_default_str();
  cmd->add_option("--islands", a->settings.sampler_options.islands, "islands of the island sampler")
      ->capture_default_str();
  cmd->add_option("--show-failures", a->settings.show_failures,
                  "recent failed attempts shown per prompt")
      ->capture_default_str();
  cmd->add_option("--seed", a->settings.seed, "seed of exemplar sampling")->capture_default_str();
  cmd->add_option("--device", a->device, "auto, cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_option("--tolerance", a->tolerance,
                  "strict, loose, kernelbench or ATOL,RTOL (as cudal1 eval)");
  add_timing_options(*cmd, a->timing);
  cmd->add_option("--time-budget", a->time_budget, "seconds of timing per evaluation")
      ->capture_default_str();
  cmd->add_option("--trials", a->trials, "correctness trials per evaluation")
      ->capture_default_str();
  cmd->add_option("--db", a->db, "SQLite store of every prompt, reply, candidate and verdict")
      ->capture_default_str();
  CLI::Option* out =
      cmd->add_option("--out", a->out, "directory for best.py, summary.json and candidate files")
          ->capture_default_str();
  cmd->add_option("--prompts", a->prompts,
                  "directory of the prompt templates (system.md, contrastive.md)");
  cmd->add_flag("--resume", a->resume, "continue the latest run in --db (or --run ID)");
  cmd->add_option("--run", a->run, "with --resume: the run to continue");
  cmd->add_option("--concurrency", a->concurrency, "LLM requests in flight at once")
      ->capture_default_str();
  cmd->add_option("--request-timeout", a->request_timeout, "seconds for one LLM request")
      ->capture_default_str();
  cmd->add_option("--max-retries", a->max_retries,
                  "retries of a failed request (429, 5xx, time-outs)")
      ->capture_default_str();
  cmd->add_flag("--quiet,-q", a->quiet, "no progress line");
  add_review_options(*cmd, a->review, false);
  return [a, out] {
    a->out_given = out->count() > 0;
    return run_optimize(*a);
  };
}

}  // namespace cudal1::cli
