// Builds through the queue (docs/scale-out.md, "Builds on CPU hosts"). An evaluating worker
// sends each candidate build that may compile to the build workers of its build toolchain
// (`cudal1 worker --role build`, on hosts with cores and no GPU); a build worker makes it in its
// sandbox, stores the build's folder packed in Redis (expiring) and answers with the folder's
// SHA-256 and an HMAC-SHA256 over the key, the digest and the build's record under the fleet's
// build secret (CUDAL1_BUILD_SECRET). The evaluating worker loads nothing that fails either
// check: it builds the candidate itself instead.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cudal1/eval/remote_builds.hpp"
#include "cudal1/queue/redis_address.hpp"
#include "cudal1/queue/redis_connection.hpp"

namespace cudal1::queue {

// Where an evaluating worker's builds are made (--builds).
enum class BuildsMode {
  kHere,   // on this host, always
  kQueue,  // by build workers, waiting for one to join
  kAuto,   // by build workers while one of this build toolchain is live, here otherwise
};
// "here", "queue", "auto"; std::invalid_argument names the values allowed.
BuildsMode builds_mode_from(const std::string& text);

// The environment variable that holds the fleet's build secret.
inline constexpr const char* kBuildSecretVariable = "CUDAL1_BUILD_SECRET";
// Its value; empty when unset.
std::string build_secret_from_environment();
// Packed build folders stay this long in Redis (enough for the worker that asked to fetch it).
inline constexpr double kArtifactKeepS = 900;

// What a build worker answers, signed. `folder` is the build's TORCH_EXTENSIONS_DIR (absent for
// a build that made nothing); `details` rides along unsigned (who built it, how long).
nlohmann::json publish_build(RedisConnection& redis, const std::string& secret,
                             const std::string& key, const BuildRecord& record, bool cacheable,
                             const std::filesystem::path& folder, nlohmann::json details);
// The evaluating side: checks the answer's signature and the packed folder's digest, and
// unpacks it into `folder` (which must not exist). Throws std::runtime_error saying which check
// failed; nothing is left in `folder` then.
RemoteBuild receive_build(RedisConnection& redis, const std::string& secret, const std::string& key,
                          const nlohmann::json& answer, const std::filesystem::path& folder);

struct BuildQueueSettings {
  RedisAddress address;
  std::string submitter;  // results come back on keys::results(submitter)
  std::string secret;     // the fleet's build secret
  BuildsMode mode = BuildsMode::kAuto;
  // A job no build worker has answered after its build's time limit and this much more is
  // withdrawn and built here.
  double queue_wait_s = 300;
  std::function<void(const std::string&)> log;
};

class QueueBuildService final : public BuildService {
 public:
  // Connects at the first build.
  explicit QueueBuildService(BuildQueueSettings settings);
  ~QueueBuildService() override;
  QueueBuildService(const QueueBuildService&) = delete;
  QueueBuildService& operator=(const QueueBuildService&) = delete;

  std::optional<RemoteBuild> build(
      const BuildJob& job, const std::filesystem::path& extensions_dir,
      const std::function<void(const std::string&)>& progress) override;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace cudal1::queue
