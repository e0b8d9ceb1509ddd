// SIGINT and SIGTERM for long-running subcommands (bench, serve): the first asks the command to
// stop and finish what it has started; a second one ends the process at once.
#pragma once

#include <atomic>

namespace cudal1::cli {

// The conventional status of a process ended by SIGINT.
inline constexpr int kExitInterrupted = 130;

// Installs the handlers; the flag it returns (also interrupt_requested()) turns true at the first
// signal.
const std::atomic<bool>& install_interrupt_handler();
const std::atomic<bool>& interrupt_requested();

}  // namespace cudal1::cli
