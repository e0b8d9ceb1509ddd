// Kept references (cudal1/eval/reference_pool.hpp) from an evaluation's side: the key of its
// task's references, taking a kept one or waiting for one (--task-references), and giving them
// back when it is done with them.
#include <fmt/format.h>

#include <algorithm>

#include "cudal1/worker/protocol.hpp"
#include "evaluation_internal.hpp"

namespace cudal1 {

namespace proto = worker_protocol;
namespace {

// How long a kept reference's reset may take (kept references, keep_references).
constexpr double kResetSeconds = 30;

}  // namespace

Evaluation::StartedWorker Evaluation::start_first_reference() {
  // It waits (in load()) where its task has as many references in use as the limit allows. Only
  // the first: a later round's reference is wanted at once, by an evaluation that may hold the
  // device, which the evaluations holding the others may be waiting for.
  if (reference_key_.empty() || shared_.config.references_per_task == 0)
    return start_worker(Side::kReference, "");
  {
    std::lock_guard start_lock(start_mutex_);
    if (auto kept = take_kept_reference(0)) return std::move(*kept);
  }
  // Under the limit: started here, on the evaluation's thread, as without one.
  if (auto lease =
          shared_.references.lease_within(reference_key_, shared_.config.references_per_task))
    return start_worker(Side::kReference, "", 0, false, std::move(lease));
  StartedWorker worker;
  worker.awaiting = true;
  return worker;
}

std::string Evaluation::reference_key() {
  // Workers alike in everything they were made and loaded with but the init seed, which the
  // reload sets: the task's text, the device, containment, limits and timer.
  return fmt::format(
      "{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", task_digest_, device_, gpu_uuid_.value_or(""),
      to_string(shared_.config.sandbox), shared_.config.worker.string(), memory_limit(),
      worker_cpu_seconds(), shared_.config.lock_dir.string(), shared_.headers.root().string(),
      nlohmann::json(worker_environment(false)).dump(), options_.trace_activity, device_gate_off());
}

std::optional<Evaluation::StartedWorker> Evaluation::take_kept_reference(std::size_t round) {
  if (reference_key_.empty()) return std::nullopt;
  const auto start = Clock::now();
  std::optional<KeptReference> kept = shared_.references.take(reference_key_, used_references_);
  if (!kept) return std::nullopt;
  return adopt_kept_reference(std::move(*kept), round, start);
}

Evaluation::StartedWorker Evaluation::adopt_kept_reference(KeptReference kept, std::size_t round,
                                                           Clock::time_point since) {
  used_references_.insert(kept.id);
  adopt(*kept.client, "reference", kept.log, Side::kReference, round);
  if (!verdict_.details.contains("sandbox")) {
    // How it was contained when it started (for an earlier evaluation of the task).
    nlohmann::json sandbox = kept.sandbox;
    if (sandbox.is_object()) {
      sandbox.erase("ready");
      sandbox["kept"] = true;
    }
    verdict_.details["sandbox"] = std::move(sandbox);
  }
  StartedWorker worker;
  worker.client = std::move(kept.client);
  worker.load_reply = load_request(proto::op::kReload, "reference", kept.device);
  worker.spawn_s = seconds_since(since);
  worker.kept = true;
  worker.round = round;
  worker.keepable = std::move(kept);
  ++kept_taken_;
  phases_["kept_references"] = kept_taken_;
  return worker;
}

void Evaluation::await_reference(StartedWorker& worker) {
  const auto start = Clock::now();
  // An evaluation holds its reference through its trials and its timing, and under load its
  // timing waits for the device: the wait is long (a minute at most), and pays only where new
  // contexts are slow (bench/results/2026-11-28-task-references.md).
  const double wait_s = std::min(shared_.config.reference_wait_s, options_.limits.load_s / 2);
  ReferenceTurn turn = shared_.references.take_when_free(
      reference_key_, used_references_, shared_.config.references_per_task, after(wait_s),
      [this] { return reference_unneeded_.load(); });
  const double waited_s = seconds_since(start);
  {
    std::lock_guard lock(load_cpu_mutex_);
    load_parts_["reference"]["awaited"] += 1;
    load_parts_["reference"]["await_s"] += waited_s;
  }
  const std::size_t round = worker.round;
  if (turn.kept) {
    std::lock_guard start_lock(start_mutex_);
    worker = adopt_kept_reference(std::move(*turn.kept), round, start);
    return;
  }
  if (!turn.lease) throw std::runtime_error("the candidate failed to load");
  // None kept in time, or its task has fewer in use than the limit now: one of its own, forked
  // (from this loading thread), counted under the lease the pool gave for it.
  worker = start_worker(Side::kReference, "", round, /*fresh=*/true, std::move(turn.lease));
}

void Evaluation::finish_reference(StartedWorker& reference) {
  if (!reference.client) return;
  reference.client->resume();  // a staged or retired one is stopped
  finished_references_.push_back(std::move(reference));
  reference = StartedWorker{};
}

void Evaluation::keep_references() {
  for (auto& reference : finished_references_) {
    if (!reference.client) continue;
    if (reference.keepable && reference.client->idle()) {
      try {
        // Its CPU since its last reset is this evaluation's; the reset makes it forget the rest.
        // A reset takes milliseconds; one that does not answer soon is not worth keeping.
        const wire::Message reply =
            reference.client->call({{proto::request::kOp, proto::op::kReset}},
                                   after(std::min(kResetSeconds, options_.limits.load_s)));
        cpu_ledger_->add("reference", reply.header);
        KeptReference kept = std::move(*reference.keepable);
        kept.log = reference.client->log_file();
        kept.client = std::move(reference.client);
        ++kept.uses;
        shared_.references.keep(reference_key_, std::move(kept));
        continue;
      } catch (const std::exception&) {
        // Not kept: it ends as any worker would.
      }
    }
    if (reference.client) reference.client->shutdown();
  }
  finished_references_.clear();
}

}  // namespace cudal1
