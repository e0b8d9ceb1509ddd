// The hack-case database: a directory of known reward-hacking candidates, each with its class,
// described by DIR/index.json:
//
//   {"version": 1,
//    "cases": [{"name": "subclass", "class": "lazy_output",
//               "file": "cases/lazy_output/subclass.py",   (relative to DIR; may lead out of it)
//               "description": "...", "task": "...", "added_at": "2026-01-02T03:04:05Z"}, ...]}
//
// `cudal1 hacks add` copies a file into DIR/cases/<class>/<name>.py and appends its entry under
// a lock, writing the index aside and renaming it, so concurrent adds lose nothing and a crash
// leaves the old index or the new one. The reward checker shows the reviewing LLM the cases
// most similar to a suspicious candidate.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cudal1/review/code_fingerprint.hpp"

namespace cudal1::review {

struct HackClassInfo {
  std::string_view name;
  std::string_view description;
};

// The classes cudal1 knows (the verdict's hack flags and a few more). Other lowercase names are
// accepted with a warning.
std::span<const HackClassInfo> known_hack_classes();
bool is_known_hack_class(std::string_view name);
// A class name is lowercase ASCII letters, digits and '_', starting with a letter.
bool is_valid_hack_class(std::string_view name);

struct HackCase {
  std::string name;
  std::string hack_class;
  std::string description;
  std::string task;            // optional: the task it was found on
  std::string added_at;        // ISO 8601 UTC
  std::string file;            // as written in the index, relative to the corpus directory
  std::filesystem::path path;  // where the file is
  std::string source;
  std::string sha256;  // of the source
  CodeFingerprint fingerprint;
};

struct SimilarCase {
  const HackCase* hack_case = nullptr;  // points into the corpus
  Similarity similarity;
};

struct NewHackCase {
  std::filesystem::path file;
  std::string hack_class;
  std::string name;  // default: the file's stem (made unique with _2, _3, ...)
  std::string description;
  std::string task;
};

class HackCorpus {
 public:
  HackCorpus() = default;  // an empty corpus

  // Reads DIR/index.json and every case file. Throws InputError naming the index and the entry
  // for a malformed index or entry; a case file that is missing or unreadable is left out with
  // a warning, so one lost file does not disable every review.
  static HackCorpus load(const std::filesystem::path& dir);

  // Copies `request.file` into DIR/cases/<class>/<name>.py and appends it to DIR/index.json
  // (both created when missing). Throws InputError for an unusable file (missing, a directory,
  // empty, not UTF-8), a bad class or name, a name already taken, or content already in the
  // corpus. Appends notes such as "unknown class" to `warnings`.
  static HackCase add(const std::filesystem::path& dir, const NewHackCase& request,
                      std::vector<std::string>& warnings);

  // Appends `other`'s cases and warnings (a second corpus read together with this one).
  void merge(HackCorpus other);

  const std::filesystem::path& dir() const { return dir_; }
  const std::vector<HackCase>& cases() const { return cases_; }
  const std::vector<std::string>& warnings() const { return warnings_; }

  // The `k` cases most similar to `source`, best first (ties by name).
  std::vector<SimilarCase> most_similar(std::string_view source, std::size_t k) const;
  std::vector<SimilarCase> most_similar(const CodeFingerprint& fingerprint, std::size_t k) const;

 private:
  std::filesystem::path dir_;
  std::vector<HackCase> cases_;
  std::vector<std::string> warnings_;
};

// Where the corpus is when no --hacks is given: $CUDAL1_HACKS_DIR, else hacks/ in the directory
// above the binary's (the repository, for a binary in build/), else the source tree's hacks/.
std::filesystem::path default_hacks_dir();

}  // namespace cudal1::review
