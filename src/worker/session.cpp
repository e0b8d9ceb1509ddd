#include "session.hpp"

#include <dirent.h>
#include <pybind11/stl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "cudal1/common/digest.hpp"

namespace cudal1::worker {
namespace {

using json = nlohmann::json;

// Adds an output's bytes to a reply; the first (often the only) one is moved, not copied.
void append_payload(std::vector<std::byte>& payload, std::vector<std::byte>&& bytes) {
  if (payload.empty()) {
    payload = std::move(bytes);
  } else {
    payload.insert(payload.end(), bytes.begin(), bytes.end());
  }
}

json failure(const std::string& status, const std::string& error, const std::string& trace = {}) {
  return {{"ok", false}, {"status", status}, {"error", error}, {"traceback", trace}};
}

// A failure while importing or constructing user code, classified for the verdict.
struct UserCodeError {
  std::string status;
  std::string error;
  std::string trace;
};

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

}  // namespace

Session::Session(PythonRuntime& runtime, int request_fd, int reply_fd)
    : runtime_(runtime), request_fd_(request_fd), reply_fd_(reply_fd) {}

int Session::run() {
  wire::FrameReader reader;
  for (;;) {
    std::optional<wire::Message> request = wire::read_message_blocking(request_fd_, reader);
    if (!request) return 0;
    const std::string op = request->header.value("op", "");
    if (op == "exit") return 0;
    const auto begin = std::chrono::steady_clock::now();
    wire::Message reply = request->header.contains("hold") ? dispatch_gated(request->header)
                                                           : dispatch(request->header);
    reply.header["op"] = op;
    // The worker's own time for the request: the rest of a round trip is the pipe's and the
    // orchestrator's.
    reply.header["worker_s"] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    wire::write_message(reply_fd_, reply);
    if (fatal_) return 3;
  }
}

wire::Message Session::dispatch_gated(const json& request) {
  const std::string op = request.value("op", "");
  if (!gate_ ||
      (op != "first_call" && op != "trial" && op != "prepare_trials" && op != "prepare_timing")) {
    return {failure("internal_error", "'" + op + "' cannot hold the device from the worker"), {}};
  }
  const json& hold = request.at("hold");
  gate_->open({hold.at("lock").get<std::string>(), hold.at("turnstile").get<std::string>()},
              std::chrono::milliseconds(hold.at("idle_ms").get<int>()));
  wire::Message reply = dispatch(request);
  gate_->close();
  GateHolds holds = gate_->take_holds();
  reply.header["holds"] = std::move(holds.spans);
  reply.header["hold_wait_s"] = holds.wait_s;
  return reply;
}

wire::Message Session::dispatch(const json& request) {
  const std::string op = request.value("op", "");
  // Timing holds the device alone (the orchestrator's hold): the gate is off from here on.
  if (gate_ && (op == "sample" || op == "bandwidth" || op == "more_unseen")) gate_->disable();
  try {
    if (op == "load") return load(request);
    if (op == "load_candidate") return load_candidate();
    if (op == "calibration_model") return calibration_model(request);
    if (op == "trial") return trial(request);
    if (op == "prepare_trials") return prepare_trials(request);
    if (op == "first_call") return first_call(request);
    if (op == "prepare_timing") return prepare_timing(request);
    if (op == "more_unseen") return more_unseen(request);
    if (op == "sample") return sample(request);
    if (op == "bandwidth") return bandwidth(request);
    if (op == "guards") return {{{"ok", true}, {"guards", check_guards()}}, {}};
    if (op == "activity") {
      // The end of a measurement: its trace summarised and forgotten, collection back on.
      json activity = timer_ ? timer_->activity() : json();
      py::module_::import("gc").attr("enable")();
      return {{{"ok", true}, {"activity", std::move(activity)}}, {}};
    }
    return {failure("internal_error", "unknown request '" + op + "'"), {}};
  } catch (const UserCodeError& e) {
    return {failure(e.status, e.error, e.trace), {}};
  } catch (const py::error_already_set& e) {
    auto [message, trace] = describe_python_error(e, runtime_);
    // A CUDA fault surfaces in Python as a RuntimeError; the context is unusable afterwards.
    if (message.find("CUDA error") != std::string::npos ||
        message.find("cudaError") != std::string::npos) {
      fatal_ = true;
    }
    return {failure("runtime_error", message, trace), {}};
  } catch (const DeviceError& e) {
    fatal_ = true;
    return {failure("runtime_error", e.what()), {}};
  } catch (const std::exception& e) {
    return {failure("runtime_error", e.what()), {}};
  }
}

void Session::set_up_device(const std::string& device, const json& request) {
  device_ = device;
  py::module_ torch = py::module_::import("torch");
  if (device == "cpu") {
    timer_ = make_cpu_timer();
  } else {
    const int index = device.size() > 5 ? std::stoi(device.substr(5)) : 0;
    torch.attr("cuda").attr("set_device")(index);
    torch.attr("zeros")(1, py::arg("device") = device);  // creates the primary context
    const double fraction = request.value("memory_fraction", 0.0);
    if (fraction > 0 && fraction < 1) {
      torch.attr("cuda").attr("set_per_process_memory_fraction")(fraction, index);
    }
    timer_ = make_cuda_timer(index, request.value("trace_activity", true));
  }
  SampleTimer* timer = timer_.get();
  DeviceToHostCopy copy;
  DeviceWordSum word_sum;
  if (device != "cpu") {
    copy = [timer](void* dst, std::uint64_t src, std::size_t size) {
      timer->copy_to_host(dst, src, size);
    };
    word_sum = [timer](std::uint64_t src, std::size_t words) {
      return timer->device_word_sum(src, words);
    };
  }
  exporter_.emplace(std::move(copy), std::move(word_sum));
}

wire::Message Session::load(const json& request) {
  role_ = request.at("role").get<std::string>();
  auto load_module = runtime_.host("load_module");
  if (role_ == "build") {
    try {
      runtime_.host("load_candidate")(request.at("candidate").get<std::string>());
    } catch (const py::error_already_set& e) {
      auto [message, trace] = describe_python_error(e, runtime_);
      throw UserCodeError{"compile_error", message, trace};
    }
    return {{{"ok", true}}, {}};
  }
  if (role_ == "reference") {
    // Nothing else of this user may read the reference's memory (and so its outputs).
    prctl(PR_SET_DUMPABLE, 0);
  }
  py::module_ torch = py::module_::import("torch");
  torch.attr("set_grad_enabled")(false);

  try {
    task_ = load_module(request.at("task").get<std::string>(), "cudal1_task");
  } catch (const py::error_already_set& e) {
    auto [message, trace] = describe_python_error(e, runtime_);
    throw UserCodeError{"task_error", "the task failed to import: " + message, trace};
  }
  get_inputs_ = task_.attr("get_inputs");
  init_seed_ = request.at("init_seed").get<std::uint64_t>();
  // Constructor arguments come from the task before any candidate code runs.
  init_args_ = runtime_.host("make_init_args")(task_.attr("get_init_inputs"), init_seed_);
  set_up_device(request.value("device", "cpu"), request);

  // Bound before any candidate code runs: what the candidate may not change, and the functions
  // this worker applies to user tensors.
  runtime_.host("warm_up_threads")(device_);
  harness_ = runtime_.host("capture_harness")();
  guards_ = runtime_.host("capture_guards")(task_);

  if (role_ == "candidate" && request.value("calibrate", false)) {
    // The task's model first, trusted code in a process no candidate code has run in yet: its
    // times here against the reference's worker measure this process's own offset.
    model_ = build_task_model();
    timer_->synchronize();
    deferred_load_ = request;
    json reply = loaded_reply();
    reply["calibrating"] = true;
    reply["gate"] = false;
    return {reply, {}};
  }
  return {load_model(request), {}};
}

wire::Message Session::load_candidate() {
  if (deferred_load_.is_null()) {
    return {failure("internal_error", "load_candidate without a load that deferred it"), {}};
  }
  // What the calibration left: its model, pools and trace.
  model_ = py::none();
  forget_pool();
  prepared_.clear();
  py::module_ gc = py::module_::import("gc");
  gc.attr("collect")();
  gc.attr("enable")();
  if (timer_) timer_->activity();
  runtime_.host("release_cached_memory")(device_);
  json request = std::move(deferred_load_);
  deferred_load_ = json();
  return {load_model(request), {}};
}

wire::Message Session::calibration_model(const json& request) {
  if (role_ != "reference" || model_.is_none() || !model_) {
    return {failure("internal_error", "calibration_model needs a loaded reference worker"), {}};
  }
  const bool use = request.at("use").get<bool>();
  if (use == static_cast<bool>(set_aside_model_)) return {{{"ok", true}}, {}};  // already so
  // Either way the pool built for the other model goes: the next prepare_timing makes its own.
  forget_pool();
  if (use) {
    py::object copy = build_task_model();  // the reference's own model stays if this throws
    set_aside_model_ = model_;
    model_ = copy;
  } else {
    model_ = set_aside_model_;
    set_aside_model_ = py::object();
    py::module_::import("gc").attr("collect")();
    runtime_.host("release_cached_memory")(device_);
  }
  timer_->synchronize();
  return {{{"ok", true}}, {}};
}

py::object Session::build_task_model() const {
  try {
    return runtime_.host("build_model")(task_.attr("Model"), init_args_, init_seed_, device_);
  } catch (const py::error_already_set& e) {
    auto [message, trace] = describe_python_error(e, runtime_);
    throw UserCodeError{"task_error", "constructing the model failed: " + message, trace};
  }
}

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
  json described = make_unseen(request.at("count").get<std::size_t>());
  timer_->synchronize();
  return {{{"ok", true},
           {"first", first},
           {"unseen_inputs", std::move(described)},
           {"unseen_hidden", unseen_hidden_}},
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

json Session::load_model(const json& request) {
  py::object model_class = task_.attr("Model");
  json rebuilt_extensions = json::array();  // libraries the candidate's import built
  if (role_ == "candidate") {
    py::object candidate;
    try {
      py::tuple loaded =
          runtime_.host("load_candidate")(request.at("candidate").get<std::string>());
      candidate = loaded[0];
      rebuilt_extensions = to_json(loaded[1]);
    } catch (const py::error_already_set& e) {
      auto [message, trace] = describe_python_error(e, runtime_);
      throw UserCodeError{"compile_error", message, trace};
    }
    if (!py::hasattr(candidate, "ModelNew")) {
      throw UserCodeError{"compile_error", "the candidate defines no ModelNew", ""};
    }
    model_class = candidate.attr("ModelNew");
  }
  try {
    model_ = runtime_.host("build_model")(model_class, init_args_, init_seed_, device_);
  } catch (const py::error_already_set& e) {
    auto [message, trace] = describe_python_error(e, runtime_);
    throw UserCodeError{role_ == "candidate" ? "runtime_error" : "task_error",
                        "constructing the model failed: " + message, trace};
  }
  timer_->synchronize();
  // After the candidate's import: a CUPTI subscriber it set up itself leaves the gate out.
  std::string gate_why = "not on a CUDA device";
  // The orchestrator forwards CUDAL1_DEVICE_GATE=0 (no CUDAL1_* variable reaches a worker).
  if (!request.value("device_gate", true)) {
    gate_why = "CUDAL1_DEVICE_GATE=0";
  } else if (device_ != "cpu") {
    gate_ = make_device_gate(gate_why);
  }
  json reply = loaded_reply();
  reply["gate"] = gate_ != nullptr;
  reply["rebuilt_extensions"] = rebuilt_extensions;
  if (role_ == "candidate") {
    // The kernels of the libraries it built and loaded (their launch stubs' symbols): names put
    // together by macros or at run time, which no reading of its text finds.
    try {
      reply["built_kernels"] = to_json(runtime_.host("built_kernel_names")());
    } catch (const py::error_already_set& e) {
      auto [message, trace] = describe_python_error(e, runtime_);
      reply["built_kernels"] = json::array();
      reply["built_kernels_error"] = message;
    }
  }
  if (!gate_) reply["gate_unavailable"] = gate_why;
  return reply;
}

json Session::loaded_reply() const {
  return {{"ok", true},
          {"device", to_json(runtime_.host("device_info")(device_))},
          {"timer", timer_->describe()},
          {"memory", to_json(runtime_.host("memory_use")(device_))},
          {"guards", check_guards()}};
}

json Session::check_guards() const {
  if (!guards_) return json::object();
  return to_json(guards_());
}

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
      described.push_back({{"kind", "value"}, {"repr", py::repr(value).cast<std::string>()}});
      continue;
    }
    if (!with_digest) {
      py::object shape = value.attr("shape");
      described.push_back({{"kind", "tensor"},
                           {"dtype", py::str(value.attr("dtype")).cast<std::string>()},
                           {"shape", py::tuple(shape).cast<std::vector<int64_t>>()}});
      continue;
    }
    const auto [tensor, digest] = exporter_->digest_tensor(value);
    json entry = tensor.describe();
    entry["kind"] = "tensor";
    entry["digest"] = digest;
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
  py::list inputs = inputs_for(request.at("seed").get<std::uint64_t>(), &inputs_before);
  lap("inputs");
  const std::set<long> threads_before = thread_ids();
  const auto begin = std::chrono::steady_clock::now();
  py::object result = model_(*inputs);
  timer_->synchronize();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
  const std::set<long> threads_after = thread_ids();
  part_start = std::chrono::steady_clock::now();

  wire::Message reply{{{"ok", true}, {"ms", ms}, {"inputs", inputs_before}}, {}};
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
  lap("output_export");
  reply.header["inputs_after"] = describe_inputs(inputs, true);
  lap("input_digests_after");

  // Work that goes on after the call returned: threads of the process other than this one that
  // keep using the CPU while nothing is being called, threads the call started that are still
  // alive, and outputs that change after they were read.
  const long self = static_cast<long>(::gettid());
  const auto settle = std::chrono::milliseconds(request.value("settle_ms", 60));
  long busy_ticks = 0;
  json busy_threads = json::array();
  {
    // Without the interpreter lock, so that Python threads the candidate left behind can run.
    py::gil_scoped_release unlocked;
    const auto ticks_before = thread_cpu_ticks();
    std::this_thread::sleep_for(settle);
    for (const auto& [id, ticks] : thread_cpu_ticks()) {
      if (id == self || (gate_ && id == gate_->thread_id())) continue;
      const auto before = ticks_before.find(id);
      const long used = ticks - (before == ticks_before.end() ? 0 : before->second);
      busy_ticks += used;
      // Which threads: a flag raised here names them.
      if (used > 0) busy_threads.push_back({{"name", thread_name(id)}, {"ticks", used}});
    }
    // Give threads the call started time to finish what they are doing before looking again.
    for (int waited = 0; waited < 25; ++waited) {
      bool started_alive = false;
      for (long id : thread_ids()) {
        if (threads_after.count(id) && !threads_before.count(id)) started_alive = true;
      }
      if (!started_alive) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  timer_->synchronize();
  lap("settle");
  reply.header["busy_ticks_after_return"] = busy_ticks;
  if (!busy_threads.empty()) reply.header["busy_threads"] = std::move(busy_threads);
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
    described["changed_after_return"] = again != digests[i];
    described["dense"] = range.dense;
    described["aliases_input"] = overlaps_any(input_ranges);
    described["aliases_parameter"] = overlaps_any(model_ranges);
    described["aliases_previous_output"] = overlaps_any(previous_ranges);
    if (!described["aliases_input"].get<bool>() && !described["aliases_parameter"].get<bool>())
      poisonable.append(tensor);
  }
  reply.header["outputs"] = outputs;
  // Threads started by the call and still alive once it returned (from the second trial on:
  // PyTorch starts its own thread pools lazily, during the first call).
  std::vector<long> new_threads;
  for (long id : thread_ids()) {
    if (threads_after.count(id) && !threads_before.count(id)) new_threads.push_back(id);
  }
  reply.header["new_threads"] = trials_done_ > 0 ? new_threads.size() : 0;
  reply.header["guards"] = check_guards();
  // Memory a later call gets back from the allocator must not still hold this call's answer.
  harness_["poison"](poisonable);
  timer_->synchronize();
  lap("checks");
  reply.header["parts_ms"] = parts_ms;
  previous_outputs_ = flat;
  ++trials_done_;
  return reply;
}

wire::Message Session::first_call(const json& request) {
  // The first call, on inputs of its own, its result dropped: lazy initialisation, autotuning
  // and compilation inside forward happen here, not in a trial.
  const auto start = std::chrono::steady_clock::now();
  py::object result;
  {
    py::list inputs = inputs_for(request.at("seed").get<std::uint64_t>(), nullptr);
    result = model_(*inputs);
    timer_->synchronize();
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  json reply = {{"ok", true}, {"ms", ms}};
  // Its outputs' digests (the trials' digests, no copy): a trial that returns exactly this
  // answer for other inputs gives back a result kept from the first call (a cache keyed on an
  // address the allocator handed out again).
  try {
    json digests = json::array();
    for (py::handle tensor : py::list(runtime_.host("flatten_outputs")(result)))
      digests.push_back(exporter_->digest_tensor(tensor, /*with_bytes=*/false).second);
    reply["output_digests"] = std::move(digests);
  } catch (const std::exception&) {
    // Outputs the trials cannot read either: they say why, with the trial's inputs.
  }
  result = py::none();
  // Then `calls` more on the same inputs, each synchronized: how long a warm call takes, roughly
  // (host clock, device shared).
  const auto calls = request.value("calls", std::size_t{0});
  if (calls > 0) {
    std::vector<double> times;
    py::list inputs = make_inputs(request.at("seed").get<std::uint64_t>() + 1);
    for (std::size_t i = 0; i < calls; ++i) {
      const auto begin = std::chrono::steady_clock::now();
      py::object result = model_(*inputs);
      timer_->synchronize();
      times.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin)
              .count());
    }
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    reply["call_ms"] = times[times.size() / 2];
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
  for (const auto& seed_json : request.at("seeds")) {
    const auto seed = seed_json.get<std::uint64_t>();
    // On the host: the device is not held yet (a task whose get_inputs() makes device tensors
    // itself still gets them there).
    py::list inputs = runtime_.host("make_inputs")(get_inputs_, seed, "cpu");
    prepared_[seed] = {inputs, describe_inputs(inputs, true)};
  }
  return {{{"ok", true}}, {}};
}

wire::Message Session::prepare_timing(const json& request) {
  const auto seed = request.at("seed").get<std::uint64_t>();
  const auto streams = request.value("streams", std::size_t{1});
  if (streams < 1 || streams > 64) throw std::runtime_error("'streams' takes 1 to 64");
  // Made before the timing phase already (the orchestrator asks again inside it).
  json asked = request;
  asked.erase("hold");
  // Unseen sets are used once each: a repeated request says how many are left.
  const auto unseen_left = [this] {
    return static_cast<std::size_t>(std::count_if(unseen_.begin(), unseen_.end(),
                                                  [](const UnseenSet& set) { return !set.used; }));
  };
  if (!pool_.empty() && pool_request_ == asked) {
    json reply = pool_reply_;
    if (!unseen_.empty()) reply["unseen"] = unseen_left();
    return {reply, {}};
  }
  const auto wanted = request.value("pool_size", std::size_t{16});
  const auto max_bytes = request.value("max_pool_bytes", std::uint64_t{2} << 30);
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
  const json unseen_described = make_unseen(request.value("unseen", std::size_t{0}));
  timer_->synchronize();
  // As timeit does: a cyclic garbage collection costs tens of microseconds and would land in
  // random samples. Collect once now; objects of a forward call are freed by reference counts.
  py::module_ gc = py::module_::import("gc");
  gc.attr("collect")();
  gc.attr("disable")();
  pool_request_ = std::move(asked);
  pool_reply_ = {{"ok", true},
                 {"pool", pool_.size()},
                 {"set_bytes", set_bytes},
                 {"inputs", describe_inputs(pool_.front(), true)},
                 {"last_inputs", describe_inputs(pool_.back(), true)}};
  if (!unseen_.empty()) {
    pool_reply_["unseen"] = unseen_.size();
    pool_reply_["unseen_inputs"] = unseen_described;
    pool_reply_["unseen_hidden"] = unseen_hidden_;
  }
  // Streams the samples' calls run on in turn (one: the current stream, as the trials).
  rotation_ = py::list();
  next_stream_ = 0;
  if (streams > 1) {
    std::string why;
    const std::vector<std::uintptr_t> handles = timer_->make_streams(streams, why);
    if (handles.empty()) {
      pool_reply_["streams_unavailable"] = why;
    } else {
      rotation_ = harness_["streams"](handles, device_);
    }
  }
  pool_reply_["streams"] = rotation_.empty() ? 1 : py::len(rotation_);
  return {pool_reply_, {}};
}

namespace {

json describe_sample(const SampleResult& result, TimingMode asked, const SampleTimer& timer) {
  json out = {{"ms", result.ms},
              {"host_ms", result.host_ms},
              {"mode", result.mode == TimingMode::kQueued ? "queued" : "window"},
              {"held", result.held}};
  if (result.kernel_ms) {
    out["kernel_ms"] = *result.kernel_ms;
    out["kernels"] = result.kernels;
  }
  if (asked == TimingMode::kQueued && result.mode != TimingMode::kQueued)
    out["queued_unavailable"] = timer.queued_unavailable();
  return out;
}

}  // namespace

wire::Message Session::sample(const json& request) {
  if (pool_.empty()) throw std::runtime_error("sample requested before prepare_timing");
  const TimingMode mode = request.value("mode", std::string("window")) == "queued"
                              ? TimingMode::kQueued
                              : TimingMode::kWindow;
  if (request.contains("hold_timeout_ms"))
    timer_->set_hold_timeout(request["hold_timeout_ms"].get<double>());
  const bool batch = request.contains("sets");
  // Each input set is a pool index, or {"unseen": j}: the unseen set j, used this once.
  struct SetRef {
    std::size_t index = 0;
    bool unseen = false;
  };
  std::vector<SetRef> sets;
  const json listed_sets = batch ? request.at("sets") : json::array({request.at("set")});
  if (!listed_sets.is_array() || listed_sets.empty() || listed_sets.size() > 4096)
    throw std::runtime_error("a batch of samples takes 1 to 4096 input sets");
  for (const json& entry : listed_sets) {
    if (entry.is_object()) {
      const auto j = entry.at("unseen").get<std::size_t>();
      if (j >= unseen_.size() || unseen_[j].used)
        throw std::runtime_error("unseen input set " + std::to_string(j) +
                                 " does not exist or was used already");
      sets.push_back({j, true});
    } else {
      sets.push_back({entry.get<std::size_t>(), false});
    }
  }
  // Per sample in a batch ("traced": [..]), or one flag for all ("trace").
  std::vector<bool> traced(sets.size(), request.value("trace", true));
  if (request.contains("traced")) {
    traced = request.at("traced").get<std::vector<bool>>();
    if (traced.size() != sets.size())
      throw std::runtime_error("'traced' must give one flag per input set");
  }
  // The sample whose outputs go back for a spot check: "check" {index, seed, elements} in a
  // batch, "return_outputs" (with check_seed, check_elements) for a single sample.
  std::optional<std::size_t> check_index;
  std::uint64_t check_seed = 0, check_elements = 0;
  if (request.contains("check")) {
    const json& check = request.at("check");
    check_index = check.at("index").get<std::size_t>();
    check_seed = check.value("seed", std::uint64_t{0});
    check_elements = check.value("elements", std::uint64_t{0});
    if (*check_index >= sets.size()) throw std::runtime_error("'check' index outside the batch");
  } else if (request.value("return_outputs", false)) {
    if (batch)
      throw std::runtime_error("return_outputs is for single samples only (batches: 'check')");
    check_index = 0;
    check_seed = request.value("check_seed", std::uint64_t{0});
    check_elements = request.value("check_elements", std::uint64_t{0});
  }
  // Each sample as a single one is taken: a fresh copy of its input set, the timed call, its
  // outputs poisoned once looked at. In a batch, the activity trace is read once at the end.
  std::vector<SampleResult> results;
  results.reserve(sets.size());
  wire::Message reply{{{"ok", true}}, {}};
  // Where a batch's time goes, in seconds summed over its samples: the input copies, the timed
  // calls (the host's window: flush, synchronisations, the call), the outputs' handling.
  using Steady = std::chrono::steady_clock;
  const auto since = [](Steady::time_point t) {
    return std::chrono::duration<double>(Steady::now() - t).count();
  };
  double copy_s = 0, timed_s = 0, outputs_s = 0;
  // With streams in turn (prepare_timing's "streams"): the stream to go back to after each call.
  const py::object previous_stream =
      rotation_.empty() ? py::object() : py::object(harness_["current_stream"](device_));
  for (std::size_t i = 0; i < sets.size(); ++i) {
    // A copy of the set at newly allocated addresses: a result cached on pointers, identities
    // or shapes is stale the next time an address comes back.
    auto step = Steady::now();
    py::list inputs;
    timer_->harness([&] {
      inputs = sets[i].unseen ? take_unseen(sets[i].index)
                              : py::list(harness_["fresh"](pool_[sets[i].index % pool_.size()]));
    });
    copy_s += since(step);
    step = Steady::now();
    py::object out;  // released after the window: freeing the result is not part of the call
    {
      // The next of the rotated streams is current for the call (outside the timed window), the
      // one current before the batch again after it, however the call ends.
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
      results.push_back(
          timer_->time_deferred([&] { out = model_(*inputs); }, mode,
                                traced[i] ? WindowTrace::kTraced : WindowTrace::kUntraced));
    }
    timed_s += since(step);
    step = Steady::now();
    py::list flat = runtime_.host("flatten_outputs")(out);
    if (check_index == i) {
      // A spot check: the orchestrator compares these with the reference's for the same set.
      // The whole outputs, or the same random sample of every output's elements on both sides,
      // drawn now that the call has returned.
      const auto begin = std::chrono::steady_clock::now();
      json outputs = json::array();
      timer_->harness([&] {
        py::list sampled = harness_["subset"](flat, check_seed, check_elements);
        for (py::handle entry : sampled) {
          py::tuple pair = entry.cast<py::tuple>();
          ExportedTensor exported = exporter_->export_tensor(pair[0]);
          json described = exported.describe();
          described["full_shape"] = pair[1].cast<std::vector<int64_t>>();
          outputs.push_back(described);
          append_payload(reply.payload, std::move(exported.bytes));
        }
      });
      reply.header["outputs"] = outputs;
      reply.header["outputs_s"] =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    }
    timer_->harness([&] { harness_["poison"](flat); });
    outputs_s += since(step);
  }
  const auto resolve_start = Steady::now();
  timer_->resolve(results);
  if (batch) {
    json samples = json::array();
    for (const auto& result : results) samples.push_back(describe_sample(result, mode, *timer_));
    reply.header["samples"] = std::move(samples);
    reply.header["steps_s"] = {{"copy", copy_s},
                               {"timed", timed_s},
                               {"outputs", outputs_s},
                               {"trace", since(resolve_start)}};
  } else {
    reply.header.update(describe_sample(results.front(), mode, *timer_));
  }
  return reply;
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
    results[name + "_gbs"] = gbs;
    best_bytes_per_ms = std::max(best_bytes_per_ms, bytes / best_ms);
  }
  results["gbs"] = best_bytes_per_ms / 1e6;
  results["clock"] = mode == TimingMode::kQueued ? "queued" : "window";
  timer_->synchronize();
  return {{{"ok", true}, {"bandwidth", results}}, {}};
}

}  // namespace cudal1::worker
