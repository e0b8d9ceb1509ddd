// cudal1: a thin command-line layer over libcudal1.
#include <CLI/CLI.hpp>
#include <iostream>
#include <map>
#include <string>

#include "commands.hpp"

int main(int argc, char** argv) {
  using namespace cudal1::cli;
  CLI::App app{"cudal1: make PyTorch workloads faster with LLM-written CUDA, measured honestly"};
  app.set_version_flag("--version", std::string(CUDAL1_VERSION));
  app.require_subcommand(1);
  std::map<CLI::App*, Command> commands;
  commands[app.get_subcommand("eval")] = add_eval_command(app);
  commands[app.get_subcommand("doctor")] = add_doctor_command(app);
  commands[app.get_subcommand("hacks")] = add_hacks_command(app);
  commands[app.get_subcommand("flags")] = add_flags_command(app);
  commands[app.get_subcommand("report")] = add_report_command(app);
  commands[app.get_subcommand("bench")] = add_bench_command(app);
#ifdef CUDAL1_WITH_OPTIMIZER
  commands[app.get_subcommand("optimize")] = add_optimize_command(app);
  commands[app.get_subcommand("generate")] = add_generate_command(app);
  commands[app.get_subcommand("data")] = add_data_command(app);
  commands[app.get_subcommand("review")] = add_review_command(app);
  commands[app.get_subcommand("prompts")] = add_prompts_command(app);
  commands[app.get_subcommand("responses")] = add_responses_command(app);
#endif
#ifdef CUDAL1_WITH_SERVE
  commands[app.get_subcommand("serve")] = add_serve_command(app);
#endif
#ifdef CUDAL1_WITH_QUEUE
  commands[app.get_subcommand("worker")] = add_worker_command(app);
  commands[app.get_subcommand("queue")] = add_queue_command(app);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    // Usage errors are unusable input, like a missing file: exit code 2.
    return code == 0 ? kExitOk : kExitBadInput;
  }
  for (auto& [subcommand, run] : commands) {
    if (subcommand->parsed()) return run();
  }
  return kExitInternal;
}
