// Use of a device across threads and processes: exclusive for timing, shared for work that only
// must not overlap a timing phase (correctness trials).
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cudal1/common/file_lock.hpp"
#include "cudal1/eval/correctness.hpp"

namespace cudal1 {

// `device_id` names the physical device ("cpu", or a GPU's UUID so that two processes with
// different CUDA_VISIBLE_DEVICES still share one lock per GPU).
std::filesystem::path device_lock_path(const std::filesystem::path& lock_dir,
                                       const std::string& device_id);

// The turnstile beside a device lock (see lock_device): whoever takes the lock shared passes it
// first. Workers that hold the device themselves take the same two.
std::filesystem::path device_turnstile_path(const std::filesystem::path& lock_path);

enum class DeviceUse {
  kExclusive,  // nothing else runs on the device: timing
  kShared,     // alongside other shared users, never alongside an exclusive one
};

// Blocks until the device is held for `use`. Fair between the two kinds: a request waiting for
// exclusive use holds a turnstile that later requests of either kind must pass, so a stream of
// shared users cannot keep a timing phase waiting for ever. While a shared hold already in place
// keeps it waiting, it opens the turnstile for a moment every `let_through_every` during the
// first 30 s of its wait: the shared
// users queued behind it run beside that hold instead of after the timing phase (a compilation
// inside a first call holds the device shared for tens of seconds; what runs beside it costs the
// waiting phase little); exclusive requests come to the turnstile one at a time, so no other one
// passes meanwhile. Never upgrade: release a shared hold before asking for exclusive use.
FileLock lock_device(const std::filesystem::path& lock_dir, const std::string& device_id,
                     DeviceUse use = DeviceUse::kExclusive,
                     std::chrono::milliseconds let_through_every = std::chrono::seconds(2));

// The trials are not timed: they share the device with other evaluations' trials, never with
// a timing phase. Each call on the device (the first calls, then every trial) takes the shared
// hold and gives it back, so a timing phase waiting for the device passes between the trials
// of a long evaluation; the trials' inputs are made on the host and their outputs compared
// outside the holds. Nothing of theirs runs on the device outside a hold, so nothing of theirs
// disturbs another evaluation's timing. Where both workers have a device gate, they take the
// hold themselves, only while their CUDA calls use the device: a compilation inside forward
// does not keep timing phases waiting.
//
// The holds are recorded in `phases` (device_shared: their union as [from, to] Unix seconds;
// device_shared_s, device_shared_wait_s), which must outlive this object; holds recorded there
// before (the calibration's, before the candidate loaded) are kept.
class SharedDeviceHolds : public DeviceHolds {
 public:
  // `acquire` takes the shared hold (lock_device with DeviceUse::kShared); `worker_hold` is the
  // "hold" requests carry when the workers hold the device themselves, null otherwise.
  SharedDeviceHolds(std::function<FileLock()> acquire, nlohmann::json worker_hold,
                    nlohmann::json& phases);
  ~SharedDeviceHolds() override { give_back(); }
  void take() override;
  void give_back() override;
  nlohmann::json worker_hold() const override { return worker_hold_; }
  void reported(const wire::Message& candidate_reply,
                const wire::Message& reference_reply) override;
  double waited_s() const override { return trusted_wait_s_; }

 private:
  void add(double from, double to);

  std::function<FileLock()> acquire_;
  nlohmann::json worker_hold_;
  nlohmann::json& phases_;
  std::optional<FileLock> lock_;
  std::vector<std::pair<double, double>> spans_;  // [from, to] per hold, Unix seconds
  double from_ = 0, wait_s_ = 0;
  double trusted_wait_s_ = 0;  // this process's waits and the reference worker's
};

// The device held alone until destroyed. When (Unix seconds) goes to phases[held_key] as
// [from, to]: the scheduler's exclusivity, checkable; the wait to phases[wait_key].
class ExclusiveDeviceHold {
 public:
  ExclusiveDeviceHold(const std::filesystem::path& lock_dir, const std::string& device_id,
                      nlohmann::json& phases, const char* wait_key, const char* held_key);
  // phases[held_key] is [from, to], or a list of them when the device was held more than once
  // (timing rounds give it back while their next workers load); phases[held_key + "_s"] sums them.
  ~ExclusiveDeviceHold();
  ExclusiveDeviceHold(const ExclusiveDeviceHold&) = delete;
  ExclusiveDeviceHold& operator=(const ExclusiveDeviceHold&) = delete;

 private:
  nlohmann::json& phases_;
  const char* held_key_;
  std::optional<FileLock> lock_;
  double from_ = 0;
};

}  // namespace cudal1
