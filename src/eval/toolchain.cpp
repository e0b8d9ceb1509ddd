#include "cudal1/eval/toolchain.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "cudal1/common/log_trim.hpp"
#include "cudal1/common/process.hpp"
#include "cudal1/common/sha256.hpp"
#include "cudal1/common/text_file.hpp"
#include "cudal1/common/unix_time.hpp"
#include "cudal1/worker/protocol.hpp"

namespace cudal1 {

namespace proto = worker_protocol;
namespace {

// Importing PyTorch and asking nvcc for its version; generous for a cold file-system cache.
constexpr double kProbeTimeoutSeconds = 180;

// Environment variables that change which Python, PyTorch, compiler or GPUs the worker sees.
constexpr const char* kEnvironment[] = {"PATH",
                                        "PYTHONPATH",
                                        "PYTHONHOME",
                                        "VIRTUAL_ENV",
                                        "CONDA_PREFIX",
                                        "LD_LIBRARY_PATH",
                                        "CUDA_HOME",
                                        "CUDA_PATH",
                                        "CXX",
                                        "CUDA_VISIBLE_DEVICES",
                                        "NVIDIA_VISIBLE_DEVICES",
                                        "HIP_VISIBLE_DEVICES"};

// [size, mtime in ns] of a file, or null when it is not there.
nlohmann::json file_identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return nullptr;
  const long long mtime_ns =
      static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
  return nlohmann::json::array({static_cast<long long>(st.st_size), mtime_ns});
}

}  // namespace

Toolchain Toolchain::from_info(nlohmann::json info) {
  Toolchain toolchain;
  toolchain.info = std::move(info);
  nlohmann::json fingerprinted = toolchain.info;
  fingerprinted.erase("depends_on");  // where the answer came from, not what it is
  toolchain.fingerprint = sha256_hex(fingerprinted.dump());
  toolchain.cuda_available = toolchain.info.value("cuda_available", false);
  return toolchain;
}

Toolchain Toolchain::probe(const std::filesystem::path& worker,
                           const std::filesystem::path& log_file) {
  ProcessSpec spec;
  spec.argv = {worker.string(), proto::mode::kProbe};
  spec.log_file = log_file;
  nlohmann::json info;
  try {
    info = nlohmann::json::parse(run_and_capture(spec, kProbeTimeoutSeconds));
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("the worker ({}) could not start PyTorch: {}\n{}",
                                         worker.string(), e.what(), trim_log_file(log_file)));
  }
  return from_info(std::move(info));
}

nlohmann::json Toolchain::stamp(const std::filesystem::path& worker, const nlohmann::json& info) {
  nlohmann::json out;
  std::error_code ec;
  const auto worker_path = std::filesystem::weakly_canonical(worker, ec);
  out["worker"] = {(ec ? worker : worker_path).string(),
                   file_identity((ec ? worker : worker_path).string())};
  nlohmann::json files = nlohmann::json::object();
  for (const auto& path : info.value("depends_on", std::vector<std::string>{})) {
    files[path] = file_identity(path);
  }
  out["files"] = files;
  nlohmann::json environment = nlohmann::json::object();
  for (const char* name : kEnvironment) {
    if (const char* value = std::getenv(name)) environment[name] = value;
  }
  out["environment"] = environment;
  struct utsname host {};
  if (::uname(&host) == 0) out["kernel"] = host.release;
  try {
    out["nvidia_driver"] = read_file("/proc/driver/nvidia/version");
  } catch (const std::runtime_error&) {
    out["nvidia_driver"] = nullptr;  // no NVIDIA driver loaded
  }
  std::vector<std::string> devices;
  for (const auto& entry : std::filesystem::directory_iterator("/dev", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("nvidia", 0) == 0) devices.push_back(name);
  }
  std::sort(devices.begin(), devices.end());
  out["devices"] = devices;
  return out;
}

Toolchain Toolchain::load_or_probe(const std::filesystem::path& worker,
                                   const std::filesystem::path& cache_dir, double max_age_s) {
  const auto file = cache_dir / "toolchain.json";
  const char* setting = std::getenv("CUDAL1_TOOLCHAIN_CACHE");
  const bool use_cache = !(setting && std::string(setting) == "off");
  if (use_cache) {
    try {
      const auto stored = nlohmann::json::parse(read_file(file));
      const double age = unix_now() - stored.at("probed_at").get<double>();
      if (age >= 0 && age < max_age_s && stored.at("stamp") == stamp(worker, stored.at("info"))) {
        Toolchain toolchain = from_info(stored.at("info"));
        toolchain.from_cache = true;
        return toolchain;
      }
    } catch (const std::exception&) {
      // Missing, unreadable or from another version: probe again.
    }
  }
  Toolchain toolchain = probe(worker, cache_dir / "probe.log");
  if (use_cache) {
    const nlohmann::json stored = {{"probed_at", unix_now()},
                                   {"stamp", stamp(worker, toolchain.info)},
                                   {"info", toolchain.info}};
    try {
      write_file_atomic(file, stored.dump(2) + "\n");
    } catch (const std::exception&) {
      // A read-only cache directory costs a probe per process, nothing more.
    }
  }
  return toolchain;
}

std::string Toolchain::cuda_arch_list() const {
  std::string out;
  for (const auto& capability : info.value("capabilities", std::vector<std::string>{})) {
    if (!out.empty()) out += ';';
    out += capability;
  }
  return out;
}

}  // namespace cudal1
