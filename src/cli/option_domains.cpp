#include "option_domains.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <string>

namespace cudal1::cli {
namespace {

namespace fs = std::filesystem;

// Chrono deadlines count nanoseconds in 64 bits (292 years); no run lasts a year.
constexpr double kMaxSeconds = 365.0 * 24 * 3600;

// The finite numbers for which `inside` holds; `description` completes "VALUE is not ...".
CLI::Validator real_numbers(const std::string& description, const std::string& name,
                            std::function<bool(double)> inside) {
  return CLI::Validator(
      [description, inside](std::string& text) -> std::string {
        double value = 0;
        if (CLI::detail::lexical_cast(text, value) && std::isfinite(value) && inside(value))
          return {};
        return fmt::format("{} is not {}", text, description);
      },
      name);
}

bool writable_folder(const fs::path& folder) {
  return ::access(folder.c_str(), W_OK | X_OK) == 0;
}

std::string output_file_problem(const fs::path& path) {
  std::error_code ec;
  if (path.empty()) return "an empty path names no file";
  if (fs::is_directory(path, ec)) return fmt::format("'{}' is a folder, not a file", path.string());
  const fs::path folder = path.has_parent_path() ? path.parent_path() : fs::path(".");
  if (!fs::is_directory(folder, ec)) {
    return fmt::format("cannot write '{}': the folder '{}' does not exist", path.string(),
                       folder.string());
  }
  if (!writable_folder(folder)) {
    return fmt::format("cannot write '{}': the folder '{}' may not be written in", path.string(),
                       folder.string());
  }
  if (fs::exists(path, ec) && ::access(path.c_str(), W_OK) != 0) {
    return fmt::format("cannot write '{}': the file may not be written", path.string());
  }
  return {};
}

std::string output_folder_problem(const fs::path& path) {
  std::error_code ec;
  if (path.empty()) return "an empty path names no folder";
  // Where creating the folder starts: the folder itself when it is there, else the nearest one
  // above it (an absolute path ends at "/", which is always there).
  const fs::path absolute = fs::absolute(path, ec);
  if (ec) return fmt::format("'{}': {}", path.string(), ec.message());
  fs::path existing = absolute;
  while (!fs::exists(existing, ec) && existing.has_parent_path() &&
         existing.parent_path() != existing) {
    existing = existing.parent_path();
  }
  if (!fs::is_directory(existing, ec)) {
    return existing == absolute ? fmt::format("'{}' is a file, not a folder", path.string())
                                : fmt::format("'{}' cannot be a folder: '{}' is a file",
                                              path.string(), existing.string());
  }
  if (!writable_folder(existing)) {
    return fmt::format("cannot write in '{}': '{}' may not be written in", path.string(),
                       existing.string());
  }
  return {};
}

}  // namespace

CLI::Validator whole_number(std::int64_t least) {
  return CLI::Validator(
      [least](std::string& text) -> std::string {
        // Read as unsigned unless negative: a seed may use all 64 bits.
        if (text.find('-') == std::string::npos) {
          std::uint64_t value = 0;
          if (CLI::detail::lexical_cast(text, value) &&
              (least <= 0 || value >= static_cast<std::uint64_t>(least)))
            return {};
        } else {
          std::int64_t value = 0;
          if (CLI::detail::lexical_cast(text, value) && value >= least) return {};
        }
        return fmt::format("{} is not a whole number of at least {}", text, least);
      },
      fmt::format("INT in [{} - ...]", least));
}

CLI::Validator seconds(double at_least) {
  const std::string interval = at_least > 0 ? fmt::format("[{}, {}]", at_least, kMaxSeconds)
                                            : fmt::format("(0, {}]", kMaxSeconds);
  return real_numbers(fmt::format("a number of seconds in {} (a year at most)", interval),
                      "SECONDS",
                      [at_least](double x) { return x > 0 && x >= at_least && x <= kMaxSeconds; });
}

CLI::Validator positive_number(double at_most) {
  const std::string description = at_most < std::numeric_limits<double>::max()
                                      ? fmt::format("a number above 0 and at most {}", at_most)
                                      : "a finite number above 0";
  return real_numbers(description, "POSITIVE",
                      [at_most](double x) { return x > 0 && x <= at_most; });
}

CLI::Validator non_negative_number() {
  return real_numbers("a finite number of 0 or more", "NONNEGATIVE",
                      [](double x) { return x >= 0; });
}

CLI::Validator finite_number() {
  return real_numbers("a finite number", "FINITE", [](double) { return true; });
}

CLI::Validator fraction() {
  return real_numbers("a fraction in (0, 1]", "FRACTION in (0 - 1]",
                      [](double x) { return x > 0 && x <= 1; });
}

CLI::Validator output_file() {
  return CLI::Validator([](std::string& text) { return output_file_problem(text); },
                        "FILE(written)");
}

CLI::Validator output_folder() {
  return CLI::Validator([](std::string& text) { return output_folder_problem(text); },
                        "DIR(written)");
}

}  // namespace cudal1::cli
