#include "cudal1/eval/remote_builds.hpp"

#include <fmt/format.h>

#include "cudal1/common/sha256.hpp"

namespace cudal1 {

nlohmann::json BuildJob::to_json() const {
  return {{"key", key},
          {"toolchain", toolchain},
          {"init_seed", init_seed},
          {"build_s", build_s},
          {"task_path", task_path},
          {"task_source", task_source},
          {"candidate_path", candidate_path},
          {"candidate_source", candidate_source}};
}

BuildJob BuildJob::from_json(const nlohmann::json& json) {
  if (!json.is_object()) throw std::runtime_error("a build job is a JSON object");
  BuildJob job;
  try {
    job.key = json.at("key").get<std::string>();
    job.toolchain = json.at("toolchain");
    job.init_seed = json.at("init_seed").get<std::uint64_t>();
    job.build_s = json.value("build_s", job.build_s);
    job.task_path = json.value("task_path", "task.py");
    job.task_source = json.at("task_source").get<std::string>();
    job.candidate_path = json.value("candidate_path", "candidate.py");
    job.candidate_source = json.at("candidate_source").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(fmt::format("a build job: {}", e.what()));
  }
  if (!job.toolchain.is_object())
    throw std::runtime_error("a build job's toolchain is not an object");
  return job;
}

nlohmann::json build_toolchain(const nlohmann::json& info) {
  nlohmann::json out = nlohmann::json::object();
  for (const char* name : {"python", "torch", "torch_cuda", "cxx", "nvcc"})
    out[name] = info.contains(name) ? info[name] : nlohmann::json();
  // "Linux-6.8.0-x86_64-with-glibc2.39": the kernel does not matter to a build, the C library does.
  const std::string platform = info.value("platform", "");
  const auto glibc = platform.find("glibc");
  out["libc"] = glibc == std::string::npos ? platform : platform.substr(glibc);
  nlohmann::json headers = nlohmann::json::array();
  if (info.contains("torch_headers") && info["torch_headers"].is_array()) {
    for (const auto& entry : info["torch_headers"]) {
      if (!entry.is_string()) continue;
      const std::string text = entry.get<std::string>();
      headers.push_back(text.substr(0, text.rfind('@')));  // the path, not its time
    }
  }
  out["torch_headers"] = headers;
  return out;
}

std::string build_toolchain_id(const nlohmann::json& info) {
  return sha256_hex(build_toolchain(info).dump()).substr(0, 16);
}

}  // namespace cudal1
