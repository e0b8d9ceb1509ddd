#include "cudal1/eval/devices.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <regex>
#include <stdexcept>

#include "cudal1/common/error.hpp"
#include "cudal1/eval/gpu_clock.hpp"

namespace cudal1 {

std::optional<int> visible_gpu_count() {
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    int count = 0;
    std::string list = visible;
    std::size_t start = 0;
    while (start <= list.size()) {
      const std::size_t comma = std::min(list.find(',', start), list.size());
      const std::string item = list.substr(start, comma - start);
      // CUDA stops at the first invalid entry; "-1" is the usual way to hide every GPU.
      if (item.empty() || item.starts_with("-")) break;
      ++count;
      start = comma + 1;
    }
    return count;
  }
  return nvml_device_count();
}

DeviceRequest parse_device_request(const std::string& text, bool lists) {
  DeviceRequest request;
  if (text == "auto") return request;
  if (text == "cpu") {
    request.kind = DeviceRequest::Kind::kCpu;
    return request;
  }
  if (text == "cuda") {
    request.kind = DeviceRequest::Kind::kCuda;
    return request;
  }
  request.kind = DeviceRequest::Kind::kList;
  static const std::regex kOne("cuda:([0-9]{1,4})");
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    start = comma + 1;
    std::smatch match;
    if (!std::regex_match(item, match, kOne) || (!lists && comma < text.size())) {
      throw InputError(
          lists ? fmt::format("--device '{}' is not understood: use auto, cpu, cuda (every visible "
                              "GPU), cuda:N, or a list such as cuda:0,cuda:1",
                              text)
                : fmt::format("--device '{}' is not understood: use auto, cpu, cuda or cuda:N",
                              text));
    }
    const int index = std::stoi(match[1].str());
    if (std::find(request.indices.begin(), request.indices.end(), index) == request.indices.end())
      request.indices.push_back(index);
  }
  return request;
}

std::string single_device(const std::string& text) {
  const DeviceRequest request = parse_device_request(text, false);
  switch (request.kind) {
    case DeviceRequest::Kind::kAuto:
      return "auto";
    case DeviceRequest::Kind::kCpu:
      return "cpu";
    case DeviceRequest::Kind::kCuda:
      return "cuda:0";
    case DeviceRequest::Kind::kList:
      break;
  }
  return fmt::format("cuda:{}", request.indices.front());
}

std::string device_kind(const std::string& device) {
  return device == "cuda" || device.starts_with("cuda:") ? "cuda" : device;
}

std::vector<std::string> resolve_devices(const std::string& requested, bool cuda_available,
                                         std::optional<int> gpu_count) {
  const DeviceRequest request = parse_device_request(requested, true);
  if (request.kind == DeviceRequest::Kind::kCpu) return {"cpu"};
  if (request.kind == DeviceRequest::Kind::kAuto && !cuda_available) return {"cpu"};
  std::vector<std::string> devices;
  if (request.kind != DeviceRequest::Kind::kList) {
    const int count = std::max(1, gpu_count.value_or(1));
    for (int i = 0; i < count; ++i) devices.push_back(fmt::format("cuda:{}", i));
  }
  for (const int index : request.indices) {
    if (cuda_available && gpu_count && index >= *gpu_count) {
      throw InputError(fmt::format("--device cuda:{}: only {} GPU{} visible here", index,
                                   *gpu_count, *gpu_count == 1 ? " is" : "s are"));
    }
    devices.push_back(fmt::format("cuda:{}", index));
  }
  if (!cuda_available) {
    throw InputError(
        fmt::format("--device {}: PyTorch sees no CUDA device here; use --device cpu", requested));
  }
  return devices;
}

std::string least_loaded(const std::vector<std::string>& devices,
                         const std::vector<std::string>& busy) {
  std::string best;
  std::ptrdiff_t best_load = 0;
  for (const auto& device : devices) {
    const auto load = std::count(busy.begin(), busy.end(), device);
    if (best.empty() || load < best_load) {
      best = device;
      best_load = load;
    }
  }
  return best;
}

DeviceLoad::DeviceLoad(std::vector<std::string> devices, std::size_t slack)
    : devices_(std::move(devices)), slack_(slack) {
  if (devices_.empty()) throw std::invalid_argument("evaluations need at least one device");
}

std::string DeviceLoad::choose(const std::string& task) const {
  std::map<std::string, std::size_t> load, same;  // leases per device, and those of `task`
  std::vector<std::string> busy;
  for (const Held& held : held_) {
    ++load[held.device];
    if (held.task == task) ++same[held.device];
    busy.push_back(held.device);
  }
  const std::string least = least_loaded(devices_, busy);
  if (slack_ == 0 || task.empty() || devices_.size() < 2) return least;
  const auto within_slack = [&](const std::string& device) {
    return load[device] <= load[least] + slack_;
  };
  std::string best;
  for (const auto& device : devices_) {
    if (within_slack(device) && same[device] > (best.empty() ? 0 : same[best])) best = device;
  }
  if (!best.empty()) return best;
  // None of the task in flight: where it ran last, if that is within the slack.
  const auto last = last_device_.find(task);
  return last != last_device_.end() && within_slack(last->second) ? last->second : least;
}

DeviceLoad::Lease::Lease(DeviceLoad& load, const std::string& task) : load_(load), task_(task) {
  std::lock_guard lock(load_.mutex_);
  device_ = load_.choose(task);
  load_.held_.push_back({device_, task});
  if (!task.empty()) load_.last_device_[task] = device_;
}

DeviceLoad::Lease::~Lease() {
  std::lock_guard lock(load_.mutex_);
  auto& held = load_.held_;
  const auto it = std::find_if(held.begin(), held.end(), [&](const Held& h) {
    return h.device == device_ && h.task == task_;
  });
  if (it != held.end()) held.erase(it);
}

}  // namespace cudal1
