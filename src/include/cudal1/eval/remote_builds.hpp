// Builds made on other hosts (`cudal1 worker --role build`; docs/scale-out.md, "Builds on CPU
// hosts"): what a candidate's build needs there, and the hook through which the engine asks for
// one instead of compiling on its own cores.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cudal1/eval/build_cache.hpp"

namespace cudal1 {

// One candidate's build, as the evaluating host would make it.
struct BuildJob {
  std::string key;              // the evaluating host's build cache key (BuildCache::key)
  nlohmann::json toolchain;     // the evaluating host's toolchain (Toolchain::info)
  std::uint64_t init_seed = 0;  // the seed the build step constructs the model with
  double build_s = 900;         // the build's time limit
  std::string task_path;
  std::string task_source;
  std::string candidate_path;
  std::string candidate_source;

  nlohmann::json to_json() const;
  // Throws std::runtime_error naming a missing field.
  static BuildJob from_json(const nlohmann::json& json);
};

// A build made elsewhere, its folder unpacked here.
struct RemoteBuild {
  BuildRecord record;
  // Whether the record may be kept in the build cache (false: a time-out or a crash of the
  // build, which may not happen again).
  bool cacheable = true;
  nlohmann::json details;  // where and how: the build worker, its host, seconds waited, bytes
};

class BuildService {
 public:
  virtual ~BuildService() = default;
  // Has `job` built elsewhere and unpacks the build's folder to `extensions_dir` (which must
  // not exist). nullopt: nobody elsewhere can build it now, build it here.
  virtual std::optional<RemoteBuild> build(
      const BuildJob& job, const std::filesystem::path& extensions_dir,
      const std::function<void(const std::string&)>& progress) = 0;
};

// What a build's result depends on, out of a toolchain's info: PyTorch and its CUDA, Python,
// the compilers, the C library and where PyTorch's headers are (ninja records their paths).
// Two hosts whose build toolchains are equal make builds each other can load. Not the GPUs:
// a build job names the architectures it is for.
nlohmann::json build_toolchain(const nlohmann::json& info);
// A short name of build_toolchain(info): the build workers of one id share a job stream.
std::string build_toolchain_id(const nlohmann::json& info);

}  // namespace cudal1
