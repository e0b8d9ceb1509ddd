// Subcommands of the cudal1 binary. Each registers its options on the app and returns the
// function that runs it (after parsing) and yields the process exit code.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace cudal1::cli {

using Command = std::function<int()>;

// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitBadInput = 2;

Command add_eval_command(CLI::App& app);

}  // namespace cudal1::cli
