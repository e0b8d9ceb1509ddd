#include "output_format.hpp"

#include <unistd.h>

namespace cudal1::cli {

void add_format_option(CLI::App& command, std::string& format) {
  command
      .add_option("--format", format,
                  "what stdout gets: text (for people), json (for programs), or auto: text on a "
                  "terminal, JSON otherwise")
      ->check(CLI::IsMember({"auto", "text", "json"}))
      ->capture_default_str();
}

bool text_output(const std::string& format) {
  if (format == "text") return true;
  if (format == "json") return false;
  return ::isatty(STDOUT_FILENO) == 1;
}

}  // namespace cudal1::cli
