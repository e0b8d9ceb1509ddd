// Which GPU a worker's sandbox gets: the driver's list of its GPUs (/proc/driver/nvidia), as
// CUDA_VISIBLE_DEVICES and the device's index name them, and the device nodes of each.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "cudal1/eval/worker_sandbox.hpp"

namespace cudal1 {
namespace {

namespace fs = std::filesystem;

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// `text` without the blanks around it.
std::string strip(const std::string& text) {
  const auto from = text.find_first_not_of(" \t\r\n");
  return from == std::string::npos ? ""
                                   : text.substr(from, text.find_last_not_of(" \t\r\n") - from + 1);
}

// The driver's own list of its GPUs, in PCI order.
std::vector<GpuAssignment> driver_gpus() {
  std::vector<GpuAssignment> gpus;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc/driver/nvidia/gpus", ec)) {
    std::ifstream information(entry.path() / "information");
    GpuAssignment gpu;
    gpu.proc_entry = entry.path();
    gpu.bus = entry.path().filename().string();
    std::string line, minor;
    while (std::getline(information, line)) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      const std::string key = strip(line.substr(0, colon));
      const std::string value = strip(line.substr(colon + 1));
      // The worker's spelling (sample_timer.cpp, NVML's): "GPU-" and lowercase digits.
      if (key == "GPU UUID")
        gpu.uuid = "GPU-" + lower(value.substr(std::min<std::size_t>(4, value.size())));
      if (key == "Device Minor") minor = value;
    }
    if (minor.empty()) continue;
    gpu.device_nodes = {fs::path("/dev/nvidia" + minor)};
    gpus.push_back(std::move(gpu));
  }
  std::sort(gpus.begin(), gpus.end(),
            [](const auto& a, const auto& b) { return lower(a.bus) < lower(b.bus); });
  return gpus;
}

// The driver's nodes every CUDA process opens besides its GPU's own.
std::vector<fs::path> shared_nvidia_nodes() {
  std::vector<fs::path> nodes;
  for (const char* name : {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"})
    if (fs::exists(name)) nodes.emplace_back(name);
  return nodes;
}

}  // namespace

std::vector<fs::path> all_nvidia_nodes() {
  std::vector<fs::path> nodes;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/dev", ec)) {
    const auto name = entry.path().filename().string();
    if (name.rfind("nvidia", 0) == 0 && !entry.is_directory()) nodes.push_back(entry.path());
  }
  return nodes;
}

std::optional<GpuAssignment> assign_gpu(const std::string& device, std::string& why) {
  const auto colon = device.find(':');
  const std::size_t index = colon == std::string::npos ? 0 : std::stoul(device.substr(colon + 1));
  const auto gpus = driver_gpus();
  if (gpus.empty()) {
    why = "/proc/driver/nvidia/gpus lists no GPU";
    return std::nullopt;
  }
  const GpuAssignment* chosen = nullptr;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible != nullptr) {
    std::vector<std::string> entries;
    std::istringstream list(visible);
    for (std::string entry; std::getline(list, entry, ',');)
      if (!strip(entry).empty()) entries.push_back(strip(entry));
    if (index >= entries.size()) {
      why = fmt::format("{}: CUDA_VISIBLE_DEVICES={} names fewer GPUs", device, visible);
      return std::nullopt;
    }
    const std::string entry = lower(entries[index]);
    if (entry.rfind("gpu-", 0) == 0) {
      for (const auto& gpu : gpus)
        if (lower(gpu.uuid).rfind(entry, 0) == 0) chosen = &gpu;
    } else if (!entry.empty() && std::all_of(entry.begin(), entry.end(), ::isdigit)) {
      const auto ordinal = std::stoul(entry);
      if (ordinal < gpus.size()) chosen = &gpus[ordinal];
    }
    if (chosen == nullptr) {
      why = fmt::format("{}: CUDA_VISIBLE_DEVICES entry '{}' names no GPU of the driver's", device,
                        entries[index]);
      return std::nullopt;
    }
  } else if (index < gpus.size()) {
    chosen = &gpus[index];
  } else {
    why = fmt::format("{}: the driver lists {} GPU(s)", device, gpus.size());
    return std::nullopt;
  }
  GpuAssignment out = *chosen;
  out.isolated = true;
  out.others_listed = gpus.size() > 1;
  for (auto& node : shared_nvidia_nodes()) out.device_nodes.push_back(node);
  return out;
}

}  // namespace cudal1
