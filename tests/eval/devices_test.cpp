// The one parser of device strings, and the devices evaluations spread over.
#include "cudal1/eval/devices.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cudal1/common/error.hpp"

namespace cudal1 {
namespace {

#ifndef EXPECT_CONTAINS
#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)
#endif

// The message of the InputError `call` throws ("" when it throws none).
std::string device_error(const std::function<void()>& call) {
  try {
    call();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(DevicesTest, ParsesEveryDeviceStringOnce) {
  using Kind = DeviceRequest::Kind;
  EXPECT_EQ(parse_device_request("auto", false).kind, Kind::kAuto);
  EXPECT_EQ(parse_device_request("cpu", false).kind, Kind::kCpu);
  EXPECT_EQ(parse_device_request("cuda", true).kind, Kind::kCuda);
  const DeviceRequest list = parse_device_request("cuda:2,cuda:0,cuda:2", true);
  EXPECT_EQ(list.kind, Kind::kList);
  EXPECT_EQ(list.indices, (std::vector<int>{2, 0}));
  // A single evaluation takes one device; only bench, serve and the worker take lists.
  EXPECT_CONTAINS(device_error([] { parse_device_request("cuda:0,cuda:1", false); }),
                  "use auto, cpu, cuda or cuda:N");
  EXPECT_CONTAINS(device_error([] { parse_device_request("cuda:", true); }), "a list such as");
  for (const char* bad : {"gpu", "CUDA", "cuda:-1", "cuda:x", "cuda:12345", " cpu", ""}) {
    EXPECT_CONTAINS(device_error([bad] { parse_device_request(bad, true); }), "is not understood");
  }
  EXPECT_EQ(single_device("cuda"), "cuda:0");
  EXPECT_EQ(single_device("cuda:3"), "cuda:3");
  EXPECT_EQ(single_device("auto"), "auto");
  EXPECT_EQ(single_device("cpu"), "cpu");
  EXPECT_EQ(device_kind("cuda:1"), "cuda");
  EXPECT_EQ(device_kind("cuda"), "cuda");
  EXPECT_EQ(device_kind("cpu"), "cpu");
}

TEST(DevicesTest, ResolvesTheDeviceOption) {
  using V = std::vector<std::string>;
  EXPECT_EQ(resolve_devices("cpu", true, 4), V{"cpu"});
  EXPECT_EQ(resolve_devices("auto", false, std::nullopt), V{"cpu"});
  EXPECT_EQ(resolve_devices("auto", true, 2), (V{"cuda:0", "cuda:1"}));
  EXPECT_EQ(resolve_devices("cuda", true, 3), (V{"cuda:0", "cuda:1", "cuda:2"}));
  EXPECT_EQ(resolve_devices("cuda", true, std::nullopt), V{"cuda:0"});
  EXPECT_EQ(resolve_devices("cuda:1", true, 2), V{"cuda:1"});
  EXPECT_EQ(resolve_devices("cuda:1,cuda:0,cuda:1", true, 2), (V{"cuda:1", "cuda:0"}));
  EXPECT_CONTAINS(device_error([] { resolve_devices("cuda", false, 0); }), "sees no CUDA device");
  EXPECT_CONTAINS(device_error([] { resolve_devices("gpu", true, 1); }), "--device 'gpu'");
  EXPECT_CONTAINS(device_error([] { resolve_devices("cuda:2", true, 2); }), "only 2 GPUs");
}

TEST(DevicesTest, NewTasksGoToTheLeastBusyDevice) {
  const std::vector<std::string> gpus = {"cuda:0", "cuda:1", "cuda:2"};
  EXPECT_EQ(least_loaded(gpus, {}), "cuda:0");
  EXPECT_EQ(least_loaded(gpus, {"cuda:0"}), "cuda:1");
  EXPECT_EQ(least_loaded(gpus, {"cuda:0", "cuda:1", "cuda:0"}), "cuda:2");
  EXPECT_EQ(least_loaded(gpus, {"cuda:2", "cuda:1", "cuda:0", "cuda:1"}), "cuda:0");
  EXPECT_EQ(least_loaded({"cpu"}, {"cpu", "cpu"}), "cpu");
  // Spread over two GPUs, eight tasks submitted one after another land four on each.
  std::vector<std::string> busy;
  for (int i = 0; i < 8; ++i) busy.push_back(least_loaded({"cuda:0", "cuda:1"}, busy));
  EXPECT_EQ(std::count(busy.begin(), busy.end(), "cuda:1"), 4);
}

TEST(DevicesTest, LeasesSpreadEvenlyWithoutAffinity) {
  DeviceLoad load({"cuda:0", "cuda:1"});
  std::vector<std::unique_ptr<DeviceLoad::Lease>> leases;
  for (int i = 0; i < 4; ++i) leases.push_back(std::make_unique<DeviceLoad::Lease>(load, "A"));
  EXPECT_EQ(leases[0]->device(), "cuda:0");
  EXPECT_EQ(leases[1]->device(), "cuda:1");
  EXPECT_EQ(leases[2]->device(), "cuda:0");
  EXPECT_EQ(leases[3]->device(), "cuda:1");
}

TEST(DevicesTest, ATasksEvaluationsStayTogetherWithinTheSlack) {
  DeviceLoad load({"cuda:0", "cuda:1", "cuda:2"}, 2);
  std::vector<std::unique_ptr<DeviceLoad::Lease>> a, b;
  // Task A's first lease takes the least busy device, the next ones join it while it is at
  // most 2 busier than the least busy.
  for (int i = 0; i < 3; ++i) a.push_back(std::make_unique<DeviceLoad::Lease>(load, "A"));
  EXPECT_EQ(a[0]->device(), "cuda:0");
  EXPECT_EQ(a[1]->device(), "cuda:0");
  EXPECT_EQ(a[2]->device(), "cuda:0");
  // Beyond the slack it goes where there is room.
  a.push_back(std::make_unique<DeviceLoad::Lease>(load, "A"));
  EXPECT_EQ(a[3]->device(), "cuda:1");
  // Another task starts on the least busy device and gathers there.
  b.push_back(std::make_unique<DeviceLoad::Lease>(load, "B"));
  b.push_back(std::make_unique<DeviceLoad::Lease>(load, "B"));
  EXPECT_EQ(b[0]->device(), "cuda:2");
  EXPECT_EQ(b[1]->device(), "cuda:2");
  // Leases without a task go to the least busy device.
  DeviceLoad::Lease plain(load);
  EXPECT_EQ(plain.device(), "cuda:1");
}

TEST(DevicesTest, ATaskGoesBackToTheDeviceItUsedLast) {
  DeviceLoad load({"cuda:0", "cuda:1"}, 4);
  std::string first;
  {
    DeviceLoad::Lease other(load, "B");  // cuda:0 busy: A starts on cuda:1
    DeviceLoad::Lease a(load, "A");
    first = a.device();
  }
  EXPECT_EQ(first, "cuda:1");
  // Nothing in flight now; A's next evaluation finds the kept references where it ran.
  DeviceLoad::Lease again(load, "A");
  EXPECT_EQ(again.device(), "cuda:1");
  // Ending a lease removes its own entry, not another task's on the same device.
  auto b = std::make_unique<DeviceLoad::Lease>(load, "B");
  EXPECT_EQ(b->device(), "cuda:0");
  {
    DeviceLoad::Lease a2(load, "A");
    EXPECT_EQ(a2.device(), "cuda:1");
  }
  b.reset();
  DeviceLoad::Lease b2(load, "B");
  EXPECT_EQ(b2.device(), "cuda:0");
}

TEST(DevicesTest, CountsVisibleDevices) {
  const char* saved = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string previous = saved ? saved : "";
  ::setenv("CUDA_VISIBLE_DEVICES", "0,2,3", 1);
  EXPECT_EQ(visible_gpu_count(), 3);
  ::setenv("CUDA_VISIBLE_DEVICES", "GPU-aaaa,GPU-bbbb", 1);
  EXPECT_EQ(visible_gpu_count(), 2);
  ::setenv("CUDA_VISIBLE_DEVICES", "1,-1,2", 1);
  EXPECT_EQ(visible_gpu_count(), 1);
  ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
  EXPECT_EQ(visible_gpu_count(), 0);
  if (saved) {
    ::setenv("CUDA_VISIBLE_DEVICES", previous.c_str(), 1);
  } else {
    ::unsetenv("CUDA_VISIBLE_DEVICES");
  }
}

}  // namespace
}  // namespace cudal1
