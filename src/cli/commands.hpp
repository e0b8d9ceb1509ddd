// Subcommands of the cudal1 binary. Each registers its options on the app and returns the
// function that runs it (after parsing) and yields the process exit code.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace cudal1::cli {

using Command = std::function<int()>;

// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitLlmFailure = 3;  // the LLM cannot be used (key, URL, unreachable)

Command add_eval_command(CLI::App& app);
Command add_doctor_command(CLI::App& app);
Command add_hacks_command(CLI::App& app);
Command add_flags_command(CLI::App& app);
Command add_report_command(CLI::App& app);
Command add_bench_command(CLI::App& app);
#ifdef CUDAL1_WITH_OPTIMIZER
Command add_optimize_command(CLI::App& app);
Command add_generate_command(CLI::App& app);
Command add_data_command(CLI::App& app);
Command add_review_command(CLI::App& app);
Command add_prompts_command(CLI::App& app);
Command add_responses_command(CLI::App& app);
#endif
#ifdef CUDAL1_WITH_SERVE
Command add_serve_command(CLI::App& app);
#endif
#ifdef CUDAL1_WITH_QUEUE
Command add_worker_command(CLI::App& app);
Command add_queue_command(CLI::App& app);
#endif

}  // namespace cudal1::cli
