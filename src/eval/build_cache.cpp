#include "cudal1/eval/build_cache.hpp"

#include "cudal1/common/sha256.hpp"
#include "cudal1/common/text_file.hpp"

namespace cudal1 {

nlohmann::json BuildRecord::to_json() const {
  nlohmann::json out = {{"ok", ok}, {"error", error}, {"log", log}, {"seconds", seconds}};
  if (!construction.is_null()) out["construction"] = construction;
  if (!cuda_headers.is_null()) out["cuda_headers"] = cuda_headers;
  return out;
}

BuildRecord BuildRecord::from_json(const nlohmann::json& json) {
  return {json.value("ok", false),
          json.value("error", ""),
          json.value("log", ""),
          json.value("seconds", 0.0),
          json.value("construction", nlohmann::json()),
          json.value("cuda_headers", nlohmann::json())};
}

BuildCache::BuildCache(std::filesystem::path root) : root_(std::move(root)) {}

std::string BuildCache::key(std::string_view candidate_source,
                            std::string_view toolchain_fingerprint) const {
  Sha256 hash;
  // v2: builds offered the precompiled header's folder; v3: the model constructed for its builds
  hash.update("cudal1-build-v3\n")
      .update(toolchain_fingerprint)
      .update("\n")
      .update(candidate_source);
  return hash.hex_digest();
}

std::filesystem::path BuildCache::directory(const std::string& key) const {
  return root_ / "builds" / key;
}

std::filesystem::path BuildCache::extensions_dir(const std::string& key) const {
  return directory(key) / "torch_extensions";
}

std::optional<BuildRecord> BuildCache::lookup(const std::string& key) const {
  const auto path = directory(key) / "build.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  try {
    return BuildRecord::from_json(nlohmann::json::parse(read_file(path)));
  } catch (const std::exception&) {
    return std::nullopt;  // a torn or foreign file: rebuild
  }
}

void BuildCache::store(const std::string& key, const BuildRecord& record) const {
  std::filesystem::create_directories(directory(key));
  write_file_atomic(directory(key) / "build.json", record.to_json().dump(2));
}

FileLock BuildCache::lock(const std::string& key) const {
  return FileLock::acquire(directory(key) / "build.lock");
}

}  // namespace cudal1
