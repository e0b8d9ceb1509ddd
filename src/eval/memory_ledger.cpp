#include "cudal1/eval/memory_ledger.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <fstream>
#include <mutex>
#include <random>
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

std::vector<Entry> read_entries(const std::filesystem::path& path) {
  std::vector<Entry> entries;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    Entry e;
    if (fields >> e.pid >> e.token >> e.bytes) entries.push_back(e);
  }
  return entries;
}

// Written in place: every reader and writer holds the ledger's lock.
void write_entries(const std::filesystem::path& path, const std::vector<Entry>& entries) {
  const bool created = !std::filesystem::exists(path);
  {
    std::ofstream out(path, std::ios::trunc);
    for (const auto& e : entries)
      out << e.pid << ' ' << e.token << ' ' << static_cast<std::uint64_t>(std::llround(e.bytes))
          << '\n';
  }
  if (created) {  // like the device's lock files: other users' evaluations share the device too
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::permissions(path,
                    fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                        fs::perms::group_write | fs::perms::others_read | fs::perms::others_write,
                    ec);
  }
}

std::filesystem::path guard_path(const std::filesystem::path& ledger) {
  auto guard = ledger;
  guard += ".lock";
  return guard;
}

}  // namespace

std::filesystem::path memory_ledger_path(const std::filesystem::path& lock_dir,
                                         const std::string& device_id) {
  auto path = device_lock_path(lock_dir, device_id);
  path.replace_extension(".staged");
  return path;
}

MemoryReservation MemoryReservation::reserve(const std::filesystem::path& lock_dir,
                                             const std::string& device_id, double free_bytes,
                                             double block_bytes, std::size_t want) {
  MemoryReservation r;
  if (want == 0 || !(block_bytes > 0)) return r;
  r.ledger_ = memory_ledger_path(lock_dir, device_id);
  FileLock guard = FileLock::acquire(guard_path(r.ledger_), /*shared_between_users=*/true);
  std::vector<Entry> entries;
  for (const auto& e : read_entries(r.ledger_))
    if (alive(e.pid)) entries.push_back(e);
  for (const auto& e : entries) r.others_bytes_ += e.bytes;
  const double room = 0.5 * free_bytes - r.others_bytes_;
  const double fit = room > 0 ? std::floor(room / block_bytes) : 0;
  r.blocks_ = static_cast<std::size_t>(std::min(fit, static_cast<double>(want)));
  if (r.blocks_ > 0) {
    static std::mt19937_64 engine{std::random_device{}()};
    static std::mutex engine_mutex;
    {
      std::lock_guard<std::mutex> lock(engine_mutex);
      r.token_ = engine() | 1;
    }
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
    FileLock guard = FileLock::acquire(guard_path(ledger_), true);
    auto entries = read_entries(ledger_);
    std::erase_if(entries, [&](const Entry& e) { return e.token == token_ || !alive(e.pid); });
    write_entries(ledger_, entries);
  } catch (...) {
    // A ledger that cannot be written keeps the entry until this process ends.
  }
  token_ = 0;
  blocks_ = 0;
}

}  // namespace cudal1
