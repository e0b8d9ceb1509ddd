// Output for people on a terminal, JSON for programs: --format auto|text|json. `auto` (the
// default) prints text when stdout is a terminal and JSON otherwise, so pipes, files and the
// docs' `jq` examples get JSON exactly as before.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace cudal1::cli {

void add_format_option(CLI::App& command, std::string& format);

// Whether the command prints for people: --format text, or auto with stdout a terminal.
bool text_output(const std::string& format);

}  // namespace cudal1::cli
