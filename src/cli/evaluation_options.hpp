// Every option that says how candidates are evaluated, declared once for the commands that
// evaluate (eval, bench, optimize, generate, serve): one table in evaluation_options.cpp names
// each option, its help, its domain and the commands that take it (as llama.cpp's common/arg.cpp
// declares each option once and marks the tools that take it). The values land in one
// EvaluationArguments, which becomes the engine's EvalOptions and the evaluator's settings in one
// place each. (The queue's job JSON walks EvalOptions' own field lists, src/queue/job.cpp.)
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cudal1/eval/evaluation.hpp"
#include "evaluator_factory.hpp"
#include "timing_options.hpp"

namespace cudal1::cli {

// The commands that evaluate, as the table marks them.
enum EvaluatingCommand : unsigned {
  kEvalCommand = 1u << 0,
  kBenchCommand = 1u << 1,
  kSearchCommands = 1u << 2,  // optimize and generate
  kServeCommand = 1u << 3,
};

// The value of every evaluation option; a command's defaults are set here before its options
// are added (--help shows them). An option a command does not take keeps the engine's default.
struct EvaluationArguments {
  std::string device = "auto";
  std::string tolerance;
  // Runs evaluate many candidates: docs/evaluation.md, "Defaults", says why 3 s (eval: 30 s).
  double time_budget = 3;
  std::size_t trials = 5;
  TimingArguments timing;
  std::string queue;  // --queue redis://...: the workers of a Redis queue evaluate
  std::string sandbox = "auto";
  std::string warm_workers = "on";
  std::string ready_workers = "auto";
  std::string keep_references = "on";
  std::size_t task_references = 0;
  std::string cache_dir;
  double build_timeout = 900;
  double load_timeout = 300;
  double correctness_timeout = 300;
  double call_timeout = 60;
  double memory_limit_gib = 0;
  double gpu_memory_fraction = 0;
  double max_noise = 0.01;
  bool no_trace = false;
  bool require_custom_kernel = false;
};

// Adds the options of the table that `command` takes.
void add_evaluation_options(CLI::App& app, EvaluationArguments& args, EvaluatingCommand command);

// The names of the options `command` takes, in the table's order.
std::vector<std::string> evaluation_option_names(EvaluatingCommand command);

// Throws InputError for an unusable tolerance.
EvalOptions evaluation_options(const EvaluationArguments& args);

// Where evaluations run: --queue's workers, else this machine's engine (with --cache-dir and
// --sandbox).
EvaluatorSettings evaluator_settings(const EvaluationArguments& args);

}  // namespace cudal1::cli
