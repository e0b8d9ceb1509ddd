// Memory set aside on a device by evaluations that load worker pairs ahead of their timing
// rounds. Each evaluation sees the device's free memory, but several evaluations at once (a
// bench, a serve, two cudal1 processes) all see the same free memory: without a common account
// each stages as many pairs as half of it holds, and together they run the device out of memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

namespace cudal1 {

class MemoryReservation {
 public:
  MemoryReservation() = default;
  // Sets aside `blocks_for(others)` blocks of `block_bytes` each, where `others` is what the live
  // reservations of other evaluations on `device_id` hold (in every process that uses
  // `lock_dir`); possibly none. Reservations of processes that have ended are dropped.
  static MemoryReservation reserve(const std::filesystem::path& lock_dir,
                                   const std::string& device_id, double block_bytes,
                                   const std::function<std::size_t(double others)>& blocks_for);
  MemoryReservation(MemoryReservation&& other) noexcept;
  MemoryReservation& operator=(MemoryReservation&& other) noexcept;
  MemoryReservation(const MemoryReservation&) = delete;
  MemoryReservation& operator=(const MemoryReservation&) = delete;
  ~MemoryReservation();

  std::size_t blocks() const { return blocks_; }
  // What the other live reservations held when this one was made.
  double others_bytes() const { return others_bytes_; }
  // Gives the memory back (idempotent).
  void release();

 private:
  std::filesystem::path ledger_;
  std::uint64_t token_ = 0;  // unique within this process; 0: nothing reserved
  std::size_t blocks_ = 0;
  double others_bytes_ = 0;
};

// The ledger file of `device_id` under `lock_dir`, its own lock: one line per reservation,
// "pid token bytes".
std::filesystem::path memory_ledger_path(const std::filesystem::path& lock_dir,
                                         const std::string& device_id);

}  // namespace cudal1
