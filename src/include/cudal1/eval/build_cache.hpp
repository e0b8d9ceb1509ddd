// Content-addressed cache of candidate builds: the same source under the same toolchain is
// compiled once. Each key owns a directory that PyTorch's extension builder uses as its
// TORCH_EXTENSIONS_DIR, plus the recorded outcome of the build.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "cudal1/common/file_lock.hpp"

namespace cudal1 {

struct BuildRecord {
  bool ok = false;
  std::string error;  // one line, when !ok
  std::string log;    // trimmed compiler output, when !ok
  double seconds = 0;
  // What constructing the model in the build step built: {built, failed, error}; null when the
  // step did not construct it.
  nlohmann::json construction;
  // The build step's load_inline builds with CUDA sources by the torch header they compiled
  // with: {light: [names], full: [names]}; null when there were none.
  nlohmann::json cuda_headers;

  nlohmann::json to_json() const;
  static BuildRecord from_json(const nlohmann::json& json);
};

class BuildCache {
 public:
  explicit BuildCache(std::filesystem::path root);

  std::string key(std::string_view candidate_source, std::string_view toolchain_fingerprint) const;
  std::filesystem::path directory(const std::string& key) const;
  std::filesystem::path extensions_dir(const std::string& key) const;

  std::optional<BuildRecord> lookup(const std::string& key) const;
  void store(const std::string& key, const BuildRecord& record) const;
  // Held while building so concurrent evaluations of one source build it once.
  FileLock lock(const std::string& key) const;

 private:
  std::filesystem::path root_;
};

}  // namespace cudal1
