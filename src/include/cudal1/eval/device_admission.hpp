// Admission of evaluations to a GPU by its free memory. An evaluation asks before it starts its
// workers, saying what they will hold; it goes in when the device's free memory, less what the
// evaluations let in before it will take but have not allocated yet (their workers still load),
// leaves that much and a margin, or when no other evaluation of this process is on the device
// (so one always runs, however little is free). Waiters go in the order they came, and free
// memory is read again while they wait: other processes' memory counts too.
//
// Without it, every evaluation in flight started its workers at once: 64 at once on one H100 ran
// it out of memory (bench/results/2026-11-27-split-hosts-and-memory.md). The out-of-memory retry
// (docs/evaluation.md) keeps verdicts right; admission keeps them from being needed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "cudal1/eval/gpu_clock.hpp"

namespace cudal1 {

class DeviceAdmission {
 public:
  using Memory = GpuMemory;
  // The device's memory now (nvml_device_memory); nullopt when it cannot be read (admission then
  // lets everyone in).
  using Reader = std::function<std::optional<Memory>(const std::string& device_id)>;

  // `poll`: how often a waiter reads the device's memory again.
  explicit DeviceAdmission(Reader reader,
                           std::chrono::milliseconds poll = std::chrono::milliseconds(250));
  DeviceAdmission(const DeviceAdmission&) = delete;
  DeviceAdmission& operator=(const DeviceAdmission&) = delete;

  // What one admitted evaluation has told the device it will take.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept;
    Ticket& operator=(Ticket&& other) noexcept;
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket() { leave(); }

    // More workers to start (bytes they will take), counted as not yet allocated.
    void expect(double bytes);
    // The workers have loaded: what they hold shows in the device's free memory now.
    void loaded();
    // The evaluation's workers are gone (idempotent; the destructor calls it).
    void leave();
    bool admitted() const { return owner_ != nullptr; }
    double waited_s() const { return waited_s_; }
    double need_bytes() const { return need_bytes_; }

   private:
    friend class DeviceAdmission;
    DeviceAdmission* owner_ = nullptr;
    std::string device_id_;
    std::uint64_t id_ = 0;
    double waited_s_ = 0;
    double need_bytes_ = 0;
  };

  // Waits until an evaluation whose workers will take `need_bytes` fits on `device_id` (see the
  // header comment). `margin_fraction` of the device's total memory (at least `min_margin_bytes`)
  // stays free besides.
  Ticket enter(const std::string& device_id, double need_bytes, double margin_fraction = 0.05,
               double min_margin_bytes = 1024.0 * 1024 * 1024);
  // The same with a need asked again each time it is weighed (what is known of the task's memory
  // can grow while it waits: another evaluation of the task has loaded).
  Ticket enter(const std::string& device_id, const std::function<double()>& need_bytes,
               double margin_fraction = 0.05, double min_margin_bytes = 1024.0 * 1024 * 1024);

  // Evaluations on `device_id` now, those waiting to go in, and the bytes of those inside not
  // yet allocated.
  unsigned inside(const std::string& device_id);
  std::size_t waiting(const std::string& device_id);
  double pending_bytes(const std::string& device_id);
  // Whether `bytes` more could be taken on `device_id` now: its free memory less what is pending
  // leaves that much and the margin (true where the memory cannot be read). Ready workers
  // (ready_workers.hpp) ask before each one they make; waiters do not stop them (a waiter takes
  // them, and its need is less by their contexts).
  bool has_room(const std::string& device_id, double bytes, double margin_fraction = 0.05,
                double min_margin_bytes = 1024.0 * 1024 * 1024);

  // Whether an idle worker made ahead (a ready worker) may take `bytes` on `device_id` now: room
  // as has_room says, and fewer than kQuietBelow evaluations inside. Every context alive on a
  // GPU makes each new one there slower, through its hardware queues (with the driver's 8: 0.22 s
  // beside none, 0.72 s beside 64 on an H200; far less with one, TimingConfig::cuda_connections;
  // bench/results/2026-11-28-cuda-connections.md), and the driver makes them one at a time, so
  // under load ready workers add no contexts, only idle ones; where evaluations come one or a few
  // at a time they take a context off each one's path.
  static constexpr unsigned kQuietBelow = 4;
  bool has_room_for_idle(const std::string& device_id, double bytes);

  // Frees memory of `device_id` that nothing needs now (a kept reference worker:
  // reference_pool.hpp) and says whether it freed any. The waiter at the head of the queue asks
  // it, one at a time, while it lacks room; set before the first enter().
  using Reclaim = std::function<bool(const std::string& device_id)>;
  void set_reclaim(Reclaim reclaim) { reclaim_ = std::move(reclaim); }

 private:
  struct Device {
    unsigned inside = 0;
    std::map<std::uint64_t, double> pending;  // ticket -> bytes its workers will still take
    std::deque<std::uint64_t> queue;          // waiters, first come first
  };
  static double sum(const std::map<std::uint64_t, double>& pending);
  // The device's memory; nullopt where it cannot be read (the reader says so, or throws).
  std::optional<Memory> read(const std::string& device_id) const;
  // Free bytes beyond `pending` and the margin.
  static double room(const Memory& memory, double pending, double margin_fraction,
                     double min_margin_bytes);
  void expect(const Ticket& ticket, double bytes);
  void loaded(const Ticket& ticket);
  void leave(const Ticket& ticket);

  Reader reader_;
  Reclaim reclaim_;
  std::chrono::milliseconds poll_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Device> devices_;
  std::uint64_t next_id_ = 1;
};

}  // namespace cudal1
