#include "cudal1/eval/memory_ledger.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

#include "cudal1/common/file_lock.hpp"
#include "cudal1/eval/device_lock.hpp"

namespace cudal1 {
namespace {

struct Entry {
  long pid = 0;
  std::uint64_t token = 0;
  double bytes = 0;
};

bool alive(long pid) {
  return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH);
}

// The entries of live processes. The caller holds the ledger's lock.
std::vector<Entry> live_entries(const std::filesystem::path& path) {
  std::vector<Entry> entries;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    Entry e;
    if (fields >> e.pid >> e.token >> e.bytes && alive(e.pid)) entries.push_back(e);
  }
  return entries;
}

// Written in place, under the ledger's lock (which made the file, readable and writable by every
// user like the device's other lock files).
void write_entries(const std::filesystem::path& path, const std::vector<Entry>& entries) {
  std::ofstream out(path, std::ios::trunc);
  for (const auto& e : entries)
    out << e.pid << ' ' << e.token << ' ' << static_cast<std::uint64_t>(std::llround(e.bytes))
        << '\n';
}

}  // namespace

std::filesystem::path memory_ledger_path(const std::filesystem::path& lock_dir,
                                         const std::string& device_id) {
  auto path = device_lock_path(lock_dir, device_id);
  path.replace_extension(".staged");
  return path;
}

MemoryReservation MemoryReservation::reserve(
    const std::filesystem::path& lock_dir, const std::string& device_id, double block_bytes,
    const std::function<std::size_t(double others)>& blocks_for) {
  static std::atomic<std::uint64_t> next_token{1};
  MemoryReservation r;
  r.ledger_ = memory_ledger_path(lock_dir, device_id);
  const FileLock lock = FileLock::acquire(r.ledger_, /*shared_between_users=*/true);
  auto entries = live_entries(r.ledger_);
  for (const auto& e : entries) r.others_bytes_ += e.bytes;
  r.blocks_ = blocks_for(r.others_bytes_);
  if (r.blocks_ > 0) {
    r.token_ = next_token++;
    entries.push_back(
        {static_cast<long>(::getpid()), r.token_, static_cast<double>(r.blocks_) * block_bytes});
  }
  write_entries(r.ledger_, entries);
  return r;
}

MemoryReservation::MemoryReservation(MemoryReservation&& other) noexcept
    : ledger_(std::move(other.ledger_)),
      token_(other.token_),
      blocks_(other.blocks_),
      others_bytes_(other.others_bytes_) {
  other.token_ = 0;
  other.blocks_ = 0;
}

MemoryReservation& MemoryReservation::operator=(MemoryReservation&& other) noexcept {
  if (this != &other) {
    release();
    ledger_ = std::move(other.ledger_);
    token_ = other.token_;
    blocks_ = other.blocks_;
    others_bytes_ = other.others_bytes_;
    other.token_ = 0;
    other.blocks_ = 0;
  }
  return *this;
}

MemoryReservation::~MemoryReservation() {
  release();
}

void MemoryReservation::release() {
  if (token_ == 0) return;
  try {
    const FileLock lock = FileLock::acquire(ledger_, true);
    auto entries = live_entries(ledger_);
    const long pid = ::getpid();
    std::erase_if(entries, [&](const Entry& e) { return e.pid == pid && e.token == token_; });
    write_entries(ledger_, entries);
  } catch (...) {
    // A ledger that cannot be written keeps the entry until this process ends.
  }
  token_ = 0;
  blocks_ = 0;
}

}  // namespace cudal1
