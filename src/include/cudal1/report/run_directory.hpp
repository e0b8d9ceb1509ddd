// Which kind of result directory `cudal1 report` was given, and the source files it refers to.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace cudal1::report {

enum class RunKind {
  kBench,     // cudal1 bench: results.jsonl and summary.json
  kOptimize,  // cudal1 optimize: summary.json (with run_id), best.py, candidates.jsonl
};

// Throws InputError naming the directory when it is neither kind (or missing, or not a folder).
RunKind detect_run_kind(const std::filesystem::path& dir);

// A source file a result refers to. Result directories travel between machines, so a missing
// file is shown as "not available", not treated as an error.
struct SourceFile {
  std::filesystem::path path;       // as recorded (or where it was found); may be empty
  std::optional<std::string> text;  // nullopt: not available
  std::string note;                 // why it is not available
};

// Reads the first of `candidates` that exists; otherwise a SourceFile with no text and
// `note` ("not available: ..."). `recorded` is the path the result names, shown to the user.
SourceFile read_source_if_present(const std::filesystem::path& recorded,
                                  std::initializer_list<std::filesystem::path> candidates);

}  // namespace cudal1::report
