// What a sandbox adds to a worker's start: a candidate's worker is contained as an evaluation
// contains it (cudal1/eval/worker_sandbox.hpp: its task and candidate copied, a build
// directory of EXT_MIB copied, bubblewrap, setpriv, its cgroup where the machine gives one) or
// not (--sandbox off and no cgroup: the same environment and rlimits, nothing else), started,
// and asked one request that needs no model (`guards`);
// the time from the start to its reply is the worker's start. Both kinds alternate, REPS times.
// Prints one JSON object: each kind's min, median and max milliseconds, and the medians' gap.
//   cmake --build build --target cudal1_sandbox_bench &&
//   build/cudal1_sandbox_bench TASK CANDIDATE [REPS] [EXT_MIB]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cudal1/common/paths.hpp"
#include "cudal1/eval/worker_client.hpp"
#include "cudal1/eval/worker_sandbox.hpp"

namespace fs = std::filesystem;

namespace {

double start_once(cudal1::SandboxPolicy policy, const fs::path& task, const fs::path& candidate,
                  const fs::path& extensions, const fs::path& scratch, int n) {
  const auto begin = std::chrono::steady_clock::now();
  cudal1::WorkerContainment containment;
  containment.role = "candidate";
  containment.program = cudal1::default_worker_path();
  containment.device = "cpu";
  containment.inputs = {task, candidate};
  containment.extensions_dir = extensions;
  containment.private_dir = scratch / ("worker-" + std::to_string(n));
  const auto contained = cudal1::contain_worker(containment, policy);
  cudal1::WorkerSpec spec;
  spec.name = "candidate";
  spec.program = containment.program;
  spec.environment = contained.environment;
  spec.log_file = scratch / "worker.log";
  spec.argv = contained.argv;
  spec.inherit_environment = false;
  spec.limits = contained.limits;
  spec.working_directory = contained.working_directory;
  spec.sandboxed = contained.sandboxed;
  // Without: the plain worker as before containment (no cgroup either); with: all of it.
  if (policy != cudal1::SandboxPolicy::kOff) spec.cgroup = contained.cgroup;
  auto worker = cudal1::WorkerClient::start(spec);
  worker->call({{"op", "guards"}}, cudal1::Clock::now() + std::chrono::seconds(60));
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
  worker->shutdown();
  fs::remove_all(containment.private_dir);
  return ms;
}

nlohmann::json summary(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return {{"min_ms", ms.front()},
          {"median_ms", ms[ms.size() / 2]},
          {"max_ms", ms.back()},
          {"runs", ms.size()}};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: cudal1_sandbox_bench TASK CANDIDATE [REPS] [EXT_MIB]\n";
    return 2;
  }
  const int reps = argc > 3 ? std::atoi(argv[3]) : 20;
  const int ext_mib = argc > 4 ? std::atoi(argv[4]) : 8;
  const fs::path scratch = cudal1::make_private_directory(fs::temp_directory_path(), "sbx-bench-");
  // A build directory the size of a small CUDA extension's (objects and the library).
  const fs::path extensions = scratch / "extensions";
  fs::create_directories(extensions / "ext");
  {
    std::ofstream library(extensions / "ext" / "ext.so", std::ios::binary);
    const std::string block(1 << 20, 'x');
    for (int i = 0; i < ext_mib; ++i) library << block;
  }
  std::vector<double> plain, sandboxed;
  nlohmann::json failures = nlohmann::json::array();
  for (int i = 0; i < reps; ++i) {
    for (const auto policy : {cudal1::SandboxPolicy::kOff, cudal1::SandboxPolicy::kOn}) {
      const bool on = policy == cudal1::SandboxPolicy::kOn;
      try {
        (on ? sandboxed : plain)
            .push_back(start_once(policy, argv[1], argv[2], extensions, scratch, 2 * i + on));
      } catch (const std::exception& e) {
        failures.push_back({{"run", i}, {"sandbox", on}, {"error", e.what()}});
        std::cerr << "run " << i << (on ? " (sandbox)" : "") << ": " << e.what() << std::endl;
      }
    }
  }
  if (plain.empty() || sandboxed.empty()) {
    std::cout << nlohmann::json({{"failures", failures}}).dump(1) << std::endl;
    return 1;
  }
  nlohmann::json out = {{"sandbox", cudal1::SandboxSupport::probe().describe()},
                        {"extension_mib", ext_mib},
                        {"without", summary(plain)},
                        {"with", summary(sandboxed)},
                        {"failures", failures}};
  out["added_median_ms"] =
      out["with"]["median_ms"].get<double>() - out["without"]["median_ms"].get<double>();
  std::cout << out.dump(1) << std::endl;
  fs::remove_all(scratch);
  return 0;
}
