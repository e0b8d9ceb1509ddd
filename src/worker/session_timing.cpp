// Timing: the input pool and the unseen sets, timed samples (single or batched) with their spot
// checks, the activity trace's summary, and the device's memory bandwidth.
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "session.hpp"
#include "session_common.hpp"

namespace cudal1::worker {
namespace {

using json = nlohmann::json;
namespace req = proto::request;
namespace rep = proto::reply;
namespace part = proto::part;

const char* mode_name(TimingMode mode) {
  return mode == TimingMode::kQueued ? proto::timing_mode::kQueued : proto::timing_mode::kWindow;
}

json describe_sample(const SampleResult& result, TimingMode asked, const SampleTimer& timer) {
  json out = {{rep::kMs, result.ms},
              {rep::kHostMs, result.host_ms},
              {rep::kMode, mode_name(result.mode)},
              {rep::kHeld, result.held}};
  if (result.kernel_ms) {
    out[rep::kKernelMs] = *result.kernel_ms;
    out[rep::kKernels] = result.kernels;
  }
  if (asked == TimingMode::kQueued && result.mode != TimingMode::kQueued)
    out[rep::kQueuedUnavailable] = timer.queued_unavailable();
  return out;
}

// Seconds since `start` on the steady clock.
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

void Session::forget_pool() {
  pool_.clear();
  unseen_.clear();
  pool_request_ = pool_reply_ = json();
}

json Session::make_unseen(std::size_t count) {
  json described = json::array();
  for (std::size_t i = 0; i < count && unseen_.size() < unseen_limit_; ++i) {
    const std::uint64_t seed = unseen_seed_ + unseen_.size();
    // On the host, kept as bytes and plain values out of the garbage collector's lists where
    // the harness can (else as the tensors, on the device); a task whose get_inputs() makes
    // device tensors itself gets them copied, as harness work.
    UnseenSet set;
    timer_->harness([&] {
      py::list inputs = runtime_.host("make_inputs")(get_inputs_, seed, "cpu");
      described.push_back(describe_inputs(inputs, true));
      py::object hidden = harness_["hide"](inputs);
      if (hidden.is_none()) {
        unseen_hidden_ = false;
        set.inputs = runtime_.host("make_inputs")(get_inputs_, seed, device_);
        return;
      }
      for (py::handle entry : hidden) {
        py::tuple item = entry.cast<py::tuple>();
        set.hidden.push_back({item[0].cast<bool>(), py::reinterpret_borrow<py::object>(item[1]),
                              item[2].cast<std::string>(), item[3].cast<std::vector<int64_t>>()});
      }
    });
    unseen_.push_back(std::move(set));
  }
  return described;
}

wire::Message Session::more_unseen(const json& request) {
  if (pool_.empty()) throw std::runtime_error("more_unseen requested before prepare_timing");
  const std::size_t first = unseen_.size();
  json described = make_unseen(request.at(req::kCount).get<std::size_t>());
  timer_->synchronize();
  return {{{rep::kOk, true},
           {rep::kFirst, first},
           {rep::kUnseenInputs, std::move(described)},
           {rep::kUnseenHidden, unseen_hidden_}},
          {}};
}

py::list Session::take_unseen(std::size_t index) {
  if (index >= unseen_.size())
    throw std::runtime_error("there is no unseen input set " + std::to_string(index));
  UnseenSet& set = unseen_[index];
  if (set.used)
    throw std::runtime_error("unseen input set " + std::to_string(index) + " was used already");
  set.used = true;
  py::list inputs;
  if (!set.hidden.empty() || set.inputs.empty()) {
    for (const auto& value : set.hidden) {
      inputs.append(value.tensor ? harness_["reveal"](value.data, value.dtype, value.shape, device_)
                                 : value.data);
    }
  } else {
    inputs = harness_["fresh"](set.inputs);
  }
  set.hidden.clear();
  set.inputs = py::list();
  return inputs;
}

wire::Message Session::prepare_timing(const json& request) {
  const auto seed = request.at(req::kSeed).get<std::uint64_t>();
  const auto streams = request.value(req::kStreams, std::size_t{1});
  if (streams < 1 || streams > 64) throw std::runtime_error("'streams' takes 1 to 64");
  // Made before the timing phase already (the orchestrator asks again inside it).
  json asked = request;
  asked.erase(req::kHold);
  // Unseen sets are used once each: a repeated request says how many are left.
  const auto unseen_left = [this] {
    return static_cast<std::size_t>(std::count_if(unseen_.begin(), unseen_.end(),
                                                  [](const UnseenSet& set) { return !set.used; }));
  };
  if (!pool_.empty() && pool_request_ == asked) {
    json reply = pool_reply_;
    if (!unseen_.empty()) reply[rep::kUnseen] = unseen_left();
    return {reply, {}};
  }
  const auto wanted = request.value(req::kPoolSize, std::size_t{16});
  const auto max_bytes = request.value(req::kMaxPoolBytes, std::uint64_t{2} << 30);
  pool_.clear();
  pool_.push_back(make_inputs(seed));
  const std::uint64_t set_bytes = tensor_bytes(pool_.front());
  // At least two sets so consecutive calls never see the same buffers.
  const std::size_t by_memory =
      set_bytes > 0 ? static_cast<std::size_t>(max_bytes / set_bytes) : wanted;
  const std::size_t count = std::max<std::size_t>(2, std::min(wanted, by_memory));
  for (std::size_t i = 1; i < count; ++i) pool_.push_back(make_inputs(seed + i));
  // Sets for one call each (more come with "more_unseen"), as many as half the pool's memory
  // bound allows (one at least): making them is host time before every timing phase.
  unseen_.clear();
  unseen_hidden_ = true;
  // In the low 32 bits: PyTorch's CPU generator keeps only those of a seed.
  unseen_seed_ = seed + (std::uint64_t{1} << 20);
  unseen_limit_ = std::max<std::size_t>(1, set_bytes > 0 ? max_bytes / 2 / set_bytes : 64);
  const json unseen_described = make_unseen(request.value(req::kUnseen, std::size_t{0}));
  timer_->synchronize();
  // As timeit does: a cyclic garbage collection costs tens of microseconds and would land in
  // random samples. Collect once now; objects of a forward call are freed by reference counts.
  py::module_ gc = py::module_::import("gc");
  gc.attr("collect")();
  gc.attr("disable")();
  pool_request_ = std::move(asked);
  pool_reply_ = {{rep::kOk, true},
                 {rep::kPool, pool_.size()},
                 {rep::kSetBytes, set_bytes},
                 {rep::kInputs, describe_inputs(pool_.front(), true)},
                 {rep::kLastInputs, describe_inputs(pool_.back(), true)}};
  if (!unseen_.empty()) {
    pool_reply_[rep::kUnseen] = unseen_.size();
    pool_reply_[rep::kUnseenInputs] = unseen_described;
    pool_reply_[rep::kUnseenHidden] = unseen_hidden_;
  }
  // Streams the samples' calls run on in turn (one: the current stream, as the trials).
  rotation_ = py::list();
  next_stream_ = 0;
  if (streams > 1) {
    std::string why;
    const std::vector<std::uintptr_t> handles = timer_->make_streams(streams, why);
    if (handles.empty()) {
      pool_reply_[rep::kStreamsUnavailable] = why;
    } else {
      rotation_ = harness_["streams"](handles, device_);
    }
  }
  pool_reply_[rep::kStreams] = rotation_.empty() ? 1 : py::len(rotation_);
  // The device memory held now, with the trials' peak (the orchestrator's estimate of what the
  // next evaluation of the task will take).
  pool_reply_[rep::kMemory] = to_json(runtime_.host("memory_use")(device_));
  return {pool_reply_, {}};
}

Session::SampleRequest Session::read_sample_request(const json& request) const {
  SampleRequest asked;
  asked.batch = request.contains(req::kSets);
  // Each input set is a pool index, or {"unseen": j}: the unseen set j, used this once.
  const json listed_sets =
      asked.batch ? request.at(req::kSets) : json::array({request.at(req::kSet)});
  if (!listed_sets.is_array() || listed_sets.empty() || listed_sets.size() > 4096)
    throw std::runtime_error("a batch of samples takes 1 to 4096 input sets");
  for (const json& entry : listed_sets) {
    if (entry.is_object()) {
      const auto j = entry.at(req::kUnseen).get<std::size_t>();
      if (j >= unseen_.size() || unseen_[j].used)
        throw std::runtime_error("unseen input set " + std::to_string(j) +
                                 " does not exist or was used already");
      asked.sets.push_back({j, true});
    } else {
      asked.sets.push_back({entry.get<std::size_t>(), false});
    }
  }
  // Per sample in a batch ("traced": [..]), or one flag for all ("trace").
  asked.traced.assign(asked.sets.size(), request.value(req::kTrace, true));
  if (request.contains(req::kTraced)) {
    asked.traced = request.at(req::kTraced).get<std::vector<bool>>();
    if (asked.traced.size() != asked.sets.size())
      throw std::runtime_error("'traced' must give one flag per input set");
  }
  // The sample whose outputs go back for a spot check: "check" {index, seed, elements} in a
  // batch, "return_outputs" (with check_seed, check_elements) for a single sample.
  if (request.contains(req::kCheck)) {
    const json& check = request.at(req::kCheck);
    asked.check_index = check.at(req::kCheckIndex).get<std::size_t>();
    asked.check_seed = check.value(req::kCheckSeed, std::uint64_t{0});
    asked.check_elements = check.value(req::kCheckElements, std::uint64_t{0});
    if (*asked.check_index >= asked.sets.size())
      throw std::runtime_error("'check' index outside the batch");
  } else if (request.value(req::kReturnOutputs, false)) {
    if (asked.batch)
      throw std::runtime_error("return_outputs is for single samples only (batches: 'check')");
    asked.check_index = 0;
    asked.check_seed = request.value(req::kReturnCheckSeed, std::uint64_t{0});
    asked.check_elements = request.value(req::kReturnCheckElements, std::uint64_t{0});
  }
  return asked;
}

py::list Session::sample_inputs(const SampleRequest::SetRef& set) {
  // A copy of the set at newly allocated addresses: a result cached on pointers, identities or
  // shapes is stale the next time an address comes back.
  py::list inputs;
  timer_->harness([&] {
    inputs = set.unseen ? take_unseen(set.index)
                        : py::list(harness_["fresh"](pool_[set.index % pool_.size()]));
  });
  return inputs;
}

SampleResult Session::timed_sample(const py::list& inputs, TimingMode mode, bool traced,
                                   const py::object& previous_stream, py::object& out) {
  // The next of the rotated streams is current for the call (outside the timed window), the one
  // current before the batch again after it, however the call ends.
  if (previous_stream) harness_["set_stream"](rotation_[next_stream_++ % rotation_.size()]);
  struct PutBack {
    const py::dict& harness;
    const py::object& stream;
    ~PutBack() {
      if (!stream) return;
      try {
        harness["set_stream"](stream);
      } catch (const std::exception&) {
        // Nothing to do about it here; the next call's own failure will say.
      }
    }
  } put_back{harness_, previous_stream};
  return timer_->time_deferred([&] { out = model_(*inputs); }, mode,
                               traced ? WindowTrace::kTraced : WindowTrace::kUntraced);
}

void Session::spot_check(const py::list& flat, std::uint64_t seed, std::uint64_t elements,
                         wire::Message& reply) {
  // The orchestrator compares these with the reference's for the same set: the whole outputs,
  // or the same random sample of every output's elements on both sides, drawn now that the call
  // has returned.
  const auto begin = std::chrono::steady_clock::now();
  json outputs = json::array();
  timer_->harness([&] {
    py::list sampled = harness_["subset"](flat, seed, elements);
    for (py::handle entry : sampled) {
      py::tuple pair = entry.cast<py::tuple>();
      ExportedTensor exported = exporter_->export_tensor(pair[0]);
      json described = exported.describe();
      described[rep::kFullShape] = pair[1].cast<std::vector<int64_t>>();
      outputs.push_back(described);
      append_payload(reply.payload, std::move(exported.bytes));
    }
  });
  reply.header[rep::kOutputs] = outputs;
  reply.header[rep::kOutputsS] = seconds_since(begin);
}

wire::Message Session::sample(const json& request) {
  if (pool_.empty()) throw std::runtime_error("sample requested before prepare_timing");
  const TimingMode mode = request.value(req::kMode, std::string(proto::timing_mode::kWindow)) ==
                                  proto::timing_mode::kQueued
                              ? TimingMode::kQueued
                              : TimingMode::kWindow;
  if (request.contains(req::kHoldTimeoutMs))
    timer_->set_hold_timeout(request[req::kHoldTimeoutMs].get<double>());
  const SampleRequest asked = read_sample_request(request);
  // Each sample as a single one is taken: a fresh copy of its input set, the timed call, its
  // outputs poisoned once looked at. In a batch, the activity trace is read once at the end.
  std::vector<SampleResult> results;
  results.reserve(asked.sets.size());
  wire::Message reply{{{rep::kOk, true}}, {}};
  // Where a batch's time goes, in seconds summed over its samples: the input copies, the timed
  // calls (the host's window: flush, synchronisations, the call), the outputs' handling.
  using Steady = std::chrono::steady_clock;
  double copy_s = 0, timed_s = 0, outputs_s = 0;
  // With streams in turn (prepare_timing's "streams"): the stream to go back to after each call.
  const py::object previous_stream =
      rotation_.empty() ? py::object() : py::object(harness_["current_stream"](device_));
  for (std::size_t i = 0; i < asked.sets.size(); ++i) {
    auto step = Steady::now();
    py::list inputs = sample_inputs(asked.sets[i]);
    copy_s += seconds_since(step);
    step = Steady::now();
    py::object out;  // released after the window: freeing the result is not part of the call
    results.push_back(timed_sample(inputs, mode, asked.traced[i], previous_stream, out));
    timed_s += seconds_since(step);
    step = Steady::now();
    py::list flat = runtime_.host("flatten_outputs")(out);
    if (asked.check_index == i) spot_check(flat, asked.check_seed, asked.check_elements, reply);
    timer_->harness([&] { harness_["poison"](flat); });
    outputs_s += seconds_since(step);
  }
  const auto resolve_start = Steady::now();
  timer_->resolve(results);
  if (asked.batch) {
    json samples = json::array();
    for (const auto& result : results) samples.push_back(describe_sample(result, mode, *timer_));
    reply.header[rep::kSamples] = std::move(samples);
    reply.header[rep::kStepsS] = {{part::kCopy, copy_s},
                                  {part::kTimed, timed_s},
                                  {part::kOutputs, outputs_s},
                                  {part::kTrace, seconds_since(resolve_start)}};
  } else {
    reply.header.update(describe_sample(results.front(), mode, *timer_));
  }
  return reply;
}

wire::Message Session::activity() {
  // The end of a measurement: its trace summarised and forgotten, collection back on.
  json activity = timer_ ? timer_->activity() : json();
  py::module_::import("gc").attr("enable")();
  return {{{rep::kOk, true}, {rep::kActivity, std::move(activity)}}, {}};
}

wire::Message Session::bandwidth(const json& request) {
  (void)request;
  json results = json::object();
  double best_bytes_per_ms = 0;
  py::list calls = runtime_.host("bandwidth_calls")(device_);
  // The same clock as the samples it is compared with: the device time of the queued call.
  const TimingMode mode =
      timer_->queued_unavailable().empty() ? TimingMode::kQueued : TimingMode::kWindow;
  for (py::handle entry : calls) {
    py::tuple item = entry.cast<py::tuple>();
    const auto name = item[0].cast<std::string>();
    const auto bytes = item[1].cast<double>();
    py::object call = item[2];
    double best_ms = 0;
    for (int i = 0; i < 6; ++i) {
      const double ms = timer_->time([&] { call(); }, mode).ms;
      if (i > 0 && (best_ms == 0 || ms < best_ms)) best_ms = ms;  // the first call warms up
    }
    const double gbs = bytes / best_ms / 1e6;
    results[name + rep::kGbsSuffix] = gbs;
    best_bytes_per_ms = std::max(best_bytes_per_ms, bytes / best_ms);
  }
  results[rep::kGbs] = best_bytes_per_ms / 1e6;
  // The matmul throughput per precision, on the same clock: the compute roof of a profile.
  json tflops = json::object();
  calls = py::list();
  for (py::handle entry : py::list(runtime_.host("matmul_calls")(device_))) {
    py::tuple item = entry.cast<py::tuple>();
    const auto flops = item[1].cast<double>();
    py::object call = item[2];
    double best_ms = 0;
    for (int i = 0; i < 4; ++i) {
      const double ms = timer_->time([&] { call(); }, mode).ms;
      if (i > 0 && ms > 0 && (best_ms == 0 || ms < best_ms)) best_ms = ms;
    }
    if (best_ms > 0) tflops[item[0].cast<std::string>()] = flops / best_ms / 1e9;
  }
  results[rep::kMatmulTflops] = std::move(tflops);
  results[rep::kClock] = mode_name(mode);
  timer_->synchronize();
  return {{{rep::kOk, true}, {rep::kBandwidth, results}}, {}};
}

}  // namespace cudal1::worker
