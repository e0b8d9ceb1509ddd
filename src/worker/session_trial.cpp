// Correctness: input sets made ahead, the first call, and the trials with what they check after
// the call returned (work still going on, aliased and reused memory, the guards).
#include <dirent.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "session.hpp"
#include "session_common.hpp"

namespace cudal1::worker {
namespace {

using json = nlohmann::json;
namespace req = proto::request;
namespace rep = proto::reply;
namespace part = proto::part;
namespace input = proto::input;
namespace tensor_key = proto::tensor;

// Thread ids of this process: a thread a candidate leaves running after its call returned is work
// outside the measured window.
std::set<long> thread_ids() {
  std::set<long> ids;
  if (DIR* dir = ::opendir("/proc/self/task")) {
    while (const dirent* entry = ::readdir(dir)) {
      if (entry->d_name[0] != '.') ids.insert(std::strtol(entry->d_name, nullptr, 10));
    }
    ::closedir(dir);
  }
  return ids;
}

// CPU time (clock ticks) each thread of this process has used so far.
std::map<long, long> thread_cpu_ticks() {
  std::map<long, long> ticks;
  for (long id : thread_ids()) {
    std::ifstream in("/proc/self/task/" + std::to_string(id) + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    const auto close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(text.substr(close + 2));
    std::string field;
    long utime = 0, stime = 0;
    for (int i = 1; i <= 13 && (fields >> field); ++i) {
      if (i == 12) utime = std::strtol(field.c_str(), nullptr, 10);
      if (i == 13) stime = std::strtol(field.c_str(), nullptr, 10);
    }
    ticks[id] = utime + stime;
  }
  return ticks;
}

// A thread's name as the kernel keeps it (Python's threading names, "cuda-EvtHandlr", ...).
std::string thread_name(long id) {
  std::ifstream in("/proc/self/task/" + std::to_string(id) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

// What goes on after a call returned, seen over a settle window.
struct AfterReturn {
  long busy_ticks = 0;                // CPU time of threads other than this one and the gate's
  json busy_threads = json::array();  // which ones: [{name, ticks}]
};

// Threads of the process other than this one that keep using the CPU while nothing is being
// called over `settle`; then a while for threads the call started (in `threads_after`, not in
// `threads_before`) to finish what they are doing before they are looked at again.
AfterReturn watch_after_return(std::chrono::milliseconds settle, const DeviceGate* gate,
                               const std::set<long>& threads_before,
                               const std::set<long>& threads_after) {
  const long self = static_cast<long>(::gettid());
  AfterReturn seen;
  // Without the interpreter lock, so that Python threads the candidate left behind can run.
  py::gil_scoped_release unlocked;
  const auto ticks_before = thread_cpu_ticks();
  std::this_thread::sleep_for(settle);
  for (const auto& [id, ticks] : thread_cpu_ticks()) {
    if (id == self || (gate && id == gate->thread_id())) continue;
    const auto before = ticks_before.find(id);
    const long used = ticks - (before == ticks_before.end() ? 0 : before->second);
    seen.busy_ticks += used;
    // Which threads: a flag raised here names them.
    if (used > 0) {
      seen.busy_threads.push_back({{rep::kThreadName, thread_name(id)}, {rep::kThreadTicks, used}});
    }
  }
  for (int waited = 0; waited < 25; ++waited) {
    bool started_alive = false;
    for (long id : thread_ids()) {
      if (threads_after.count(id) && !threads_before.count(id)) started_alive = true;
    }
    if (!started_alive) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return seen;
}

}  // namespace

Session::Range Session::range_of(py::handle tensor) const {
  py::tuple r = harness_["memory_range"](tensor);
  return {r[0].cast<std::string>(), r[1].cast<std::uint64_t>(), r[2].cast<std::uint64_t>(),
          r[3].cast<bool>()};
}

std::vector<Session::Range> Session::ranges_of(py::handle values) const {
  std::vector<Range> out;
  for (py::handle value : values) {
    if (exporter_->is_tensor(value)) out.push_back(range_of(value));
  }
  return out;
}

py::list Session::make_inputs(std::uint64_t seed) const {
  return runtime_.host("make_inputs")(get_inputs_, seed, device_);
}

std::uint64_t Session::tensor_bytes(const py::list& values) const {
  std::uint64_t bytes = 0;
  for (py::handle value : values) {
    if (exporter_->is_tensor(value)) {
      bytes += value.attr("numel")().cast<std::uint64_t>() *
               value.attr("element_size")().cast<std::uint64_t>();
    }
  }
  return bytes;
}

json Session::describe_inputs(const py::list& inputs, bool with_digest) const {
  json described = json::array();
  for (py::handle value : inputs) {
    if (!exporter_->is_tensor(value)) {
      described.push_back(
          {{input::kKind, input::kValue}, {input::kRepr, py::repr(value).cast<std::string>()}});
      continue;
    }
    if (!with_digest) {
      py::object shape = value.attr("shape");
      described.push_back({{input::kKind, input::kTensor},
                           {tensor_key::kDtype, py::str(value.attr("dtype")).cast<std::string>()},
                           {tensor_key::kShape, py::tuple(shape).cast<std::vector<int64_t>>()}});
      continue;
    }
    const auto [tensor, digest] = exporter_->digest_tensor(value);
    json entry = tensor.describe();
    entry[input::kKind] = input::kTensor;
    entry[input::kDigest] = digest;
    described.push_back(entry);
  }
  return described;
}

wire::Message Session::trial(const json& request) {
  // Where a trial's time goes (milliseconds), for the verdict's record of the correctness phase.
  json parts_ms = json::object();
  auto part_start = std::chrono::steady_clock::now();
  auto lap = [&](const char* name) {
    const auto now = std::chrono::steady_clock::now();
    parts_ms[name] = std::chrono::duration<double, std::milli>(now - part_start).count();
    part_start = now;
  };
  json inputs_before;
  py::list inputs = inputs_for(request.at(req::kSeed).get<std::uint64_t>(), &inputs_before);
  lap(part::kInputs);
  const std::set<long> threads_before = thread_ids();
  const auto begin = std::chrono::steady_clock::now();
  py::object result = model_(*inputs);
  timer_->synchronize();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
  const std::set<long> threads_after = thread_ids();
  part_start = std::chrono::steady_clock::now();

  wire::Message reply{{{rep::kOk, true}, {rep::kMs, ms}, {rep::kInputs, inputs_before}}, {}};
  json outputs = json::array();
  py::list flat = runtime_.host("flatten_outputs")(result);
  std::vector<std::uint64_t> digests;
  for (py::handle tensor : flat) {
    // Digested the way it is digested again after the settle window (on the device where it
    // can be), and copied out for the comparison.
    auto [exported, digest] = exporter_->digest_tensor(tensor, /*with_bytes=*/true);
    digests.push_back(digest);
    outputs.push_back(exported.describe());
    append_payload(reply.payload, std::move(exported.bytes));
  }
  lap(part::kOutputExport);
  reply.header[rep::kInputsAfter] = describe_inputs(inputs, true);
  lap(part::kInputDigestsAfter);

  // Work that goes on after the call returned: threads of the process other than this one that
  // keep using the CPU while nothing is being called, threads the call started that are still
  // alive, and outputs that change after they were read.
  const auto settle = std::chrono::milliseconds(request.value(req::kSettleMs, 60));
  AfterReturn after = watch_after_return(settle, gate_.get(), threads_before, threads_after);
  timer_->synchronize();
  lap(part::kSettle);
  reply.header[rep::kBusyTicksAfterReturn] = after.busy_ticks;
  if (!after.busy_threads.empty()) reply.header[rep::kBusyThreads] = std::move(after.busy_threads);
  const py::list poisonable = inspect_outputs(flat, digests, inputs, outputs);
  reply.header[rep::kOutputs] = outputs;
  // Threads started by the call and still alive once it returned (from the second trial on:
  // PyTorch starts its own thread pools lazily, during the first call).
  std::vector<long> new_threads;
  for (long id : thread_ids()) {
    if (threads_after.count(id) && !threads_before.count(id)) new_threads.push_back(id);
  }
  reply.header[rep::kNewThreads] = trials_done_ > 0 ? new_threads.size() : 0;
  reply.header[rep::kGuards] = check_guards();
  // Memory a later call gets back from the allocator must not still hold this call's answer.
  harness_["poison"](poisonable);
  timer_->synchronize();
  lap(part::kChecks);
  reply.header[rep::kPartsMs] = parts_ms;
  previous_outputs_ = flat;
  ++trials_done_;
  return reply;
}

py::list Session::inspect_outputs(const py::list& flat, const std::vector<std::uint64_t>& digests,
                                  const py::list& inputs, json& outputs) const {
  const std::vector<Range> input_ranges = ranges_of(inputs);
  const std::vector<Range> model_ranges = ranges_of(harness_["model_tensors"](model_));
  const std::vector<Range> previous_ranges = ranges_of(previous_outputs_);
  py::list poisonable;
  for (std::size_t i = 0; i < static_cast<std::size_t>(py::len(flat)); ++i) {
    py::handle tensor = flat[i];
    const std::uint64_t again = exporter_->digest_tensor(tensor).second;
    const Range range = range_of(tensor);
    auto overlaps_any = [&](const std::vector<Range>& ranges) {
      return std::any_of(ranges.begin(), ranges.end(),
                         [&](const Range& r) { return range.overlaps(r); });
    };
    json& described = outputs[i];
    described[rep::kChangedAfterReturn] = again != digests[i];
    described[rep::kDense] = range.dense;
    described[rep::kAliasesInput] = overlaps_any(input_ranges);
    described[rep::kAliasesParameter] = overlaps_any(model_ranges);
    described[rep::kAliasesPreviousOutput] = overlaps_any(previous_ranges);
    if (!described[rep::kAliasesInput].get<bool>() &&
        !described[rep::kAliasesParameter].get<bool>())
      poisonable.append(tensor);
  }
  return poisonable;
}

wire::Message Session::first_call(const json& request) {
  // The first call, on inputs of its own, its result dropped: lazy initialisation, autotuning
  // and compilation inside forward happen here, not in a trial.
  const auto start = std::chrono::steady_clock::now();
  py::object result;
  json flops;  // the reference's arithmetic, counted in this untimed call
  {
    py::list inputs = inputs_for(request.at(req::kSeed).get<std::uint64_t>(), nullptr);
    if (role_ == proto::role::kReference) {
      py::tuple counted = runtime_.host("counted_call")(model_, inputs);
      result = counted[0];
      if (!counted[1].is_none()) flops = counted[1].cast<std::map<std::string, double>>();
    } else {
      result = model_(*inputs);
    }
    timer_->synchronize();
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  json reply = {{rep::kOk, true}, {rep::kMs, ms}};
  if (!flops.is_null()) reply[rep::kFlops] = std::move(flops);
  // Its outputs' digests (the trials' digests, no copy): a trial that returns exactly this
  // answer for other inputs gives back a result kept from the first call (a cache keyed on an
  // address the allocator handed out again).
  try {
    json digests = json::array();
    for (py::handle tensor : py::list(runtime_.host("flatten_outputs")(result)))
      digests.push_back(exporter_->digest_tensor(tensor, /*with_bytes=*/false).second);
    reply[rep::kOutputDigests] = std::move(digests);
  } catch (const std::exception&) {
    // Outputs the trials cannot read either: they say why, with the trial's inputs.
  }
  result = py::none();
  // Then `calls` more on the same inputs, each synchronized: how long a warm call takes, roughly
  // (host clock, device shared).
  const auto calls = request.value(req::kCalls, std::size_t{0});
  if (calls > 0) {
    std::vector<double> times;
    py::list inputs = make_inputs(request.at(req::kSeed).get<std::uint64_t>() + 1);
    for (std::size_t i = 0; i < calls; ++i) {
      const auto begin = std::chrono::steady_clock::now();
      py::object result = model_(*inputs);
      timer_->synchronize();
      times.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin)
              .count());
    }
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    reply[rep::kCallMs] = times[times.size() / 2];
  }
  return {reply, {}};
}

py::list Session::inputs_for(std::uint64_t seed, json* described) {
  auto found = prepared_.find(seed);
  if (found == prepared_.end()) {
    py::list inputs = make_inputs(seed);
    if (described) *described = describe_inputs(inputs, true);
    return inputs;
  }
  py::list inputs = runtime_.host("to_device")(found->second.inputs, device_);
  if (described) *described = std::move(found->second.described);
  prepared_.erase(found);
  return inputs;
}

wire::Message Session::prepare_trials(const json& request) {
  // Generating and digesting inputs is host work: done before the device is held.
  for (const auto& seed_json : request.at(req::kSeeds)) {
    const auto seed = seed_json.get<std::uint64_t>();
    // On the host: the device is not held yet (a task whose get_inputs() makes device tensors
    // itself still gets them there).
    py::list inputs = runtime_.host("make_inputs")(get_inputs_, seed, "cpu");
    prepared_[seed] = {inputs, describe_inputs(inputs, true)};
  }
  return {{{rep::kOk, true}}, {}};
}

}  // namespace cudal1::worker
