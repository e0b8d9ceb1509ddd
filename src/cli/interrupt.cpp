#include "interrupt.hpp"

#include <signal.h>

namespace cudal1::cli {
namespace {

std::atomic<bool> g_interrupted{false};

extern "C" void on_interrupt(int) {
  g_interrupted.store(true);
}

}  // namespace

const std::atomic<bool>& install_interrupt_handler() {
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  // SA_RESETHAND: the handler resets itself, so a second signal ends the process at once.
  // SA_RESTART: system calls that the signal lands in resume instead of failing with EINTR.
  action.sa_flags = SA_RESETHAND | SA_RESTART;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  return g_interrupted;
}

const std::atomic<bool>& interrupt_requested() {
  return g_interrupted;
}

}  // namespace cudal1::cli
