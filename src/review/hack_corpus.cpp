#include "cudal1/review/hack_corpus.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "cudal1/common/error.hpp"
#include "cudal1/common/file_lock.hpp"
#include "cudal1/common/sha256.hpp"
#include "cudal1/common/text_file.hpp"
#include "resources.hpp"

namespace cudal1::review {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kIndexName = "index.json";
constexpr const char* kLockName = ".index.lock";
constexpr int kIndexVersion = 1;

std::string known_class_list() {
  std::string out;
  for (const auto& c : known_hack_classes()) out += (out.empty() ? "" : ", ") + std::string(c.name);
  return out;
}

// A case name is also a file name: letters, digits, '_', '-', '.', not starting with '.'.
bool is_valid_case_name(std::string_view name) {
  constexpr std::size_t kMaxLength = 100;
  if (name.empty() || name.size() > kMaxLength || name.front() == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

std::string name_from_stem(const fs::path& file) {
  std::string name = file.stem().string();
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') c = '_';
  }
  return name.empty() || name.front() == '.' ? "case" : name;
}

// The index as JSON: {"version": 1, "cases": [...]} (a bare list is read too). A missing index
// is an empty one when `missing_ok`.
json read_index(const fs::path& index_path, bool missing_ok) {
  std::error_code ec;
  if (!fs::exists(index_path, ec)) {
    if (missing_ok) return {{"version", kIndexVersion}, {"cases", json::array()}};
    throw InputError(fmt::format(
        "hack corpus '{}' has no {}; start one with: cudal1 hacks add FILE --class NAME --hacks {}",
        index_path.parent_path().string(), kIndexName, index_path.parent_path().string()));
  }
  json index;
  try {
    index = json::parse(read_file(index_path));
  } catch (const json::parse_error& e) {
    throw InputError(
        fmt::format("hack corpus index '{}' is not valid JSON ({}); fix it or restore "
                    "it from version control",
                    index_path.string(), e.what()));
  } catch (const std::runtime_error& e) {
    throw InputError(
        fmt::format("hack corpus index '{}' cannot be read: {}", index_path.string(), e.what()));
  }
  if (index.is_array()) index = {{"version", kIndexVersion}, {"cases", index}};
  if (!index.is_object() || !index.contains("cases") || !index["cases"].is_array()) {
    throw InputError(fmt::format(
        "hack corpus index '{}' must be an object with a \"cases\" list (or a list of cases)",
        index_path.string()));
  }
  return index;
}

std::string string_field(const json& entry, const char* key, bool required,
                         const std::string& where) {
  if (!entry.contains(key) || entry[key].is_null()) {
    if (required) throw InputError(fmt::format("{} has no \"{}\"", where, key));
    return {};
  }
  if (!entry[key].is_string())
    throw InputError(fmt::format("{}: \"{}\" must be a string", where, key));
  std::string value = entry[key].get<std::string>();
  if (required && value.empty()) throw InputError(fmt::format("{}: \"{}\" is empty", where, key));
  return value;
}

fs::path resolve_case_path(const fs::path& dir, const std::string& file) {
  const fs::path path(file);
  return (path.is_absolute() ? path : dir / path).lexically_normal();
}

// The entry's fields, checked; the source is read by the caller.
HackCase parse_entry(const json& entry, const fs::path& dir, const std::string& where) {
  if (!entry.is_object()) throw InputError(fmt::format("{} is not an object", where));
  HackCase c;
  c.name = string_field(entry, "name", true, where);
  const std::string named = fmt::format("{} (\"{}\")", where, c.name);
  c.hack_class = string_field(entry, "class", true, named);
  if (!is_valid_hack_class(c.hack_class)) {
    throw InputError(fmt::format(
        "{}: class \"{}\" is not a class name (lowercase letters, digits and _, e.g. lazy_output)",
        named, c.hack_class));
  }
  c.file = string_field(entry, "file", true, named);
  c.description = string_field(entry, "description", false, named);
  c.task = string_field(entry, "task", false, named);
  c.added_at = string_field(entry, "added_at", false, named);
  c.path = resolve_case_path(dir, c.file);
  return c;
}

// The source of a case file, or nullopt with a warning.
std::optional<std::string> read_case_source(const HackCase& c, std::vector<std::string>& warnings) {
  std::error_code ec;
  if (!fs::is_regular_file(c.path, ec)) {
    warnings.push_back(fmt::format("case '{}': file '{}' is missing; the case is left out", c.name,
                                   c.path.string()));
    return std::nullopt;
  }
  std::string source;
  try {
    source = read_file(c.path);
  } catch (const std::exception&) {
    warnings.push_back(fmt::format("case '{}': file '{}' cannot be read; the case is left out",
                                   c.name, c.path.string()));
    return std::nullopt;
  }
  if (source.find_first_not_of(" \t\r\n") == std::string::npos) {
    warnings.push_back(fmt::format("case '{}': file '{}' is empty; the case is left out", c.name,
                                   c.path.string()));
    return std::nullopt;
  }
  if (first_invalid_utf8(source)) {
    warnings.push_back(fmt::format("case '{}': file '{}' is not UTF-8; invalid bytes read as '?'",
                                   c.name, c.path.string()));
    source = sanitize_utf8(source);
  }
  return source;
}

struct AddPlan {
  std::string name;
  std::string relative_file;
};

// Picks the case's name and file, refusing content or an explicit name already present.
AddPlan plan_addition(const fs::path& dir, const json& index, const NewHackCase& request,
                      const std::string& source_sha) {
  std::vector<std::string> names;
  std::vector<fs::path> files;
  const json& cases = index["cases"];
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const HackCase existing =
        parse_entry(cases[i], dir, fmt::format("{}: cases[{}]", (dir / kIndexName).string(), i));
    names.push_back(existing.name);
    files.push_back(existing.path);
    std::error_code ec;
    if (!fs::is_regular_file(existing.path, ec)) continue;
    if (sha256_hex(read_file(existing.path)) == source_sha) {
      throw InputError(fmt::format(
          "'{}' is already in the hack corpus as case '{}' (class {}, file {}); nothing added",
          request.file.string(), existing.name, existing.hack_class, existing.path.string()));
    }
  }
  const auto taken = [&](const std::string& name) {
    const fs::path file = (dir / "cases" / request.hack_class / (name + ".py")).lexically_normal();
    return std::find(names.begin(), names.end(), name) != names.end() ||
           std::find(files.begin(), files.end(), file) != files.end();
  };
  AddPlan plan;
  if (!request.name.empty()) {
    if (taken(request.name)) {
      throw InputError(
          fmt::format("the hack corpus '{}' already has a case named '{}'; pass another --name",
                      dir.string(), request.name));
    }
    plan.name = request.name;
  } else {
    const std::string stem = name_from_stem(request.file);
    plan.name = stem;
    for (int n = 2; taken(plan.name); ++n) plan.name = fmt::format("{}_{}", stem, n);
  }
  plan.relative_file = fmt::format("cases/{}/{}.py", request.hack_class, plan.name);
  return plan;
}

}  // namespace

void HackCorpus::merge(HackCorpus other) {
  if (dir_.empty()) dir_ = other.dir_;
  for (auto& c : other.cases_) cases_.push_back(std::move(c));
  for (auto& w : other.warnings_) warnings_.push_back(std::move(w));
}

HackCorpus HackCorpus::load(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw InputError(fmt::format(
        "hack corpus directory '{}' does not exist (pass --hacks DIR or set CUDAL1_HACKS_DIR)",
        dir.string()));
  }
  const fs::path index_path = dir / kIndexName;
  const json index = read_index(index_path, false);
  HackCorpus corpus;
  corpus.dir_ = dir;
  const json& cases = index["cases"];
  for (std::size_t i = 0; i < cases.size(); ++i) {
    HackCase c = parse_entry(cases[i], dir, fmt::format("{}: cases[{}]", index_path.string(), i));
    if (!is_known_hack_class(c.hack_class)) {
      corpus.warnings_.push_back(fmt::format("case '{}': class '{}' is not one cudal1 knows ({})",
                                             c.name, c.hack_class, known_class_list()));
    }
    const bool duplicate = std::any_of(corpus.cases_.begin(), corpus.cases_.end(),
                                       [&](const HackCase& other) { return other.name == c.name; });
    if (duplicate) {
      corpus.warnings_.push_back(
          fmt::format("case name '{}' appears more than once in {}", c.name, index_path.string()));
    }
    auto source = read_case_source(c, corpus.warnings_);
    if (!source) continue;
    c.source = std::move(*source);
    c.sha256 = sha256_hex(c.source);
    c.fingerprint = CodeFingerprint::of(c.source);
    corpus.cases_.push_back(std::move(c));
  }
  return corpus;
}

HackCase HackCorpus::add(const fs::path& dir, const NewHackCase& request,
                         std::vector<std::string>& warnings) {
  if (!is_valid_hack_class(request.hack_class)) {
    throw InputError(fmt::format(
        "--class '{}' is not a class name: use lowercase letters, digits and _ (e.g. lazy_output)",
        request.hack_class));
  }
  if (!request.name.empty() && !is_valid_case_name(request.name)) {
    throw InputError(fmt::format(
        "--name '{}' is not a case name: use letters, digits, '_', '-' and '.' (it becomes a "
        "file name)",
        request.name));
  }
  if (!is_known_hack_class(request.hack_class)) {
    warnings.push_back(fmt::format("class '{}' is not one cudal1 knows ({}); added anyway",
                                   request.hack_class, known_class_list()));
  }
  const std::string source = read_source_file(request.file, "hack case");
  const std::string sha = sha256_hex(source);
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) {
    throw InputError(fmt::format("hack corpus '{}' is not a directory", dir.string()));
  }
  fs::create_directories(dir);

  // One writer at a time: the index is read, extended and replaced under the lock.
  FileLock lock = FileLock::acquire(dir / kLockName);
  json index = read_index(dir / kIndexName, true);
  const AddPlan plan = plan_addition(dir, index, request, sha);
  const fs::path target = dir / plan.relative_file;
  fs::create_directories(target.parent_path());
  write_file_atomic(target, source);

  HackCase added;
  added.name = plan.name;
  added.hack_class = request.hack_class;
  added.description = request.description;
  added.task = request.task;
  added.added_at = utc_timestamp();
  added.file = plan.relative_file;
  added.path = target;
  added.source = source;
  added.sha256 = sha;
  added.fingerprint = CodeFingerprint::of(source);
  json entry = {{"name", added.name},
                {"class", added.hack_class},
                {"file", added.file},
                {"description", added.description}};
  if (!added.task.empty()) entry["task"] = added.task;
  entry["added_at"] = added.added_at;
  index["cases"].push_back(std::move(entry));
  // The case file is in place before the index names it: a crash between the two leaves an
  // unlisted file, never an entry without its file.
  write_file_atomic(dir / kIndexName, index.dump(2) + "\n");
  return added;
}

std::vector<SimilarCase> HackCorpus::most_similar(std::string_view source, std::size_t k) const {
  return most_similar(CodeFingerprint::of(source), k);
}

std::vector<SimilarCase> HackCorpus::most_similar(const CodeFingerprint& fingerprint,
                                                  std::size_t k) const {
  std::vector<SimilarCase> ranked;
  ranked.reserve(cases_.size());
  for (const HackCase& c : cases_) ranked.push_back({&c, compare(fingerprint, c.fingerprint)});
  std::sort(ranked.begin(), ranked.end(), [](const SimilarCase& a, const SimilarCase& b) {
    if (a.similarity.score != b.similarity.score) return a.similarity.score > b.similarity.score;
    return a.hack_case->name < b.hack_case->name;
  });
  if (ranked.size() > k) ranked.resize(k);
  return ranked;
}

fs::path default_hacks_dir() {
  if (const char* env = std::getenv("CUDAL1_HACKS_DIR"); env != nullptr && *env != '\0') return env;
  return locate_resource("hacks", "hacks/index.json");
}

}  // namespace cudal1::review
