// cudal1 generate: the one-shot prompt for every task of a suite, every reply evaluated and
// stored (CUDA-L1's stage 1, and with --round K the rounds of stage 2).
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "commands.hpp"
#include "cudal1/common/error.hpp"
#include "cudal1/data/sft_dataset.hpp"
#include "cudal1/eval/devices.hpp"
#include "cudal1/search/contrastive_prompt.hpp"
#include "cudal1/search/optimizer.hpp"
#include "cudal1/search/suite_generation.hpp"
#include "cudal1/task/suite.hpp"
#include "guarded_command.hpp"
#include "option_domains.hpp"
#include "output_format.hpp"
#include "progress_line.hpp"
#include "review_options.hpp"
#include "run_options.hpp"
#include "store_option.hpp"

namespace cudal1::cli {
namespace {

struct GenerateArguments {
  std::string suite;
  std::string db = "cudal1.db";
  std::string out = "cudal1-generate";
  std::string prompts;
  std::string levels;
  bool resume = false;
  std::optional<int> round;
  search::GenerateSettings settings;
  std::size_t tasks_at_once = 0;
  unsigned jobs = 0;
  EvaluationArguments evaluation;
  LlmArguments llm;
  bool quiet = false;
  std::string format = "auto";
  const CLI::App* command = nullptr;  // which options the command line gave
  ReviewArguments review;
};

std::string describe(const search::GenerateProgress& p) {
  std::string line = fmt::format("cudal1 generate: {}/{} tasks done", p.done, p.tasks);
  if (p.resumed > 0) line += fmt::format(" ({} earlier)", p.resumed);
  line += fmt::format(
      ", {} running | requests in flight {} | replies waiting {} | evaluations {} done, {} "
      "running | tokens {} | {}",
      p.running, p.requests_in_flight, p.prompts_waiting, p.evaluations_done, p.evaluations_running,
      p.tokens, format_duration(p.elapsed_s));
  if (p.eta_s) line += fmt::format(", ETA {}", format_duration(*p.eta_s));
  return line;
}

std::string closing_line(const search::GenerateOutcome& outcome, const std::string& db,
                         std::size_t unreviewed) {
  std::string line = fmt::format("cudal1 generate: {}: {} of {} tasks finished",
                                 outcome.stop_reason, outcome.finished, outcome.tasks);
  for (const auto& s : outcome.summaries) {
    line += fmt::format(
        "\n  round {}: {} tasks, {} with a verified candidate, {} candidates, {} "
        "evaluations, {} tokens -> {}/summary.json",
        s.value("round", 0), s.value("tasks", 0), s.value("tasks_verified", 0),
        s.value("candidates", 0), s.value("evaluations", 0),
        s.value("prompt_tokens", 0LL) + s.value("completion_tokens", 0LL), s.value("dir", ""));
  }
  if (outcome.stop_reason == "waiting for batch replies") {
    line += fmt::format(
        "\n{} prompts wait for replies: cudal1 prompts export --db {} --all --out prompts.jsonl, "
        "run them, then cudal1 responses import --db {} results.jsonl and cudal1 generate --db {} "
        "--resume",
        outcome.pending_prompts, db, db, db);
  } else if (outcome.stop_reason == "finished") {
    line += fmt::format(
        "\nexport the verified replies with: cudal1 data sft --db {} --out sft.jsonl", db);
    if (unreviewed > 0) {
      line += fmt::format(
          "\n{} verified repl{} suspiciously fast and never reviewed: data sft leaves {} out "
          "until cudal1 review --db {} --review-llm URL|cmd:COMMAND reviews {}",
          unreviewed, unreviewed == 1 ? "y is" : "ies are", unreviewed == 1 ? "it" : "them", db,
          unreviewed == 1 ? "it" : "them");
    }
  }
  return line;
}

// Enough runs at once to keep the client's requests in flight while earlier replies build and
// run: twice the requests one round of all samples takes.
std::size_t default_tasks_at_once(const LlmArguments& llm, int samples) {
  const auto per_task = static_cast<std::size_t>(std::max(1, samples));
  const auto requests = static_cast<std::size_t>(std::max(1, llm.concurrency));
  return std::max<std::size_t>(2, (2 * requests + per_task - 1) / per_task);
}

int run_generate(GenerateArguments args) {
  ProgressLine progress(!args.quiet);
  try {
    if (!args.resume && (args.suite.empty() || args.llm.llm.empty())) {
      throw InputError(
          "cudal1 generate needs --suite DIR, --llm and --model (or --resume to continue the "
          "runs in --db)");
    }
    if (!args.levels.empty()) args.settings.levels = parse_levels(args.levels);
    if (args.round) args.settings.round = *args.round;
    store::Store store = args.resume
                             ? open_existing_store(args.db, "of the generate runs to resume")
                             : open_store(args.db);
    // On resume, what the command line does not give is the recorded runs': the LLM and model
    // of the first generate run, the evaluation options of the latest one of the round asked
    // for (so that resumed runs evaluate as they started).
    std::string llm_spec = args.llm.llm;
    std::string run_model = args.settings.model;
    if (args.resume) {
      nlohmann::json recorded;
      for (const auto& run : store.runs()) {
        if (search::stage_of_run(run.options, run.llm) != search::kStageGenerate) continue;
        if (llm_spec.empty()) llm_spec = run.llm;
        if (run_model.empty()) run_model = run.model;
        if (args.round && run.options.value("round", -1) != *args.round) continue;
        if (run.options.contains("evaluation")) recorded = run.options["evaluation"];
      }
      inherit_evaluation_options(*args.command, recorded, args.evaluation);
    }
    if (llm_spec.empty()) {
      throw InputError(
          fmt::format("--resume: {} holds no cudal1 generate run to continue", args.db));
    }
    args.settings.evaluation = evaluation_record(args.evaluation);
    std::shared_ptr<llm::LlmClient> client = make_llm_client(llm_spec, args.llm);
    EvaluatorSettings where = evaluator_settings(args.evaluation, "generate", args.db);
    where.engine.build_jobs = args.jobs;
    const std::unique_ptr<Evaluator> owned = make_evaluator(where);
    Evaluator& evaluator = *owned;
    const EvalOptions eval = evaluation_options(args.evaluation);
    const auto devices =
        resolve_devices(args.evaluation.device, evaluator.toolchain().cuda_available,
                        args.evaluation.device != "cpu" ? visible_gpu_count() : std::nullopt);
    const std::filesystem::path prompts = args.prompts.empty()
                                              ? search::PromptLibrary::default_dir()
                                              : std::filesystem::path(args.prompts);
    search::SuiteGeneration generation(evaluator, store, client, args.out, prompts, eval, devices);
    generation.set_reward_checker(make_reward_checker(args.review, {llm_spec, run_model, prompts}));
    generation.set_tasks_at_once(args.tasks_at_once > 0
                                     ? args.tasks_at_once
                                     : default_tasks_at_once(args.llm, args.settings.samples));
    generation.on_progress(
        [&progress](const search::GenerateProgress& p) { progress.show(describe(p)); });
    const search::GenerateOutcome outcome = args.resume
                                                ? generation.resume(args.round)
                                                : generation.generate(args.suite, args.settings);
    progress.clear();
    nlohmann::json summaries(outcome.summaries);
    if (!text_output(args.format))
      std::cout << (summaries.size() == 1 ? summaries[0] : summaries).dump(2) << std::endl;
    data::SftFilter generated;
    generated.stage = search::kStageGenerate;
    const std::size_t unreviewed = data::sft_dataset(store, generated).counts.count("unreviewed");
    std::cerr << closing_line(outcome, args.db, unreviewed) << std::endl;
    return kExitOk;
  } catch (...) {
    progress.clear();
    return exit_after_failure("cudal1 generate", args.db);
  }
}

}  // namespace

Command add_generate_command(CLI::App& app) {
  auto a = std::make_shared<GenerateArguments>();
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "Ask an LLM for every task of a suite with the one-shot prompt; evaluate and store every "
      "reply (training stages 1 and 2)");
  cmd->add_option("--suite", a->suite, "suite directory in KernelBench layout (level1/1_Name.py)");
  add_llm_options(*cmd, a->llm);
  cmd->add_option("--model", a->settings.model, "model name sent to the server");
  cmd->add_option("--samples", a->settings.samples, "replies requested per task")
      ->check(whole_number(1))
      ->capture_default_str();
  cmd->add_option("--round", a->round,
                  "the run's round tag: 0 (default) for stage 1, 1, 2, ... for the rounds of "
                  "stage 2; with --resume, only that round's runs")
      ->check(whole_number(0));
  cmd->add_option("--exemplars", a->settings.exemplars,
                  "earlier verified implementations of the task shown per prompt, with their "
                  "speedups and profiles (default: 0 in round 0, 2 in later rounds)")
      ->check(whole_number(0));
  cmd->add_option("--prompt-profile", a->settings.prompt_profile,
                  "what each exemplar's measurements say in the prompt: none, summary or full")
      ->check(CLI::IsMember({"none", "summary", "full"}))
      ->capture_default_str();
  cmd->add_option("--levels", a->levels, "only these levels, e.g. 1,2");
  cmd->add_option("--limit", a->settings.limit, "only the first N selected tasks")
      ->check(whole_number(1));
  cmd->add_option("--temperature", a->settings.temperature, "sampling temperature of the LLM")
      ->check(non_negative_number())
      ->capture_default_str();
  cmd->add_option("--max-tokens", a->settings.max_tokens, "max_tokens of each request")
      ->check(whole_number(1));
  add_evaluation_options(*cmd, a->evaluation, kSearchCommands);
  cmd->add_option("--jobs", a->jobs,
                  "candidate builds at once (default: one per core this process may use)")
      ->check(whole_number(1));
  cmd->add_option("--tasks-at-once", a->tasks_at_once,
                  "tasks prompted and evaluated at once (default: enough to keep --concurrency "
                  "requests busy)")
      ->check(whole_number(1));
  cmd->add_option("--db", a->db, "SQLite store of every prompt, reply, candidate and verdict")
      ->check(output_file())
      ->capture_default_str();
  cmd->add_option("--out", a->out,
                  "directory: OUT/round<K>/summary.json and one run directory per task")
      ->check(output_folder())
      ->capture_default_str();
  cmd->add_option("--prompts", a->prompts,
                  "directory of the prompt templates (system.md, generate.md)")
      ->check(CLI::ExistingDirectory);
  cmd->add_flag("--resume", a->resume, "continue the unfinished generate runs in --db");
  cmd->add_flag("--quiet,-q", a->quiet, "no progress line");
  add_format_option(*cmd, a->format);
  add_review_options(*cmd, a->review, false);
  return [a, cmd] {
    a->command = cmd;
    return run_generate(*a);
  };
}

}  // namespace cudal1::cli
