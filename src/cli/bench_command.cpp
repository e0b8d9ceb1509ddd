// cudal1 bench: a suite's solutions evaluated against the eager reference and baselines
// (results.jsonl, summary.json); `bench compare` sets two result sets side by side.
#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "cudal1/bench/baseline.hpp"
#include "cudal1/bench/comparison.hpp"
#include "cudal1/bench/runner.hpp"
#include "cudal1/bench/summary.hpp"
#include "cudal1/common/error.hpp"
#include "cudal1/common/text_file.hpp"
#include "evaluation_options.hpp"
#include "evaluator_factory.hpp"
#include "interrupt.hpp"
#include "option_domains.hpp"
#include "progress_line.hpp"
#include "timing_options.hpp"

namespace cudal1::cli {
namespace {

struct BenchArguments {
  std::string suite;
  std::string solutions;
  std::string out = "cudal1-bench";
  std::string baselines = "eager";
  std::string levels;
  std::size_t limit = 0;
  unsigned jobs = 0;
  EvaluationArguments evaluation;  // time budget 3 s: docs/evaluation.md, "Defaults"
  bool quiet = false;
};

struct CompareArguments {
  std::string a;
  std::string b;
  std::string json_file;
};

struct BaselineTaskArguments {
  std::string baseline;
  std::string task;
  std::string out;
};

std::string describe(const bench::BenchProgress& p) {
  std::string line = fmt::format("cudal1 bench: {}/{} tasks done ({} ok, {} failed", p.done,
                                 p.total, p.ok, p.failed);
  if (p.resumed > 0) line += fmt::format(", {} from an earlier run", p.resumed);
  line += fmt::format(") | evaluations: {} running, {} queued | {}", p.running, p.queued,
                      format_duration(p.elapsed_s));
  if (p.eta_s) line += fmt::format(", ETA {}", format_duration(*p.eta_s));
  return line;
}

EvaluatorSettings evaluator_of(const BenchArguments& args) {
  EvaluatorSettings where = evaluator_settings(args.evaluation);
  where.engine.build_jobs = args.jobs;
  // A re-run with the same --out collects what the workers published while it was away.
  where.submitter = stable_submitter("bench", args.out);
  return where;
}

bench::BenchSettings settings_of(const BenchArguments& args) {
  if (args.suite.empty() || args.solutions.empty()) {
    throw InputError("cudal1 bench needs --suite DIR and --solutions FILE.jsonl|DIR");
  }
  bench::BenchSettings settings;
  settings.suite = args.suite;
  settings.solutions = args.solutions;
  settings.out = args.out;
  settings.device = args.evaluation.device;
  settings.baselines = bench::parse_baselines(args.baselines);
  if (!args.levels.empty()) settings.levels = parse_levels(args.levels);
  settings.limit = args.limit;
  settings.eval = evaluation_options(args.evaluation);
  settings.eval.device = EvalOptions().device;  // set per task
  return settings;
}

int run_bench(const BenchArguments& args) {
  const std::atomic<bool>& interrupted = install_interrupt_handler();
  ProgressLine progress(!args.quiet);
  try {
    bench::BenchSettings settings = settings_of(args);
    const std::unique_ptr<Evaluator> evaluator = make_evaluator(evaluator_of(args));
    bench::BenchRunner runner(std::move(settings), *evaluator);
    runner.on_progress([&progress](const bench::BenchProgress& p) { progress.show(describe(p)); });
    runner.on_warning([&progress](const std::string& text) {
      progress.clear();
      std::cerr << "cudal1 bench: warning: " << text << std::endl;
    });
    const bench::BenchOutcome outcome = runner.run(&interrupted);
    progress.clear();
    if (outcome.interrupted) {
      std::cerr << fmt::format(
                       "cudal1 bench: interrupted; every finished task is in {} (summary so far: "
                       "{}). Run the same command again to continue.",
                       outcome.results_file.string(), outcome.summary_file.string())
                << std::endl;
      // Evaluations in flight are abandoned: their workers die with this process.
      std::_Exit(kExitInterrupted);
    }
    std::cout << bench::format_summary(outcome.summary) << std::flush;
    std::cerr << fmt::format("cudal1 bench: {} evaluated, {} from an earlier run; {} and {}",
                             outcome.evaluated, outcome.resumed, outcome.results_file.string(),
                             outcome.summary_file.string())
              << std::endl;
    if (outcome.internal_errors > 0) {
      std::cerr << fmt::format(
                       "cudal1 bench: {} tasks have no result because the engine failed (see the "
                       "warnings above); run the same command again to retry them",
                       outcome.internal_errors)
                << std::endl;
      return kExitInternal;
    }
    return kExitOk;
  } catch (const InputError& e) {
    progress.clear();
    std::cerr << "cudal1 bench: " << e.what() << std::endl;
    return kExitBadInput;
  } catch (const std::exception& e) {
    progress.clear();
    std::cerr << "cudal1 bench: internal error: " << e.what() << std::endl;
    return kExitInternal;
  }
}

int run_compare(const CompareArguments& args) {
  try {
    const auto a = bench::ResultSet::load(args.a);
    const auto b = bench::ResultSet::load(args.b);
    const nlohmann::json comparison = bench::compare_result_sets(a, b);
    std::cout << bench::format_comparison(comparison) << std::flush;
    if (!args.json_file.empty()) {
      std::ofstream out(args.json_file);
      out << comparison.dump(2) << '\n';
      if (!out) {
        std::cerr << fmt::format("cudal1 bench compare: cannot write --json file '{}'\n",
                                 args.json_file);
        return kExitInternal;
      }
    }
    return kExitOk;
  } catch (const InputError& e) {
    std::cerr << "cudal1 bench compare: " << e.what() << std::endl;
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "cudal1 bench compare: internal error: " << e.what() << std::endl;
    return kExitInternal;
  }
}

int run_baseline_task(const BaselineTaskArguments& args) {
  try {
    const auto known = bench::parse_baselines(args.baseline);
    if (known.size() != 2) {
      throw InputError(
          fmt::format("--baseline '{}': name one baseline other than eager", args.baseline));
    }
    // The same checks (exists, UTF-8, not empty) as any task.
    const std::string task = read_source_file(args.task, "task");
    const std::string source =
        bench::baseline_task_source(known[1], std::filesystem::absolute(args.task), task);
    if (args.out.empty()) {
      std::cout << source;
    } else {
      write_file_atomic(args.out, source);
    }
    return kExitOk;
  } catch (const InputError& e) {
    std::cerr << "cudal1 bench baseline-task: " << e.what() << std::endl;
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "cudal1 bench baseline-task: internal error: " << e.what() << std::endl;
    return kExitInternal;
  }
}

}  // namespace

Command add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArguments>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Evaluate a suite's solutions (KernelBench layout) against eager and other baselines");
  cmd->require_subcommand(0, 1);
  cmd->add_option("--suite", args->suite,
                  "suite directory: level1/, level2/, ... of <task_id>_<Name>.py task files");
  cmd->add_option(
      "--solutions", args->solutions,
      "JSON lines (level_id, task_id, custom_code) or a directory in the suite's layout");
  cmd->add_option("--out", args->out,
                  "results directory (results.jsonl, summary.json); a re-run continues it")
      ->check(output_folder())
      ->capture_default_str();
  cmd->add_option("--baselines", args->baselines,
                  "comma-separated: eager, compile, compile-reduce-overhead, "
                  "compile-max-autotune, cuda-graph (eager is always measured)")
      ->capture_default_str();
  cmd->add_option("--levels", args->levels, "only these levels, e.g. 1,2");
  cmd->add_option("--limit", args->limit, "only the first N selected tasks")
      ->check(whole_number(1));
  cmd->add_option("--jobs", args->jobs,
                  "candidate builds at once (default: one per core this process may use)")
      ->check(whole_number(1));
  add_evaluation_options(*cmd, args->evaluation, kBenchCommand);
  cmd->add_flag("--quiet,-q", args->quiet, "no progress line");

  auto compare = std::make_shared<CompareArguments>();
  CLI::App* compare_cmd =
      cmd->add_subcommand("compare", "Compare two result sets: per-task and aggregate ratios B/A");
  compare_cmd->add_option("A", compare->a, "summary.json of a run, or its --out directory")
      ->required();
  compare_cmd->add_option("B", compare->b, "summary.json of another run, or its directory")
      ->required();
  compare_cmd->add_option("--json", compare->json_file, "also write the comparison to this file")
      ->check(output_file());

  auto baseline = std::make_shared<BaselineTaskArguments>();
  CLI::App* baseline_cmd = cmd->add_subcommand(
      "baseline-task", "Print the generated task file of a baseline (to inspect or evaluate it)");
  baseline_cmd
      ->add_option("--baseline", baseline->baseline,
                   "compile, compile-reduce-overhead, compile-max-autotune or cuda-graph")
      ->required();
  baseline_cmd->add_option("--task", baseline->task, "the task file to wrap")->required();
  baseline_cmd->add_option("--out", baseline->out, "write it here instead of stdout")
      ->check(output_file());

  return [args, compare, compare_cmd, baseline, baseline_cmd] {
    if (compare_cmd->parsed()) return run_compare(*compare);
    if (baseline_cmd->parsed()) return run_baseline_task(*baseline);
    return run_bench(*args);
  };
}

}  // namespace cudal1::cli
