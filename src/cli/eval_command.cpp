// cudal1 eval: compile, verify and time one candidate against its task.
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "cudal1/common/error.hpp"
#include "cudal1/common/paths.hpp"
#include "cudal1/common/text_file.hpp"
#include "cudal1/eval/verdict_text.hpp"
#include "evaluation_options.hpp"
#include "evaluator_factory.hpp"
#include "option_domains.hpp"
#include "output_format.hpp"
#include "progress_line.hpp"
#include "review_options.hpp"

namespace cudal1::cli {
namespace {

struct EvalArguments {
  EvalArguments() { evaluation.time_budget = 30; }  // one candidate: docs/evaluation.md, "Defaults"
  std::string task;
  std::string candidate;
  std::optional<std::uint64_t> seed;
  EvaluationArguments evaluation;
  std::string json_file;
  bool json_stdout = false;  // --json without a file
  std::string format = "auto";
  bool keep_workdir = false;
  bool quiet = false;
  ReviewArguments review;
};

// Where the full JSON went when stdout shows the readable verdict: the --json file, else a file
// of its own under the cache directory.
std::string keep_verdict(const EvalArguments& args, const std::string& json) {
  if (!args.json_file.empty()) return args.json_file;
  const std::string& cache_dir = args.evaluation.cache_dir;
  const std::filesystem::path dir =
      (cache_dir.empty() ? default_cache_dir() : std::filesystem::path(cache_dir)) / "verdicts";
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
  const std::filesystem::path file =
      dir / fmt::format("{}-{}-{}-{}.json", stamp, ::getpid(),
                        std::filesystem::path(args.task).stem().string(),
                        std::filesystem::path(args.candidate).stem().string());
  try {
    std::filesystem::create_directories(dir);
    write_file_atomic(file, json + "\n");
  } catch (const std::exception& e) {
    return fmt::format("not saved ({}); --json FILE saves it, --json prints it", e.what());
  }
  return file.string();
}

int run_eval(const EvalArguments& args) {
  // Terminal only: a single evaluation is short, and scripts read stderr's last line.
  ProgressLine progress(!args.quiet && ::isatty(2));
  try {
    const auto reward_checker = make_reward_checker(args.review);  // bad options fail first
    const std::unique_ptr<Evaluator> evaluator =
        make_evaluator(evaluator_settings(args.evaluation));
    EvalRequest request;
    request.task = args.task;
    request.candidate = args.candidate;
    request.options = evaluation_options(args.evaluation);
    EvalOptions& o = request.options;
    o.seed = args.seed;
    o.keep_workdir = args.keep_workdir;
    o.progress = [&progress](const std::string& text) { progress.show("cudal1 eval: " + text); };

    Verdict verdict = evaluator->evaluate(request);
    progress.clear();
    review_evaluation(*reward_checker, verdict, args.task, args.candidate);
    const std::string json =
        verdict.to_json().dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
    if (!args.json_file.empty()) {
      try {
        write_file_atomic(args.json_file, json + "\n");
      } catch (const std::exception& e) {
        std::cerr << fmt::format("cudal1 eval: cannot write --json file '{}': {}\n", args.json_file,
                                 e.what());
        return kExitInternal;
      }
    }
    if (args.json_stdout || !text_output(args.format)) {
      std::cout << json << std::endl;
      std::cerr << verdict.summary_line() << std::endl;
      return kExitOk;
    }
    std::cout << verdict_text(verdict) << "full verdict: " << keep_verdict(args, json) << std::endl;
    return kExitOk;
  } catch (const InputError& e) {
    progress.clear();
    std::cerr << "cudal1 eval: " << e.what() << std::endl;
    return kExitBadInput;
  } catch (const std::exception& e) {
    progress.clear();
    std::cerr << "cudal1 eval: internal error: " << e.what() << std::endl;
    return kExitInternal;
  }
}

}  // namespace

Command add_eval_command(CLI::App& app) {
  auto args = std::make_shared<EvalArguments>();
  CLI::App* eval = app.add_subcommand(
      "eval",
      "Compile, verify and time a candidate against its task (the verdict: readable on a "
      "terminal, JSON otherwise)");
  eval->add_option("--task", args->task,
                   "KernelBench-format task file (Model, get_inputs, get_init_inputs)")
      ->required();
  eval->add_option("--candidate", args->candidate, "candidate file defining ModelNew")->required();
  eval->add_option("--seed", args->seed,
                   "master seed: replays the inputs and order of an earlier verdict")
      ->check(whole_number(0));
  eval->add_option("--json", args->json_file,
                   "write the verdict JSON to this file; --json alone prints the JSON on stdout "
                   "even on a terminal")
      ->expected(0, 1)
      ->check(output_file());
  add_format_option(*eval, args->format);
  add_evaluation_options(*eval, args->evaluation, kEvalCommand);
  eval->add_flag("--keep-workdir", args->keep_workdir,
                 "keep the worker logs (path in the verdict)");
  eval->add_flag("--quiet,-q", args->quiet, "no progress line");
  add_review_options(*eval, args->review, true);
  return [args, eval] {
    args->json_stdout = eval->count("--json") > 0 && args->json_file.empty();
    return run_eval(*args);
  };
}

}  // namespace cudal1::cli
