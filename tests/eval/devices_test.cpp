// The one parser of device strings, and the devices evaluations spread over.
#include "cudal1/eval/devices.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>

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
