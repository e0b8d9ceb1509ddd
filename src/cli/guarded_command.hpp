// How the commands that use the store end on an error: a message on stderr that names the
// problem, and the exit code (unusable input or store 2, an LLM that cannot be used 3, anything
// else 1).
#pragma once

#include <string>

namespace cudal1::cli {

// Inside a catch block of `command` ("cudal1 generate"): says what ended it and returns the
// exit code. With `db`, an LLM failure also says how to resume from that store.
int exit_after_failure(const std::string& command, const std::string& db = "");

// Runs `body` (which returns the exit code), turning what it throws into an exit code.
template <typename Body>
int guarded(const std::string& command, Body body) {
  try {
    return body();
  } catch (...) {
    return exit_after_failure(command);
  }
}

}  // namespace cudal1::cli
