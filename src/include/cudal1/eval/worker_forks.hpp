// Warm workers: a zygote per device and containment imports PyTorch once (shared by the cudal1
// processes of one user); every reference and candidate worker after that is a fork of it, ready
// in milliseconds instead of an import's seconds. A forked worker still runs exactly one role of
// one evaluation and is discarded; it is contained as a started one is (its own namespaces, files,
// limits, cgroup, no capabilities: src/worker/zygote.cpp), and the orchestrator watches and kills
// it as a child of its own. docs/evaluation.md ("Warm workers") has the design and why sharing the
// import is safe.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cudal1/common/cgroup.hpp"
#include "cudal1/common/process.hpp"

namespace cudal1 {

struct ZygoteSpec {
  std::string key;              // zygotes of equal keys are one
  ProcessSpec process;          // how it is started (its sandbox, environment, limits)
  std::filesystem::path spool;  // the forked workers' folders, one each
  // Shared by every cudal1 process of this user with the same key: it listens on
  // spool/zygote.sock, outlives the process that started it and ends after a minute unused.
  // Otherwise it is this process's own and ends with it.
  bool shared = true;
};

class Zygote {
 public:
  // The running zygote for `spec.key`, started on first use (and again after one died), shared
  // by every evaluation of this process. Throws std::runtime_error when it cannot start.
  static std::shared_ptr<Zygote> obtain(const ZygoteSpec& spec);

  // A worker forked from it. `request` holds the fork keys (cudal1/worker/protocol.hpp) but its
  // id; the worker writes `log`, joins `cgroup` (where given) before it runs anything, and its
  // folder in the spool (`request`'s name) is removed once the returned process is gone.
  std::unique_ptr<ChildProcess> spawn(nlohmann::json request, const std::filesystem::path& log,
                                      const CgroupScope* cgroup);

  const std::filesystem::path& spool() const;
  double preload_seconds() const;  // the zygote's import of PyTorch

  struct State;
  struct Ended;
  explicit Zygote(std::shared_ptr<State> state) : state_(std::move(state)) {}

 private:
  std::shared_ptr<State> state_;
};

// What contain_worker decided for a forked worker (cudal1/eval/worker_sandbox.hpp).
struct ForkedStart {
  std::shared_ptr<Zygote> zygote;
  nlohmann::json request;
};

}  // namespace cudal1
