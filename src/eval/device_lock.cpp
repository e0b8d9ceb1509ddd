#include "cudal1/eval/device_lock.hpp"

#include <algorithm>
#include <cctype>
#include <thread>

#include "cudal1/common/unix_time.hpp"

namespace cudal1 {

std::filesystem::path device_lock_path(const std::filesystem::path& lock_dir,
                                       const std::string& device_id) {
  std::string name = "device-";
  for (char c : device_id)
    name += std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '_';
  return lock_dir / (name + ".lock");
}

std::filesystem::path device_turnstile_path(const std::filesystem::path& lock_path) {
  auto turnstile = lock_path;
  turnstile.replace_extension(".turnstile");
  return turnstile;
}

FileLock lock_device(const std::filesystem::path& lock_dir, const std::string& device_id,
                     DeviceUse use, std::chrono::milliseconds let_through_every) {
  using Clock = std::chrono::steady_clock;
  const auto path = device_lock_path(lock_dir, device_id);
  const auto turnstile_path = device_turnstile_path(path);
  // Held while waiting for the device, released once it is held: whoever waits for exclusive
  // use keeps new shared users out until it has had its turn.
  if (use == DeviceUse::kShared) {
    FileLock turnstile = FileLock::acquire(turnstile_path, /*shared_between_users=*/true);
    return FileLock::acquire_shared(path, true);
  }
  // Exclusive requests queue here first, so that when the one at the turnstile opens it for a
  // moment (below) only shared users pass, not another exclusive request.
  auto queue_path = path;
  queue_path.replace_extension(".queue");
  FileLock queue = FileLock::acquire(queue_path, true);
  FileLock turnstile = FileLock::acquire(turnstile_path, true);
  // Only in the first half minute of the wait: shared users let through in turn could otherwise
  // keep the device shared for ever.
  constexpr auto kLetThroughFor = std::chrono::seconds(30);
  const auto arrived = Clock::now();
  auto opened = arrived;
  for (;;) {
    if (auto held = FileLock::try_acquire(path, true)) return std::move(*held);
    // Held shared, not for timing: shared users waiting at the turnstile pass now (they take
    // their hold at once, beside the one in place); then this request takes its place at the
    // turnstile again.
    const auto now = Clock::now();
    if (now - arrived < kLetThroughFor && now - opened >= let_through_every &&
        FileLock::try_acquire_shared(path, true)) {
      turnstile.release();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      turnstile = FileLock::acquire(turnstile_path, true);
      opened = Clock::now();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

SharedDeviceHolds::SharedDeviceHolds(std::function<FileLock()> acquire, nlohmann::json worker_hold,
                                     nlohmann::json& phases)
    : acquire_(std::move(acquire)), worker_hold_(std::move(worker_hold)), phases_(phases) {
  for (const auto& span : phases_.value("device_shared", nlohmann::json::array()))
    spans_.emplace_back(span.at(0).get<double>(), span.at(1).get<double>());
  wait_s_ = phases_.value("device_shared_wait_s", 0.0);
}

void SharedDeviceHolds::take() {
  if (!worker_hold_.is_null()) return;
  const auto start = std::chrono::steady_clock::now();
  lock_.emplace(acquire_());
  const double waited = seconds_since(start);
  wait_s_ += waited;
  trusted_wait_s_ += waited;
  from_ = unix_now();
}

void SharedDeviceHolds::give_back() {
  if (!lock_) return;
  const double to = unix_now();
  lock_.reset();
  add(from_, to);
}

void SharedDeviceHolds::reported(const wire::Message& candidate_reply,
                                 const wire::Message& reference_reply) {
  for (const auto* reply : {&candidate_reply, &reference_reply}) {
    wait_s_ += reply->header.value("hold_wait_s", 0.0);
    for (const auto& span : reply->header.value("holds", nlohmann::json::array()))
      add(span.at(0).get<double>(), span.at(1).get<double>());
  }
  // Both workers wait for the same hold; only the reference's account is trusted.
  trusted_wait_s_ += std::max(0.0, reference_reply.header.value("hold_wait_s", 0.0));
}

// The union of the holds: the two workers' overlap.
void SharedDeviceHolds::add(double from, double to) {
  spans_.emplace_back(from, to);
  std::sort(spans_.begin(), spans_.end());
  std::vector<std::pair<double, double>> merged;
  for (const auto& span : spans_) {
    if (!merged.empty() && span.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, span.second);
    } else {
      merged.push_back(span);
    }
  }
  spans_ = std::move(merged);
  double held_s = 0;
  nlohmann::json spans = nlohmann::json::array();
  for (const auto& [a, b] : spans_) {
    spans.push_back({a, b});
    held_s += b - a;
  }
  phases_["device_shared"] = std::move(spans);
  phases_["device_shared_s"] = held_s;
  phases_["device_shared_wait_s"] = wait_s_;
}

ExclusiveDeviceHold::ExclusiveDeviceHold(const std::filesystem::path& lock_dir,
                                         const std::string& device_id, nlohmann::json& phases,
                                         const char* wait_key, const char* held_key)
    : phases_(phases), held_key_(held_key) {
  const auto start = std::chrono::steady_clock::now();
  lock_.emplace(lock_device(lock_dir, device_id, DeviceUse::kExclusive));
  phases_[wait_key] = phases_.value(wait_key, 0.0) + seconds_since(start);
  from_ = unix_now();
}

ExclusiveDeviceHold::~ExclusiveDeviceHold() {
  const double to = unix_now();
  lock_.reset();
  nlohmann::json& slot = phases_[held_key_];
  const nlohmann::json span = {from_, to};
  if (slot.is_array() && !slot.empty() && slot[0].is_number()) {
    slot = nlohmann::json::array({slot, span});
  } else if (slot.is_array() && !slot.empty()) {
    slot.push_back(span);
  } else {
    slot = span;
  }
  const std::string sum_key = std::string(held_key_) + "_s";
  phases_[sum_key] = phases_.value(sum_key, 0.0) + (to - from_);
}

}  // namespace cudal1
