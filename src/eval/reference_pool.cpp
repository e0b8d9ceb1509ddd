#include "cudal1/eval/reference_pool.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <future>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#include "cudal1/common/paths.hpp"

namespace cudal1 {

namespace fs = std::filesystem;

struct ReferencePool::State : std::enable_shared_from_this<ReferencePool::State> {
  struct Entry {
    std::string key;
    KeptReference worker;
    Clock::time_point kept_at;
  };
  ReferencePoolLimits limits;
  fs::path work_root;
  fs::path folder;  // the kept workers' logs; made on first use
  std::uint64_t logs = 0;
  std::uint64_t ids = 0;
  std::mutex mutex;
  std::condition_variable changed;
  bool stopping = false;
  std::list<Entry> entries;  // most recently kept last
  std::size_t kept = 0, taken = 0, evicted = 0, expired = 0, retired = 0, dead = 0;
  std::map<std::string, std::size_t> leased;  // workers of each key in use (lease())
  std::size_t waits = 0, wait_timeouts = 0;
  double waited_s = 0;
  std::thread reaper;

  // Up to `most` of `entries` that `matches`, the least recently kept first, taken out and
  // counted in `counter` (`mutex` held).
  template <typename Matches>
  std::vector<KeptReference> take_out(const Matches& matches, std::size_t& counter,
                                      std::size_t most = SIZE_MAX) {
    std::vector<KeptReference> out;
    for (auto it = entries.begin(); it != entries.end() && out.size() < most;) {
      if (!matches(*it)) {
        ++it;
        continue;
      }
      out.push_back(std::move(it->worker));
      it = entries.erase(it);
      ++counter;
    }
    return out;
  }

  // A lease of `key` (ReferencePool::lease; `mutex` held): its end means one fewer of `key` in
  // use, and the waiters look again.
  std::shared_ptr<void> lease_locked(const std::string& key) {
    struct Lease {
      std::shared_ptr<State> state;
      std::string key;
      ~Lease() {
        {
          std::lock_guard lock(state->mutex);
          auto it = state->leased.find(key);
          if (it != state->leased.end() && --it->second == 0) state->leased.erase(it);
        }
        state->changed.notify_all();
      }
    };
    ++leased[key];
    auto lease = std::make_shared<Lease>();
    lease->state = shared_from_this();
    lease->key = key;
    return lease;
  }

  // The most recently kept worker of `key` but those of `used`, taken out and leased; one found
  // dead on the way goes into `dead` (`mutex` held).
  std::optional<KeptReference> take_one(const std::string& key, const std::set<std::uint64_t>& used,
                                        std::vector<KeptReference>& dead_ones) {
    for (auto it = entries.end(); it != entries.begin();) {
      --it;
      if (it->key != key || used.count(it->worker.id) > 0) continue;
      // One that died while it waited (killed from outside, out of memory) is dropped.
      const bool alive = it->worker.client->alive();
      KeptReference worker = std::move(it->worker);
      it = entries.erase(it);
      if (alive) {
        ++taken;
        worker.lease = lease_locked(key);
        return worker;
      }
      dead_ones.push_back(std::move(worker));
      ++dead;
    }
    return std::nullopt;
  }

  // Those of `entries` that waited past the limit, taken out (`mutex` held).
  std::vector<KeptReference> take_expired(Clock::time_point now) {
    const auto limit =
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limits.idle_s));
    return take_out([&](const Entry& e) { return now - e.kept_at >= limit; }, expired);
  }

  void reap() {
    std::unique_lock lock(mutex);
    while (!stopping) {
      changed.wait_for(lock, std::chrono::seconds(2));
      if (stopping) break;
      std::vector<KeptReference> old = take_expired(Clock::now());
      if (old.empty()) continue;
      lock.unlock();
      shut_down(old);
      lock.lock();
    }
  }

  // Shuts down up to `most` kept workers of `device_id`, the least recently kept first; how many.
  std::size_t evict(const std::string& device_id, std::size_t most) {
    std::vector<KeptReference> gone;
    {
      std::lock_guard lock(mutex);
      gone =
          take_out([&](const Entry& e) { return e.worker.device_id == device_id; }, evicted, most);
    }
    const std::size_t count = gone.size();
    shut_down(gone);
    return count;
  }

  // At once: a worker's exit (its CUDA context's teardown) takes a second or more on a GPU.
  static void shut_down(std::vector<KeptReference>& workers) {
    std::vector<std::future<void>> exits;
    for (auto& worker : workers) {
      if (!worker.client) continue;
      WorkerClient* client = worker.client.get();
      exits.push_back(std::async(std::launch::async, [client] { client->shutdown(); }));
    }
    for (auto& exit : exits) exit.wait();
    workers.clear();
  }
};

ReferencePool::ReferencePool(ReferencePoolLimits limits, fs::path work_root)
    : limits_(limits), state_(std::make_shared<State>()) {
  state_->limits = limits;
  state_->work_root = std::move(work_root);
  State* state = state_.get();
  state_->reaper = std::thread([state] { state->reap(); });
}

ReferencePool::~ReferencePool() {
  std::vector<KeptReference> all;
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
    std::size_t ended = 0;
    all = state_->take_out([](const State::Entry&) { return true; }, ended);
  }
  state_->changed.notify_all();
  if (state_->reaper.joinable()) state_->reaper.join();
  State::shut_down(all);
  std::error_code ec;
  if (!state_->folder.empty()) fs::remove_all(state_->folder, ec);
}

std::uint64_t ReferencePool::next_id() {
  std::lock_guard lock(state_->mutex);
  return ++state_->ids;
}

std::optional<KeptReference> ReferencePool::take(const std::string& key,
                                                 const std::set<std::uint64_t>& used) {
  std::vector<KeptReference> dead;
  std::optional<KeptReference> found;
  {
    std::lock_guard lock(state_->mutex);
    found = state_->take_one(key, used, dead);
  }
  State::shut_down(dead);
  return found;
}

ReferenceTurn ReferencePool::take_when_free(const std::string& key,
                                            const std::set<std::uint64_t>& used, std::size_t limit,
                                            Clock::time_point deadline,
                                            const std::function<bool()>& cancelled) {
  std::vector<KeptReference> dead;
  ReferenceTurn turn;
  {
    std::unique_lock lock(state_->mutex);
    const auto start = Clock::now();
    bool waited = false;
    for (;;) {
      turn.kept = state_->take_one(key, used, dead);
      if (turn.kept) break;
      const auto now = Clock::now();
      const bool timed_out = limit > 0 && now >= deadline;
      if (state_->stopping || limit == 0 || state_->leased[key] < limit || timed_out) {
        if (timed_out) ++state_->wait_timeouts;
        turn.lease = state_->lease_locked(key);
        break;
      }
      if (cancelled && cancelled()) break;
      waited = true;
      state_->changed.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(250)));
    }
    if (waited) {
      ++state_->waits;
      state_->waited_s += std::chrono::duration<double>(Clock::now() - start).count();
    }
  }
  State::shut_down(dead);
  return turn;
}

std::shared_ptr<void> ReferencePool::lease(const std::string& key) {
  std::lock_guard lock(state_->mutex);
  return state_->lease_locked(key);
}

std::shared_ptr<void> ReferencePool::lease_within(const std::string& key, std::size_t limit) {
  std::lock_guard lock(state_->mutex);
  const auto it = state_->leased.find(key);
  if (limit > 0 && it != state_->leased.end() && it->second >= limit) return nullptr;
  return state_->lease_locked(key);
}

void ReferencePool::keep(const std::string& key, KeptReference worker) {
  // No longer in use once it is in the pool: its lease ends after that (and not under the mutex,
  // which its end takes), so that a waiter it wakes finds it kept.
  std::shared_ptr<void> lease = std::move(worker.lease);
  std::vector<KeptReference> gone;
  {
    std::lock_guard lock(state_->mutex);
    if (state_->stopping || worker.uses >= limits_.max_uses || !worker.client ||
        !worker.client->idle()) {
      ++state_->retired;
      gone.push_back(std::move(worker));
    } else {
      if (state_->folder.empty())
        state_->folder = make_private_directory(state_->work_root, "kept-");
      // Its log leaves the evaluation's folder, which is removed with it.
      const fs::path log = state_->folder / fmt::format("reference-{}.log", ++state_->logs);
      std::error_code ec;
      fs::rename(worker.log, log, ec);
      if (!ec) {
        worker.log = log;
        worker.client->assign("reference", log, nullptr);
      }
      state_->entries.push_back({key, std::move(worker), Clock::now()});
      ++state_->kept;
      // Beyond a limit, the least recently kept of that key, then of that device, goes.
      const std::string device_id = state_->entries.back().worker.device_id;
      const auto drop_oldest = [&](std::size_t limit, const auto& matches) {
        const auto count = static_cast<std::size_t>(
            std::count_if(state_->entries.begin(), state_->entries.end(), matches));
        if (count <= limit) return;
        for (auto& worker : state_->take_out(matches, state_->evicted, count - limit))
          gone.push_back(std::move(worker));
      };
      drop_oldest(limits_.per_key, [&](const State::Entry& e) { return e.key == key; });
      drop_oldest(device_id == "cpu" ? limits_.per_cpu : limits_.per_device,
                  [&](const State::Entry& e) { return e.worker.device_id == device_id; });
    }
  }
  state_->changed.notify_all();  // an evaluation may be waiting for it (take_when_free)
  lease.reset();
  State::shut_down(gone);
}

std::size_t ReferencePool::available(const std::string& key) {
  std::lock_guard lock(state_->mutex);
  return static_cast<std::size_t>(std::count_if(state_->entries.begin(), state_->entries.end(),
                                                [&](const auto& e) { return e.key == key; }));
}

bool ReferencePool::evict(const std::string& device_id) {
  return state_->evict(device_id, 1) > 0;
}

void ReferencePool::evict_all(const std::string& device_id) {
  state_->evict(device_id, SIZE_MAX);
}

nlohmann::json ReferencePool::stats() {
  std::lock_guard lock(state_->mutex);
  return {{"kept", state_->kept},
          {"taken", state_->taken},
          {"evicted", state_->evicted},
          {"expired", state_->expired},
          {"retired", state_->retired},
          {"dead", state_->dead},
          {"waiting", state_->entries.size()},
          {"waits", state_->waits},
          {"waited_s", std::round(state_->waited_s * 1000) / 1000},
          {"wait_timeouts", state_->wait_timeouts}};
}

}  // namespace cudal1
