#include "evaluation_options.hpp"

#include <array>

#include "option_domains.hpp"

namespace cudal1::cli {
namespace {

constexpr unsigned kAll = kEvalCommand | kBenchCommand | kSearchCommands | kServeCommand;
// The commands that spread evaluations over several GPUs take a list of devices.
constexpr unsigned kDeviceLists = kBenchCommand | kServeCommand;

struct OptionRow {
  const char* name;
  unsigned commands;
  void (*add)(CLI::App& app, EvaluationArguments& args);
};

// One row per option (the timing options are one row: timing_options.cpp declares them).
const std::array<OptionRow, 17> kRows = {{
    {"--device", kAll & ~kDeviceLists,
     [](CLI::App& app, EvaluationArguments& args) {
       app.add_option("--device", args.device, "auto, cpu, cuda or cuda:N")->capture_default_str();
     }},
    {"--device", kDeviceLists,
     [](CLI::App& app, EvaluationArguments& args) {
       app.add_option("--device", args.device,
                      "auto, cpu, cuda (every visible GPU), cuda:N, or a list cuda:0,cuda:1")
           ->capture_default_str();
     }},
    {"--tolerance", kAll,
     [](CLI::App& app, EvaluationArguments& args) {
       app.add_option("--tolerance", args.tolerance,
                      "strict (1e-4 everywhere), loose (1e-2), kernelbench (KernelBench's check: "
                      "allclose with atol=rtol=1e-2 for every output, comparable with published "
                      "KernelBench results), or ATOL,RTOL; default: 1e-4 for fp32, 1e-2 for "
                      "fp16/bf16");
     }},
    {"--time-budget", kAll,
     [](CLI::App& app, EvaluationArguments& args) {
       app.add_option("--time-budget", args.time_budget,
                      "seconds of timing samples per evaluation at most")
           ->check(seconds())
           ->capture_default_str();
     }},
    {"--trials", kAll,
     [](CLI::App& app, EvaluationArguments& args) {
       app.add_option("--trials", args.trials,
                      "correctness trials per evaluation, each on fresh inputs")
           ->check(whole_number(1))
           ->capture_default_str();
     }},
    {"--timing-mode, --timing-rounds, --rerun-target, --timing-streams, --cuda-connections, "
     "--calibration",
     kAll, [](CLI::App& app, EvaluationArguments& args) { add_timing_options(app, args.timing); }},
    {"--cache-dir", kEvalCommand | kBenchCommand | kServeCommand,
     [](CLI::App& app, EvaluationArguments& args) {
       app.add_option("--cache-dir", args.cache_dir,
                      "build cache and work files (default: $CUDAL1_CACHE_DIR or ~/.cache/cudal1)")
           ->check(output_folder());
     }},
    {"--build-timeout", kEvalCommand | kBenchCommand | kServeCommand,
     [](CLI::App& app, EvaluationArguments& args) {
       app.add_option("--build-timeout", args.build_timeout, "seconds to compile one candidate")
           ->check(seconds())
           ->capture_default_str();
     }},
    {"--load-timeout", kEvalCommand,
     [](CLI::App& app, EvaluationArguments& args) {
       app.add_option("--load-timeout", args.load_timeout,
                      "seconds to start PyTorch and construct the models")
           ->check(seconds())
           ->capture_default_str();
     }},
    {"--correctness-timeout", kEvalCommand | kServeCommand,
     [](CLI::App& app, EvaluationArguments& args) {
       app.add_option("--correctness-timeout", args.correctness_timeout,
                      "seconds for all correctness trials of one candidate")
           ->check(seconds())
           ->capture_default_str();
     }},
    {"--call-timeout", kEvalCommand,
     [](CLI::App& app, EvaluationArguments& args) {
       app.add_option("--call-timeout", args.call_timeout, "seconds one timed call may take")
           ->check(seconds())
           ->capture_default_str();
     }},
    {"--memory-limit", kEvalCommand,
     [](CLI::App& app, EvaluationArguments& args) {
       // A pebibyte is more memory than any machine has; more would overflow the limit in bytes.
       app.add_option("--memory-limit", args.memory_limit_gib,
                      "GiB of resident memory per worker (default: half the RAM)")
           ->check(positive_number(1024.0 * 1024));
     }},
    {"--gpu-memory-fraction", kEvalCommand,
     [](CLI::App& app, EvaluationArguments& args) {
       app.add_option("--gpu-memory-fraction", args.gpu_memory_fraction,
                      "share of GPU memory the candidate may allocate (default: no limit)")
           ->check(fraction());
     }},
    {"--max-noise", kEvalCommand,
     [](CLI::App& app, EvaluationArguments& args) {
       app.add_option("--max-noise", args.max_noise,
                      "target relative noise of the speedup (95% CI half-width)")
           ->check(fraction())
           ->capture_default_str();
     }},
    {"--no-trace", kEvalCommand,
     [](CLI::App& app, EvaluationArguments& args) {
       app.add_flag("--no-trace", args.no_trace, "do not record CUPTI activity of the timed calls");
     }},
    {"--require-custom-kernel", kEvalCommand,
     [](CLI::App& app, EvaluationArguments& args) {
       app.add_flag("--require-custom-kernel", args.require_custom_kernel,
                    "reject a candidate none of whose own kernels ran (flag no_custom_kernel)");
     }},
    {"--queue, --sandbox, --warm-workers, --ready-workers, --keep-references, --task-references",
     kAll,
     [](CLI::App& app, EvaluationArguments& args) {
       add_queue_option(app, args.queue);
       add_sandbox_option(app, args.sandbox);
       add_warm_workers_option(app, args.warm_workers);
       add_ready_workers_option(app, args.ready_workers);
       add_keep_references_option(app, args.keep_references);
       add_task_references_option(app, args.task_references);
     }},
}};

}  // namespace

void add_evaluation_options(CLI::App& app, EvaluationArguments& args, EvaluatingCommand command) {
  for (const OptionRow& row : kRows) {
    if ((row.commands & command) != 0) row.add(app, args);
  }
}

std::vector<std::string> evaluation_option_names(EvaluatingCommand command) {
  std::vector<std::string> names;
  for (const OptionRow& row : kRows) {
    if ((row.commands & command) != 0) names.emplace_back(row.name);
  }
  return names;
}

EvalOptions evaluation_options(const EvaluationArguments& args) {
  EvalOptions o;
  o.device = args.device;
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
  return o;
}

EvaluatorSettings evaluator_settings(const EvaluationArguments& args) {
  EvaluatorSettings where;
  if (!args.cache_dir.empty()) where.engine.cache_dir = args.cache_dir;
  where.queue = args.queue;
  where.sandbox = args.sandbox;
  where.warm_workers = args.warm_workers;
  where.ready_workers = args.ready_workers;
  where.keep_references = args.keep_references;
  where.task_references = args.task_references;
  return where;
}

}  // namespace cudal1::cli
