// The account of device memory that evaluations set aside for staged timing rounds.
#include "cudal1/eval/memory_ledger.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "cudal1/eval/timing.hpp"

namespace cudal1 {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

// An evaluation's request, as the evaluations make it: up to `want` pairs of `block` bytes out
// of half of `free`, less what the others hold (pairs_to_stage, with rounds = want + 1).
MemoryReservation reserve(const std::filesystem::path& dir, const std::string& device, double free,
                          double block, std::size_t want) {
  return MemoryReservation::reserve(dir, device, block, [&](double others) {
    return pairs_to_stage(want + 1, free - 2 * others, block);
  });
}

class MemoryLedgerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("cudal1-ledger-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(MemoryLedgerTest, SecondEvaluationGetsWhatTheFirstLeft) {
  // 100 GiB free, half to use: the first takes its 2 pairs of 10 GiB; the second, seeing the same
  // free memory, gets 3 of 7 wanted (50 - 20 = 30 GiB); a third none.
  auto first = reserve(dir_, "GPU-a", 100 * kGiB, 10 * kGiB, 2);
  EXPECT_EQ(first.blocks(), 2u);
  EXPECT_DOUBLE_EQ(first.others_bytes(), 0);
  auto second = reserve(dir_, "GPU-a", 100 * kGiB, 10 * kGiB, 7);
  EXPECT_EQ(second.blocks(), 3u);
  EXPECT_DOUBLE_EQ(second.others_bytes(), 20 * kGiB);
  auto third = reserve(dir_, "GPU-a", 100 * kGiB, 10 * kGiB, 1);
  EXPECT_EQ(third.blocks(), 0u);
  // Another device has its own account.
  EXPECT_EQ(reserve(dir_, "GPU-b", 100 * kGiB, 10 * kGiB, 4).blocks(), 4u);
}

TEST_F(MemoryLedgerTest, ReleasedMemoryServesTheNext) {
  auto first = reserve(dir_, "GPU-a", 40 * kGiB, 10 * kGiB, 5);
  EXPECT_EQ(first.blocks(), 2u);
  EXPECT_EQ(reserve(dir_, "GPU-a", 40 * kGiB, 10 * kGiB, 1).blocks(), 0u);
  first.release();
  first.release();  // idempotent
  EXPECT_EQ(first.blocks(), 0u);
  auto again = reserve(dir_, "GPU-a", 40 * kGiB, 10 * kGiB, 1);
  EXPECT_EQ(again.blocks(), 1u);
  {
    // Moved: one owner, one release.
    MemoryReservation moved = std::move(again);
    EXPECT_EQ(moved.blocks(), 1u);
  }
  EXPECT_EQ(reserve(dir_, "GPU-a", 40 * kGiB, 10 * kGiB, 2).blocks(), 2u);
}

TEST_F(MemoryLedgerTest, NothingWantedOrUnknownSizeReservesNothing) {
  EXPECT_EQ(reserve(dir_, "cpu", 100 * kGiB, 10 * kGiB, 0).blocks(), 0u);
  EXPECT_EQ(reserve(dir_, "cpu", 100 * kGiB, 0, 3).blocks(), 0u);
  EXPECT_EQ(reserve(dir_, "cpu", -5 * kGiB, kGiB, 3).blocks(), 0u);
  EXPECT_EQ(reserve(dir_, "cpu", 100 * kGiB, kGiB, 3).blocks(), 3u);
}

TEST_F(MemoryLedgerTest, ReservationsOfEndedProcessesAreDropped) {
  // A process that reserved memory and died without giving it back (killed, crashed).
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto held = reserve(dir_, "GPU-a", 100 * kGiB, 10 * kGiB, 5);
    ::_exit(held.blocks() == 5 ? 0 : 1);  // no destructor runs
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  std::ifstream ledger(memory_ledger_path(dir_, "GPU-a"));
  std::string line;
  ASSERT_TRUE(std::getline(ledger, line)) << "the child's reservation is on record";
  auto ours = reserve(dir_, "GPU-a", 100 * kGiB, 10 * kGiB, 5);
  EXPECT_EQ(ours.blocks(), 5u);
  EXPECT_DOUBLE_EQ(ours.others_bytes(), 0);
}

TEST_F(MemoryLedgerTest, ALiveProcessesReservationCounts) {
  // A reservation of another live process (here: this test's parent's pid) is respected.
  std::filesystem::create_directories(dir_);
  std::ofstream(memory_ledger_path(dir_, "GPU-a"))
      << ::getppid() << " 12345 " << static_cast<std::uint64_t>(40 * kGiB) << "\n"
      << "not a line\n";
  auto ours = reserve(dir_, "GPU-a", 100 * kGiB, 10 * kGiB, 5);
  EXPECT_EQ(ours.blocks(), 1u);
  EXPECT_DOUBLE_EQ(ours.others_bytes(), 40 * kGiB);
}

}  // namespace
}  // namespace cudal1
