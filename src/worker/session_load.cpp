// Loading: the task, the device and its timer, the harness and guards bound before user code,
// the model of the worker's role, and the calibration's models.
#include <pybind11/stl.h>
#include <sys/prctl.h>

#include "cudal1/common/cpu_priority.hpp"
#include "session.hpp"
#include "session_common.hpp"

namespace cudal1::worker {
namespace {

using json = nlohmann::json;
namespace req = proto::request;
namespace rep = proto::reply;
namespace role = proto::role;

// N of "cuda:N" (0 for "cuda" and "cpu").
int device_index(const std::string& device) {
  return device.size() > 5 ? std::stoi(device.substr(5)) : 0;
}

// Makes `device`'s primary context ("cuda:N") in this process, and makes it current.
void make_context(const std::string& device) {
  py::module_ torch = py::module_::import("torch");
  torch.attr("cuda").attr("set_device")(device_index(device));
  torch.attr("zeros")(1, py::arg("device") = device);
}

}  // namespace

void Session::set_up_device(const std::string& device, const json& request) {
  const int index = device_index(device);
  if (device == "cpu") {
    timer_ = make_cpu_timer();
  } else {
    if (!device_prepared_ || device != device_) {
      make_context(device);
      end_load_part("context");
    }
    // Made here even for a ready worker: CUPTI's activity timestamps drift from the host's marks
    // the longer it has run, so the timer starts with the load, as every worker's does.
    timer_ = make_cuda_timer(index, request.value(req::kTraceActivity, true));
  }
  device_ = device;
  const double fraction = request.value(req::kMemoryFraction, 0.0);
  if (device != "cpu" && fraction > 0 && fraction < 1) {
    py::module_::import("torch").attr("cuda").attr("set_per_process_memory_fraction")(fraction,
                                                                                      index);
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

wire::Message Session::prepare_device(const json& request) {
  if (device_prepared_ || !role_.empty()) {
    return {failure(proto::status::kInternalError, "prepare_device after the device was set up"),
            {}};
  }
  start_load_parts();
  const std::string device = request.value(req::kDevice, "cpu");
  if (device != "cpu") make_context(device);
  end_load_part("context");
  device_ = device;
  device_prepared_ = true;
  return {{{rep::kOk, true}, {rep::kLoadParts, load_parts_}}, {}};
}

wire::Message Session::load(const json& request) {
  role_ = request.at(req::kRole).get<std::string>();
  auto load_module = runtime_.host("load_module");
  if (role_ == role::kBuild) {
    // The priority its start gave it (lower_cpu_priority), as the kernel has it.
    const std::optional<int> group_nice = autogroup_nice();
    const std::string candidate_path = request.at(req::kCandidate).get<std::string>();
    py::object candidate;
    try {
      if (request.contains(req::kBuildForGpu))
        runtime_.host("answer_as_gpu")(request[req::kBuildForGpu].get<std::string>());
      candidate = py::tuple(runtime_.host("load_candidate")(candidate_path))[0];
    } catch (const py::error_already_set& e) {
      auto [message, trace] = describe_python_error(e, runtime_);
      // Built for a GPU this host lacks, the import may fail where it would not there (a tensor
      // made on the device): the evaluating host's own load decides, and its failed builds are
      // recorded for it to raise again at once.
      if (request.contains(req::kBuildForGpu)) {
        return {json{{rep::kOk, true},
                     {rep::kConstruction,
                      {{"built", json::array()},
                       {"failed", json::array()},
                       {"error", "importing it without the GPU: " + message.substr(0, 2000)}}}},
                {}};
      }
      throw UserCodeError{proto::status::kCompileError, message, trace};
    }
    json reply = {{rep::kOk, true}};
    if (group_nice) reply[rep::kAutogroupNice] = *group_nice;
    if (request.contains(req::kTask)) {
      // The builds of the model's constructor, made here once instead of in every worker.
      // Errors of the candidate's own code are reported in the result, not raised.
      try {
        const json construction = to_json(runtime_.host("construct_for_builds")(
            candidate, candidate_path, request.at(req::kTask).get<std::string>(),
            request.value(req::kInitSeed, std::uint64_t{0})));
        if (!construction.is_null()) reply[rep::kConstruction] = construction;
      } catch (const py::error_already_set& e) {
        reply[rep::kConstruction] = {{"error", describe_python_error(e, runtime_).first}};
      }
    }
    try {
      const json headers = to_json(runtime_.host("cuda_header_builds")());
      if (!headers.empty()) reply[rep::kCudaHeaders] = headers;
    } catch (const py::error_already_set&) {
      // A diagnostic: the builds themselves went as they went.
    }
    return {std::move(reply), {}};
  }
  if (role_ == role::kReference) {
    // Nothing else of this user may read the reference's memory (and so its outputs).
    prctl(PR_SET_DUMPABLE, 0);
  }
  start_load_parts();
  py::module_ torch = py::module_::import("torch");
  torch.attr("set_grad_enabled")(false);
  if (request.contains(req::kEnvironment)) {
    // A ready worker's role, as a fork's variables are set before anything of the task runs.
    py::dict environment;
    for (const auto& [key, value] : request[req::kEnvironment].items())
      environment[py::str(key)] = py::str(value.get<std::string>());
    runtime_.host("enter_worker")(environment, std::string());
  }

  try {
    task_ = load_module(request.at(req::kTask).get<std::string>(), "cudal1_task");
  } catch (const py::error_already_set& e) {
    auto [message, trace] = describe_python_error(e, runtime_);
    throw UserCodeError{proto::status::kTaskError, "the task failed to import: " + message, trace};
  }
  get_inputs_ = task_.attr("get_inputs");
  init_seed_ = request.at(req::kInitSeed).get<std::uint64_t>();
  // Constructor arguments come from the task before any candidate code runs.
  init_args_ = runtime_.host("make_init_args")(task_.attr("get_init_inputs"), init_seed_);
  end_load_part("task");
  set_up_device(request.value(req::kDevice, "cpu"), request);
  end_load_part("timer");

  // Bound before any candidate code runs: what the candidate may not change, and the functions
  // this worker applies to user tensors.
  runtime_.host("warm_up_threads")(device_);
  harness_ = runtime_.host("capture_harness")();
  guards_ = runtime_.host("capture_guards")(task_);
  end_load_part("harness");

  if (role_ == role::kCandidate && request.value(req::kCalibrate, false)) {
    // The task's model first, trusted code in a process no candidate code has run in yet: its
    // times here against the reference's worker measure this process's own offset.
    model_ = build_task_model();
    timer_->synchronize();
    end_load_part("model");
    deferred_load_ = request;
    json reply = loaded_reply();
    end_load_part("gate");
    reply[rep::kLoadParts] = load_parts_;
    reply[rep::kCalibrating] = true;
    reply[rep::kGate] = false;
    return {reply, {}};
  }
  return {load_model(request), {}};
}

wire::Message Session::load_candidate() {
  if (deferred_load_.is_null()) {
    return {
        failure(proto::status::kInternalError, "load_candidate without a load that deferred it"),
        {}};
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
  start_load_parts();
  return {load_model(request), {}};
}

wire::Message Session::reset() {
  if (role_ != role::kReference || !task_) {
    return {failure(proto::status::kInternalError, "reset is for a loaded reference worker"), {}};
  }
  // Everything of the evaluation it served: the next one's requests find none of it.
  model_ = py::none();
  set_aside_model_ = py::object();
  deferred_load_ = json();
  forget_pool();
  prepared_.clear();
  previous_outputs_ = py::list();
  rotation_ = py::list();
  next_stream_ = 0;
  trials_done_ = 0;
  gate_.reset();  // a new one with the next load: this one's timing switched it off
  if (timer_) {
    timer_->synchronize();
    timer_->activity();  // what the trace still holds
  }
  runtime_.host("reset_worker")(device_);
  json reply = cpu_report();
  return {std::move(reply), {}};
}

wire::Message Session::reload(const json& request) {
  if (role_ != role::kReference || !task_ || !model_.is_none()) {
    return {failure(proto::status::kInternalError, "reload is for a reference worker after reset"),
            {}};
  }
  start_load_parts();
  init_seed_ = request.at(req::kInitSeed).get<std::uint64_t>();
  init_args_ = runtime_.host("make_init_args")(task_.attr("get_init_inputs"), init_seed_);
  guards_ = runtime_.host("capture_guards")(task_);
  end_load_part("task");
  return {load_model(request), {}};
}

wire::Message Session::calibration_model(const json& request) {
  if (role_ != role::kReference || model_.is_none() || !model_) {
    return {
        failure(proto::status::kInternalError, "calibration_model needs a loaded reference worker"),
        {}};
  }
  const bool use = request.at(req::kUse).get<bool>();
  if (use == static_cast<bool>(set_aside_model_)) return {{{rep::kOk, true}}, {}};  // already so
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
  return {{{rep::kOk, true}}, {}};
}

py::object Session::build_task_model() const {
  try {
    return runtime_.host("build_model")(task_.attr("Model"), init_args_, init_seed_, device_);
  } catch (const py::error_already_set& e) {
    auto [message, trace] = describe_python_error(e, runtime_);
    throw UserCodeError{proto::status::kTaskError, "constructing the model failed: " + message,
                        trace};
  }
}

json Session::load_model(const json& request) {
  py::object model_class = task_.attr("Model");
  // Libraries the candidate's import and its model's constructor built in this worker.
  json rebuilt_extensions = json::array();
  py::object libraries_after_import = py::none();
  if (role_ == role::kCandidate) {
    py::object candidate;
    try {
      py::tuple loaded =
          runtime_.host("load_candidate")(request.at(req::kCandidate).get<std::string>());
      candidate = loaded[0];
      rebuilt_extensions = to_json(loaded[1]);
      libraries_after_import = loaded[2];
    } catch (const py::error_already_set& e) {
      auto [message, trace] = describe_python_error(e, runtime_);
      throw UserCodeError{proto::status::kCompileError, message, trace};
    }
    if (!py::hasattr(candidate, "ModelNew")) {
      throw UserCodeError{proto::status::kCompileError, "the candidate defines no ModelNew", ""};
    }
    model_class = candidate.attr("ModelNew");
    end_load_part("candidate");
  }
  try {
    model_ = runtime_.host("build_model")(model_class, init_args_, init_seed_, device_);
  } catch (const py::error_already_set& e) {
    auto [message, trace] = describe_python_error(e, runtime_);
    throw UserCodeError{
        role_ == role::kCandidate ? proto::status::kRuntimeError : proto::status::kTaskError,
        "constructing the model failed: " + message, trace};
  }
  if (!libraries_after_import.is_none()) {
    try {
      for (const auto& name :
           to_json(runtime_.host("libraries_built_since")(libraries_after_import)))
        rebuilt_extensions.push_back(name);
    } catch (const py::error_already_set&) {
      // A diagnostic: what the candidate's code left in its build folder is its own.
    }
  }
  timer_->synchronize();
  end_load_part("model");
  // After the candidate's import: a CUPTI subscriber it set up itself leaves the gate out.
  std::string gate_why = "not on a CUDA device";
  // The orchestrator forwards CUDAL1_DEVICE_GATE=0 (no CUDAL1_* variable reaches a worker).
  if (!request.value(req::kDeviceGate, true)) {
    gate_why = "CUDAL1_DEVICE_GATE=0";
  } else if (device_ != "cpu") {
    gate_ = make_device_gate(gate_why);
  }
  json reply = loaded_reply();
  reply[rep::kGate] = gate_ != nullptr;
  reply[rep::kRebuiltExtensions] = rebuilt_extensions;
  if (role_ == role::kCandidate) {
    // The kernels of the libraries it built and loaded (their launch stubs' symbols): names put
    // together by macros or at run time, which no reading of its text finds.
    try {
      reply[rep::kBuiltKernels] = to_json(runtime_.host("built_kernel_names")());
    } catch (const py::error_already_set& e) {
      auto [message, trace] = describe_python_error(e, runtime_);
      reply[rep::kBuiltKernels] = json::array();
      reply[rep::kBuiltKernelsError] = message;
    }
  }
  if (!gate_) reply[rep::kGateUnavailable] = gate_why;
  if (role_ == role::kCandidate) {
    try {
      const json replayed = to_json(runtime_.host("replayed_failed_builds")());
      if (!replayed.empty()) reply[rep::kReplayedBuildFailures] = replayed;
    } catch (const py::error_already_set&) {
      // A diagnostic, as the rebuilt libraries above.
    }
  }
  end_load_part("gate");
  reply[rep::kLoadParts] = load_parts_;
  return reply;
}

void Session::start_load_parts() {
  load_parts_ = json::object();
  load_part_start_ = std::chrono::steady_clock::now();
}

void Session::end_load_part(const char* part) {
  const auto now = std::chrono::steady_clock::now();
  load_parts_[part] =
      load_parts_.value(part, 0.0) + std::chrono::duration<double>(now - load_part_start_).count();
  load_part_start_ = now;
}

json Session::loaded_reply() const {
  return {{rep::kOk, true},
          {rep::kDevice, to_json(runtime_.host("device_info")(device_))},
          {rep::kTimer, timer_->describe()},
          {rep::kMemory, to_json(runtime_.host("memory_use")(device_))},
          {rep::kGuards, check_guards()}};
}

}  // namespace cudal1::worker
