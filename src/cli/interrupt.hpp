// Ctrl-C and SIGTERM for commands that stop cleanly: the first asks them to stop (they finish
// what they can and exit), the second ends the process at once.
#pragma once

#include <atomic>

namespace cudal1::cli {

// Installs the handlers; the flag turns true on the first signal.
const std::atomic<bool>& install_interrupt_handler();

}  // namespace cudal1::cli
