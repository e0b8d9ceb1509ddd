#include "cudal1/eval/device_admission.hpp"

#include <algorithm>
#include <numeric>
#include <utility>

namespace cudal1 {

DeviceAdmission::DeviceAdmission(Reader reader, std::chrono::milliseconds poll)
    : reader_(std::move(reader)), poll_(poll) {}

double DeviceAdmission::sum(const std::map<std::uint64_t, double>& pending) {
  return std::accumulate(pending.begin(), pending.end(), 0.0,
                         [](double total, const auto& entry) { return total + entry.second; });
}

std::optional<DeviceAdmission::Memory> DeviceAdmission::read(const std::string& device_id) const {
  try {
    return reader_(device_id);
  } catch (...) {
    return std::nullopt;  // unreadable: nobody is kept out for it
  }
}

double DeviceAdmission::room(const Memory& memory, double pending, double margin_fraction,
                             double min_margin_bytes) {
  const double margin = std::max(min_margin_bytes, margin_fraction * memory.total_bytes);
  return memory.free_bytes - pending - margin;
}

DeviceAdmission::Ticket DeviceAdmission::enter(const std::string& device_id, double need_bytes,
                                               double margin_fraction, double min_margin_bytes) {
  return enter(
      device_id, [need_bytes] { return need_bytes; }, margin_fraction, min_margin_bytes);
}

DeviceAdmission::Ticket DeviceAdmission::enter(const std::string& device_id,
                                               const std::function<double()>& need,
                                               double margin_fraction, double min_margin_bytes) {
  const auto asked = std::chrono::steady_clock::now();
  std::unique_lock lock(mutex_);
  Device& device = devices_[device_id];  // never erased: the reference stays valid
  const std::uint64_t id = next_id_++;
  device.queue.push_back(id);
  for (;;) {
    if (device.queue.front() == id) {
      if (device.inside == 0) break;
      // Read without the lock (NVML can take a while); what changed meanwhile is read again.
      lock.unlock();
      const std::optional<Memory> memory = read(device_id);
      lock.lock();
      // Unreadable: let it in rather than leave it at the head of the queue.
      if (!memory || device.inside == 0) break;
      if (room(*memory, sum(device.pending), margin_fraction, min_margin_bytes) >= need()) break;
      if (reclaim_) {
        // What idle workers hold goes before anyone waits for it; then the memory is read again.
        lock.unlock();
        const bool freed = reclaim_(device_id);
        lock.lock();
        if (freed) continue;
      }
    }
    changed_.wait_for(lock, poll_);
  }
  const double need_bytes = need();
  device.queue.pop_front();
  ++device.inside;
  device.pending[id] = need_bytes;
  changed_.notify_all();  // the next waiter's turn

  Ticket ticket;
  ticket.owner_ = this;
  ticket.device_id_ = device_id;
  ticket.id_ = id;
  ticket.need_bytes_ = need_bytes;
  ticket.waited_s_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count();
  return ticket;
}

void DeviceAdmission::expect(const Ticket& ticket, double bytes) {
  std::lock_guard lock(mutex_);
  devices_[ticket.device_id_].pending[ticket.id_] += bytes;
}

void DeviceAdmission::loaded(const Ticket& ticket) {
  std::lock_guard lock(mutex_);
  devices_[ticket.device_id_].pending.erase(ticket.id_);
  changed_.notify_all();
}

void DeviceAdmission::leave(const Ticket& ticket) {
  std::lock_guard lock(mutex_);
  Device& device = devices_[ticket.device_id_];
  device.pending.erase(ticket.id_);
  if (device.inside > 0) --device.inside;
  changed_.notify_all();
}

unsigned DeviceAdmission::inside(const std::string& device_id) {
  std::lock_guard lock(mutex_);
  return devices_[device_id].inside;
}

std::size_t DeviceAdmission::waiting(const std::string& device_id) {
  std::lock_guard lock(mutex_);
  return devices_[device_id].queue.size();
}

double DeviceAdmission::pending_bytes(const std::string& device_id) {
  std::lock_guard lock(mutex_);
  return sum(devices_[device_id].pending);
}

bool DeviceAdmission::has_room(const std::string& device_id, double bytes, double margin_fraction,
                               double min_margin_bytes) {
  double pending = 0;
  {
    std::lock_guard lock(mutex_);
    pending = sum(devices_[device_id].pending);
  }
  const std::optional<Memory> memory = read(device_id);
  return !memory || room(*memory, pending, margin_fraction, min_margin_bytes) >= bytes;
}

bool DeviceAdmission::has_room_for_idle(const std::string& device_id, double bytes) {
  return inside(device_id) < kQuietBelow && has_room(device_id, bytes);
}

DeviceAdmission::Ticket::Ticket(Ticket&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)),
      device_id_(std::move(other.device_id_)),
      id_(other.id_),
      waited_s_(other.waited_s_),
      need_bytes_(other.need_bytes_) {}

DeviceAdmission::Ticket& DeviceAdmission::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    leave();
    owner_ = std::exchange(other.owner_, nullptr);
    device_id_ = std::move(other.device_id_);
    id_ = other.id_;
    waited_s_ = other.waited_s_;
    need_bytes_ = other.need_bytes_;
  }
  return *this;
}

void DeviceAdmission::Ticket::expect(double bytes) {
  if (owner_) owner_->expect(*this, bytes);
}

void DeviceAdmission::Ticket::loaded() {
  if (owner_) owner_->loaded(*this);
}

void DeviceAdmission::Ticket::leave() {
  if (owner_) std::exchange(owner_, nullptr)->leave(*this);
}

}  // namespace cudal1
