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
#include "evaluator_factory.hpp"
#include "option_domains.hpp"
#include "output_format.hpp"
#include "progress_line.hpp"
#include "review_options.hpp"
#include "timing_options.hpp"

namespace cudal1::cli {
namespace {

struct EvalArguments {
  std::string task;
  std::string candidate;
  std::string device = "auto";
  std::optional<std::uint64_t> seed;
  std::string tolerance;
  double time_budget = 30;
  std::string json_file;
  bool json_stdout = false;  // --json without a file
  std::string format = "auto";
  std::size_t trials = 5;
  std::string cache_dir;
  double build_timeout = 900;
  double load_timeout = 300;
  double correctness_timeout = 300;
  double call_timeout = 60;
  double memory_limit_gib = 0;
  double gpu_memory_fraction = 0;
  double max_noise = 0.01;
  TimingArguments timing;
  bool no_trace = false;
  bool require_custom_kernel = false;
  bool keep_workdir = false;
  std::string queue;
  std::string sandbox = "auto";
  bool quiet = false;
  ReviewArguments review;
};

// Where the full JSON went when stdout shows the readable verdict: the --json file, else a file
// of its own under the cache directory.
std::string keep_verdict(const EvalArguments& args, const std::string& json) {
  if (!args.json_file.empty()) return args.json_file;
  const std::filesystem::path dir =
      (args.cache_dir.empty() ? default_cache_dir() : std::filesystem::path(args.cache_dir)) /
      "verdicts";
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
    EvaluatorSettings where;
    if (!args.cache_dir.empty()) where.engine.cache_dir = args.cache_dir;
    where.queue = args.queue;
    where.sandbox = args.sandbox;
    const std::unique_ptr<Evaluator> evaluator = make_evaluator(where);
    EvalRequest request;
    request.task = args.task;
    request.candidate = args.candidate;
    EvalOptions& o = request.options;
    o.device = args.device;
    o.seed = args.seed;
    o.tolerance = Tolerance::parse(args.tolerance);
    o.trials = args.trials;
    o.timing.budget_s = args.time_budget;
    o.timing.call_timeout_s = args.call_timeout;
    o.timing.noise.max_noise = args.max_noise;
    apply_timing_options(args.timing, o.timing);
    o.limits.build_s = args.build_timeout;
    o.limits.load_s = args.load_timeout;
    o.limits.correctness_s = args.correctness_timeout;
    o.limits.memory_bytes = static_cast<std::uint64_t>(args.memory_limit_gib * 1073741824.0);
    o.limits.gpu_memory_fraction = args.gpu_memory_fraction;
    o.trace_activity = !args.no_trace;
    o.require_custom_kernel = args.require_custom_kernel;
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
  eval->add_option("--device", args->device, "auto, cpu, cuda or cuda:N")->capture_default_str();
  eval->add_option("--seed", args->seed,
                   "master seed: replays the inputs and order of an earlier verdict")
      ->check(whole_number(0));
  eval->add_option("--tolerance", args->tolerance,
                   "strict (1e-4 everywhere), loose (1e-2), kernelbench (KernelBench's check: "
                   "allclose with atol=rtol=1e-2 for every output), or ATOL,RTOL; default: 1e-4 "
                   "for fp32, 1e-2 for fp16/bf16");
  eval->add_option("--time-budget", args->time_budget, "seconds of timing samples at most")
      ->check(seconds())
      ->capture_default_str();
  eval->add_option("--json", args->json_file,
                   "write the verdict JSON to this file; --json alone prints the JSON on stdout "
                   "even on a terminal")
      ->expected(0, 1)
      ->check(output_file());
  add_format_option(*eval, args->format);
  eval->add_option("--trials", args->trials, "correctness trials, each on fresh inputs")
      ->check(whole_number(1))
      ->capture_default_str();
  eval->add_option("--cache-dir", args->cache_dir,
                   "build cache and work files (default: $CUDAL1_CACHE_DIR or ~/.cache/cudal1)")
      ->check(output_folder());
  eval->add_option("--build-timeout", args->build_timeout, "seconds to compile the candidate")
      ->check(seconds())
      ->capture_default_str();
  eval->add_option("--load-timeout", args->load_timeout,
                   "seconds to start PyTorch and construct the models")
      ->check(seconds())
      ->capture_default_str();
  eval->add_option("--correctness-timeout", args->correctness_timeout,
                   "seconds for all correctness trials")
      ->check(seconds())
      ->capture_default_str();
  eval->add_option("--call-timeout", args->call_timeout, "seconds one timed call may take")
      ->check(seconds())
      ->capture_default_str();
  // A pebibyte is more memory than any machine has; more would overflow the limit in bytes.
  eval->add_option("--memory-limit", args->memory_limit_gib,
                   "GiB of resident memory per worker (default: half the RAM)")
      ->check(positive_number(1024.0 * 1024));
  eval->add_option("--gpu-memory-fraction", args->gpu_memory_fraction,
                   "share of GPU memory the candidate may allocate (default: no limit)")
      ->check(fraction());
  eval->add_option("--max-noise", args->max_noise,
                   "target relative noise of the speedup (95% CI half-width)")
      ->check(fraction())
      ->capture_default_str();
  add_timing_options(*eval, args->timing);
  eval->add_flag("--no-trace", args->no_trace, "do not record CUPTI activity of the timed calls");
  eval->add_flag("--require-custom-kernel", args->require_custom_kernel,
                 "reject a candidate none of whose own kernels ran (flag no_custom_kernel)");
  eval->add_flag("--keep-workdir", args->keep_workdir,
                 "keep the worker logs (path in the verdict)");
  add_queue_option(*eval, args->queue);
  add_sandbox_option(*eval, args->sandbox);
  eval->add_flag("--quiet,-q", args->quiet, "no progress line");
  add_review_options(*eval, args->review, true);
  return [args, eval] {
    args->json_stdout = eval->count("--json") > 0 && args->json_file.empty();
    return run_eval(*args);
  };
}

}  // namespace cudal1::cli
