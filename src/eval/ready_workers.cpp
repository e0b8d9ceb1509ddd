#include "cudal1/eval/ready_workers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "cudal1/common/paths.hpp"
#include "cudal1/worker/protocol.hpp"

namespace cudal1 {
namespace {

namespace fs = std::filesystem;
namespace proto = worker_protocol;

// Failures in a row after which a recipe's makers stop (its evaluations fork their own workers);
// between failures they wait twice as long each time, from half a second up to half a minute.
constexpr unsigned kFailuresToGiveUp = 6;
constexpr auto kFirstBackoff = std::chrono::milliseconds(500);
constexpr auto kMostBackoff = std::chrono::seconds(30);
// How often a maker without room on its device looks again.
constexpr auto kRoomPoll = std::chrono::milliseconds(250);

}  // namespace

WorkerSpec contained_spec(const WorkerContainment& containment, const ContainedCommand& contained,
                          const fs::path& log) {
  WorkerSpec spec;
  spec.name = containment.role;
  spec.program = containment.program;
  spec.environment = contained.environment;
  spec.log_file = log;
  spec.memory_limit_bytes = containment.memory_bytes;
  spec.cpu_limit_seconds = static_cast<double>(containment.cpu_seconds);
  spec.cgroup = contained.cgroup;
  spec.argv = contained.argv;
  spec.inherit_environment = false;
  spec.limits = contained.limits;
  spec.working_directory = contained.working_directory;
  spec.sandboxed = contained.sandboxed;
  spec.forked = contained.forked;
  spec.input_paths = contained.input_paths;
  spec.build_output = contained.build_output;
  return spec;
}

struct ReadyWorkers::State {
  std::size_t makers = 1;
  Room room;
  fs::path work_root;

  // The ready workers of one recipe, and its makers.
  struct Kind {
    ReadyRecipe recipe;
    std::deque<ReadyWorker> ready;
    std::size_t making = 0;   // being made now
    std::size_t claimed = 0;  // takers waiting for one of those
    unsigned failures_in_row = 0;
    bool given_up = false;
    std::set<WorkerClient*> in_progress;  // killed when the pool ends
    std::vector<std::thread> threads;
  };

  std::mutex mutex;
  std::condition_variable changed;
  bool stopping = false;
  std::map<std::string, std::unique_ptr<Kind>> kinds;
  fs::path folder;  // the workers' logs until taken; made on first use
  std::uint64_t counter = 0;
  std::uint64_t made = 0, taken = 0, waited = 0, failed = 0;
  std::string last_error;

  // The kind of `recipe`, its makers started when it is new (`mutex` held).
  Kind& kind_for(const ReadyRecipe& recipe);
  void run_maker(Kind& kind, bool reserved);
  ReadyWorker make(Kind& kind, std::uint64_t number);
};

ReadyWorkers::State::Kind& ReadyWorkers::State::kind_for(const ReadyRecipe& recipe) {
  auto& slot = kinds[recipe.key];
  if (slot) return *slot;
  if (folder.empty()) folder = make_private_directory(work_root, "ready-");
  slot = std::make_unique<Kind>();
  slot->recipe = recipe;
  // The first ones count as being made from now: a take() right after this waits for them.
  const std::size_t first = std::min(makers, recipe.target);
  slot->making = first;
  for (std::size_t k = 0; k < makers && recipe.target > 0; ++k) {
    Kind* kind = slot.get();
    slot->threads.emplace_back([this, kind, reserved = k < first] { run_maker(*kind, reserved); });
  }
  return *slot;
}

ReadyWorker ReadyWorkers::State::make(Kind& kind, std::uint64_t number) {
  const ReadyRecipe& recipe = kind.recipe;
  const auto start = Clock::now();
  WorkerContainment containment = recipe.containment;
  containment.role = "ready";
  containment.forked = true;
  containment.ready = true;
  containment.private_dir = folder;
  ReadyWorker worker;
  worker.contained = contain_worker(containment, recipe.policy);
  if (!worker.contained.forked)
    throw std::runtime_error("ready workers are forks of a warm zygote, and none could be had");
  worker.log = folder / fmt::format("ready-{}.log", number);
  worker.client = WorkerClient::start(contained_spec(containment, worker.contained, worker.log));
  WorkerClient* client = worker.client.get();
  {
    std::lock_guard lock(mutex);
    if (stopping) throw std::runtime_error("the ready workers are ending");
    kind.in_progress.insert(client);
  }
  const nlohmann::json request = {{proto::request::kOp, proto::op::kPrepareDevice},
                                  {proto::request::kDevice, worker.contained.worker_device}};
  try {
    const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(recipe.prepare_s));
    const auto reply = client->call(request, deadline);
    worker.parts = reply.header.value(proto::reply::kLoadParts, nlohmann::json::object());
  } catch (...) {
    std::lock_guard lock(mutex);
    kind.in_progress.erase(client);
    throw;
  }
  std::lock_guard lock(mutex);
  kind.in_progress.erase(client);
  return worker;
}

void ReadyWorkers::State::run_maker(Kind& kind, bool reserved) {
  std::unique_lock lock(mutex);
  for (;;) {
    if (!reserved) {
      changed.wait(lock, [&] {
        return stopping || (!kind.given_up && kind.ready.size() + kind.making < kind.recipe.target);
      });
      if (stopping || kind.given_up) return;
      lock.unlock();
      bool room_now = true;
      try {
        room_now = !room || room(kind.recipe.device_id, kind.recipe.device_bytes);
      } catch (...) {
        // Unreadable: as admission does, no one is kept out for it.
      }
      lock.lock();
      if (stopping) return;
      if (!room_now) {
        changed.wait_for(lock, kRoomPoll);
        continue;
      }
      if (kind.ready.size() + kind.making >= kind.recipe.target) continue;
      ++kind.making;
    }
    reserved = false;
    const std::uint64_t number = ++counter;
    lock.unlock();
    std::optional<ReadyWorker> worker;
    std::string error;
    try {
      worker = make(kind, number);
    } catch (const std::exception& e) {
      error = e.what();
    }
    lock.lock();
    --kind.making;
    if (worker && !stopping && worker->client->alive()) {
      kind.ready.push_back(std::move(*worker));
      ++made;
      kind.failures_in_row = 0;
      changed.notify_all();
      continue;
    }
    changed.notify_all();
    if (worker) {
      // Made as the pool ended (or dead already): gone, outside the lock (its kill waits).
      lock.unlock();
      worker.reset();
      lock.lock();
      if (stopping) return;
      error = "it ended while idle";
    }
    ++failed;
    last_error = error;
    if (++kind.failures_in_row >= kFailuresToGiveUp) {
      kind.given_up = true;
      changed.notify_all();
      return;
    }
    const auto backoff =
        std::min<Clock::duration>(kMostBackoff, kFirstBackoff * (1u << (kind.failures_in_row - 1)));
    changed.wait_for(lock, backoff, [&] { return stopping; });
    if (stopping) return;
  }
}

ReadyWorkers::ReadyWorkers(std::size_t makers, Room room, fs::path work_root)
    : state_(std::make_shared<State>()) {
  state_->makers = std::max<std::size_t>(1, makers);
  state_->room = std::move(room);
  state_->work_root = std::move(work_root);
}

ReadyWorkers::~ReadyWorkers() {
  std::vector<std::thread> threads;
  std::vector<ReadyWorker> idle;
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
    for (auto& [key, kind] : state_->kinds) {
      for (WorkerClient* client : kind->in_progress) client->kill();
      for (auto& thread : kind->threads) threads.push_back(std::move(thread));
      for (auto& worker : kind->ready) idle.push_back(std::move(worker));
      kind->ready.clear();
    }
    state_->changed.notify_all();
  }
  for (auto& thread : threads) thread.join();
  idle.clear();  // killed
  if (!state_->folder.empty()) {
    std::error_code ec;
    fs::remove_all(state_->folder, ec);
  }
}

void ReadyWorkers::prepare(const ReadyRecipe& recipe) {
  if (recipe.target == 0) return;
  std::lock_guard lock(state_->mutex);
  if (!state_->stopping) state_->kind_for(recipe);
}

std::optional<ReadyWorker> ReadyWorkers::take(const ReadyRecipe& recipe) {
  if (recipe.target == 0) return std::nullopt;
  State& state = *state_;
  std::unique_lock lock(state.mutex);
  if (state.stopping) return std::nullopt;
  State::Kind& kind = state.kind_for(recipe);
  bool waited = false;
  for (;;) {
    while (!kind.ready.empty()) {
      ReadyWorker worker = std::move(kind.ready.front());
      kind.ready.pop_front();
      state.changed.notify_all();  // its maker makes the next
      lock.unlock();
      if (worker.client->alive()) {
        lock.lock();
        ++state.taken;
        if (waited) ++state.waited;
        return worker;
      }
      worker.client.reset();  // died while idle: the next one, or none
      lock.lock();
    }
    if (state.stopping || kind.given_up || kind.making <= kind.claimed) return std::nullopt;
    ++kind.claimed;
    waited = true;
    state.changed.wait(
        lock, [&] { return state.stopping || !kind.ready.empty() || kind.making < kind.claimed; });
    --kind.claimed;
  }
}

std::size_t ReadyWorkers::available(const std::string& key) {
  std::lock_guard lock(state_->mutex);
  const auto it = state_->kinds.find(key);
  return it == state_->kinds.end() ? 0 : it->second->ready.size();
}

nlohmann::json ReadyWorkers::stats() {
  std::lock_guard lock(state_->mutex);
  nlohmann::json out = {{"made", state_->made},
                        {"taken", state_->taken},
                        {"waited", state_->waited},
                        {"failed", state_->failed}};
  if (!state_->last_error.empty()) out["last_error"] = state_->last_error;
  return out;
}

}  // namespace cudal1
