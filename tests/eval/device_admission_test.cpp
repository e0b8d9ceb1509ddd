// Admission to a GPU by its free memory (DeviceAdmission), with a made-up device whose free
// memory the test sets.
#include "cudal1/eval/device_admission.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

namespace cudal1 {
namespace {

using namespace std::chrono_literals;

constexpr double kGib = 1024.0 * 1024 * 1024;

// A device of 80 GiB whose free memory the test sets; reads are counted.
struct FakeDevice {
  std::atomic<double> free_bytes{80 * kGib};
  std::atomic<int> reads{0};
  std::atomic<bool> readable{true};
  std::atomic<bool> throws{false};
  DeviceAdmission::Reader reader() {
    return [this](const std::string&) -> std::optional<DeviceAdmission::Memory> {
      ++reads;
      if (throws) throw std::runtime_error("NVML went away");
      if (!readable) return std::nullopt;
      return DeviceAdmission::Memory{free_bytes.load(), 80 * kGib};
    };
  }
};

// Asks for admission to GPU-a on a thread of its own.
std::future<DeviceAdmission::Ticket> enter_later(DeviceAdmission& admission, double bytes) {
  return std::async(std::launch::async,
                    [&admission, bytes] { return admission.enter("GPU-a", bytes); });
}

// Whether `entering` is still waiting after a while.
bool still_waiting(std::future<DeviceAdmission::Ticket>& entering) {
  return entering.wait_for(100ms) == std::future_status::timeout;
}

TEST(DeviceAdmission, TheFirstGoesInHoweverLittleIsFree) {
  FakeDevice gpu;
  gpu.free_bytes = 1 * kGib;
  DeviceAdmission admission(gpu.reader(), 5ms);
  DeviceAdmission::Ticket ticket = admission.enter("GPU-a", 10 * kGib);
  EXPECT_TRUE(ticket.admitted());
  EXPECT_EQ(admission.inside("GPU-a"), 1u);
  EXPECT_DOUBLE_EQ(admission.pending_bytes("GPU-a"), 10 * kGib);
  ticket.leave();
  EXPECT_EQ(admission.inside("GPU-a"), 0u);
  EXPECT_DOUBLE_EQ(admission.pending_bytes("GPU-a"), 0);
}

TEST(DeviceAdmission, IdleWorkersOnlyOnAQuietDevice) {
  FakeDevice gpu;
  DeviceAdmission admission(gpu.reader(), 5ms);
  std::vector<DeviceAdmission::Ticket> tickets;
  for (unsigned k = 0; k + 1 < DeviceAdmission::kQuietBelow; ++k) {
    tickets.push_back(admission.enter("GPU-a", 1 * kGib));
    tickets.back().loaded();
  }
  EXPECT_TRUE(admission.has_room_for_idle("GPU-a", 1 * kGib));
  EXPECT_FALSE(admission.has_room_for_idle("GPU-a", 78 * kGib));  // room still counts
  tickets.push_back(admission.enter("GPU-a", 1 * kGib));          // busy now
  EXPECT_FALSE(admission.has_room_for_idle("GPU-a", 1 * kGib));
  EXPECT_TRUE(admission.has_room("GPU-a", 1 * kGib));
  EXPECT_TRUE(admission.has_room_for_idle("GPU-b", 1 * kGib));  // each device its own
  tickets.back().leave();
  EXPECT_TRUE(admission.has_room_for_idle("GPU-a", 1 * kGib));
}

TEST(DeviceAdmission, WhatOthersWillTakeCountsUntilTheyHaveLoaded) {
  FakeDevice gpu;
  gpu.free_bytes = 20 * kGib;
  DeviceAdmission admission(gpu.reader(), 5ms);
  // Margin: 5 % of 80 GiB = 4 GiB. 20 - 6 (first, pending) - 4 >= 6: the second goes in.
  DeviceAdmission::Ticket first = admission.enter("GPU-a", 6 * kGib);
  DeviceAdmission::Ticket second = admission.enter("GPU-a", 6 * kGib);
  EXPECT_TRUE(second.admitted());
  // 20 - 12 - 4 < 6: the third waits...
  auto third = enter_later(admission, 6 * kGib);
  EXPECT_TRUE(still_waiting(third));
  EXPECT_EQ(admission.waiting("GPU-a"), 1u);
  // ... also once the first has loaded, while the device shows it (free 14, pending 6).
  gpu.free_bytes = 14 * kGib;
  first.loaded();
  EXPECT_TRUE(still_waiting(third));
  // The second loads too and took less than it said: 11 free, nothing pending.
  gpu.free_bytes = 11 * kGib;
  second.loaded();
  DeviceAdmission::Ticket in = third.get();
  EXPECT_TRUE(in.admitted());
  EXPECT_EQ(admission.inside("GPU-a"), 3u);
  EXPECT_EQ(admission.waiting("GPU-a"), 0u);
  EXPECT_GT(in.waited_s(), 0.05);
}

TEST(DeviceAdmission, StagedWorkersCountAsPendingUntilLoaded) {
  FakeDevice gpu;
  gpu.free_bytes = 28 * kGib;
  DeviceAdmission admission(gpu.reader(), 5ms);
  DeviceAdmission::Ticket first = admission.enter("GPU-a", 6 * kGib);
  first.loaded();
  first.expect(20 * kGib);  // staged pairs starting: 28 - 20 - 4 < 6
  EXPECT_DOUBLE_EQ(admission.pending_bytes("GPU-a"), 20 * kGib);
  auto second = enter_later(admission, 6 * kGib);
  EXPECT_TRUE(still_waiting(second));
  gpu.free_bytes = 12 * kGib;  // they loaded: 12 - 4 >= 6
  first.loaded();
  EXPECT_TRUE(second.get().admitted());
}

TEST(DeviceAdmission, AWaiterGoesInWhenTheOthersLeave) {
  FakeDevice gpu;
  gpu.free_bytes = 5 * kGib;
  DeviceAdmission admission(gpu.reader(), 5ms);
  DeviceAdmission::Ticket first = admission.enter("GPU-a", 6 * kGib);
  first.loaded();
  auto second = enter_later(admission, 6 * kGib);
  EXPECT_TRUE(still_waiting(second));
  first = DeviceAdmission::Ticket();  // moved over: the first leaves
  EXPECT_TRUE(second.get().admitted());
}

TEST(DeviceAdmission, WaitersGoInTheOrderTheyCame) {
  FakeDevice gpu;
  gpu.free_bytes = 12 * kGib;
  DeviceAdmission admission(gpu.reader(), 5ms);
  DeviceAdmission::Ticket first = admission.enter("GPU-a", 4 * kGib);
  first.loaded();
  gpu.free_bytes = 8 * kGib;
  // 8 - 4 < 20: the big one waits, and the small one behind it waits too (8 - 4 >= 2 would fit).
  auto big = enter_later(admission, 20 * kGib);
  EXPECT_TRUE(still_waiting(big));
  auto small = enter_later(admission, 2 * kGib);
  EXPECT_TRUE(still_waiting(small));
  first.leave();  // alone: the big one goes in, then the small one fits beside it (free 8)
  DeviceAdmission::Ticket big_in = big.get();
  EXPECT_TRUE(big_in.admitted());
  gpu.free_bytes = 30 * kGib;
  big_in.loaded();
  EXPECT_TRUE(small.get().admitted());
}

TEST(DeviceAdmission, ANeedAskedAgainWhileWaitingGoesInWhenItShrinks) {
  FakeDevice gpu;
  gpu.free_bytes = 12 * kGib;
  DeviceAdmission admission(gpu.reader(), 5ms);
  DeviceAdmission::Ticket first = admission.enter("GPU-a", 2 * kGib);
  first.loaded();
  // 12 - 4 < 10: waits until what is known of its task says 3 GiB.
  std::atomic<double> need{10 * kGib};
  auto second = std::async(std::launch::async,
                           [&] { return admission.enter("GPU-a", [&] { return need.load(); }); });
  EXPECT_TRUE(still_waiting(second));
  need = 3 * kGib;
  DeviceAdmission::Ticket in = second.get();
  EXPECT_TRUE(in.admitted());
  EXPECT_DOUBLE_EQ(in.need_bytes(), 3 * kGib);
  EXPECT_DOUBLE_EQ(admission.pending_bytes("GPU-a"), 3 * kGib);
}

TEST(DeviceAdmission, DevicesAreCountedApartAndAnUnreadableOneLetsEveryoneIn) {
  FakeDevice gpu;
  gpu.free_bytes = 2 * kGib;
  DeviceAdmission admission(gpu.reader(), 5ms);
  DeviceAdmission::Ticket a = admission.enter("GPU-a", 6 * kGib);
  DeviceAdmission::Ticket b = admission.enter("GPU-b", 6 * kGib);  // alone on its device
  EXPECT_TRUE(b.admitted());
  EXPECT_EQ(gpu.reads.load(), 0);  // nobody waited: nothing was read
  gpu.readable = false;
  DeviceAdmission::Ticket c = admission.enter("GPU-a", 6 * kGib);
  EXPECT_TRUE(c.admitted());
  EXPECT_EQ(admission.inside("GPU-a"), 2u);
  gpu.throws = true;  // a reader that fails lets it in too, and leaves nobody queued
  EXPECT_TRUE(admission.enter("GPU-a", 6 * kGib).admitted());
  EXPECT_EQ(admission.waiting("GPU-a"), 0u);
}

TEST(DeviceAdmission, RoomForOneMoreCountsWhatIsPendingAndTheMargin) {
  FakeDevice gpu;
  DeviceAdmission admission(gpu.reader(), 5ms);
  // 80 GiB free, a margin of 4 GiB (5 %): 76 GiB of room.
  EXPECT_TRUE(admission.has_room("GPU-a", 76 * kGib));
  EXPECT_FALSE(admission.has_room("GPU-a", 77 * kGib));
  DeviceAdmission::Ticket ticket = admission.enter("GPU-a", 70 * kGib);  // not allocated yet
  EXPECT_TRUE(admission.has_room("GPU-a", 6 * kGib));
  EXPECT_FALSE(admission.has_room("GPU-a", 7 * kGib));
  // A waiter does not stop it: it counts what it will take only once it is in. (More than the
  // device's room ever is: it goes in only alone, so no read of the memory between the steps
  // below lets it in early.)
  auto waiter = enter_later(admission, 77 * kGib);
  EXPECT_TRUE(still_waiting(waiter));
  EXPECT_TRUE(admission.has_room("GPU-a", 6 * kGib));
  ticket.loaded();
  gpu.free_bytes = 10 * kGib;  // what it loaded shows as used
  EXPECT_TRUE(admission.has_room("GPU-a", 6 * kGib));
  EXPECT_FALSE(admission.has_room("GPU-a", 7 * kGib));
  ticket.leave();
  gpu.free_bytes = 80 * kGib;
  EXPECT_TRUE(waiter.get().admitted());
  // Unreadable memory keeps nobody out.
  gpu.readable = false;
  EXPECT_TRUE(admission.has_room("GPU-a", 1000 * kGib));
  gpu.throws = true;
  EXPECT_TRUE(admission.has_room("GPU-a", 1000 * kGib));
}

}  // namespace
}  // namespace cudal1
