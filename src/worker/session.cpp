#include "session.hpp"

#include <pybind11/stl.h>
#include <sys/prctl.h>

#include <chrono>

namespace cudal1::worker {
namespace {

using json = nlohmann::json;

json failure(const std::string& status, const std::string& error, const std::string& trace = {}) {
  return {{"ok", false}, {"status", status}, {"error", error}, {"traceback", trace}};
}

// A failure while importing or constructing user code, classified for the verdict.
struct UserCodeError {
  std::string status;
  std::string error;
  std::string trace;
};

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
    wire::Message reply = dispatch(request->header);
    reply.header["op"] = op;
    wire::write_message(reply_fd_, reply);
    if (fatal_) return 3;
  }
}

wire::Message Session::dispatch(const json& request) {
  const std::string op = request.value("op", "");
  try {
    if (op == "load") return load(request);
    if (op == "trial") return trial(request);
    if (op == "prepare_timing") return prepare_timing(request);
    if (op == "sample") return sample(request);
    if (op == "activity")
      return {{{"ok", true}, {"activity", timer_ ? timer_->activity() : json()}}, {}};
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
  if (device != "cpu") {
    copy = [timer](void* dst, std::uint64_t src, std::size_t size) {
      timer->copy_to_host(dst, src, size);
    };
  }
  exporter_.emplace(std::move(copy));
}

wire::Message Session::load(const json& request) {
  role_ = request.at("role").get<std::string>();
  auto load_module = runtime_.host("load_module");
  if (role_ == "build") {
    try {
      load_module(request.at("candidate").get<std::string>(), "cudal1_candidate");
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

  py::object task;
  try {
    task = load_module(request.at("task").get<std::string>(), "cudal1_task");
  } catch (const py::error_already_set& e) {
    auto [message, trace] = describe_python_error(e, runtime_);
    throw UserCodeError{"task_error", "the task failed to import: " + message, trace};
  }
  get_inputs_ = task.attr("get_inputs");
  const auto init_seed = request.at("init_seed").get<std::uint64_t>();
  // Constructor arguments come from the task before any candidate code runs.
  py::object init_args = runtime_.host("make_init_args")(task.attr("get_init_inputs"), init_seed);
  set_up_device(request.value("device", "cpu"), request);

  py::object model_class = task.attr("Model");
  if (role_ == "candidate") {
    py::object candidate;
    try {
      candidate = load_module(request.at("candidate").get<std::string>(), "cudal1_candidate");
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
    model_ = runtime_.host("build_model")(model_class, init_args, init_seed, device_);
  } catch (const py::error_already_set& e) {
    auto [message, trace] = describe_python_error(e, runtime_);
    throw UserCodeError{role_ == "candidate" ? "runtime_error" : "task_error",
                        "constructing the model failed: " + message, trace};
  }
  timer_->synchronize();
  json reply = {{"ok", true},
                {"device", to_json(runtime_.host("device_info")(device_))},
                {"timer", timer_->describe()}};
  return {reply, {}};
}

py::list Session::make_inputs(std::uint64_t seed) const {
  return runtime_.host("make_inputs")(get_inputs_, seed, device_);
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
    ExportedTensor exported = exporter_->export_tensor(value);
    json entry = exported.describe();
    entry["kind"] = "tensor";
    entry["digest"] = digest_bytes(exported.bytes.data(), exported.bytes.size());
    described.push_back(entry);
  }
  return described;
}

wire::Message Session::trial(const json& request) {
  py::list inputs = make_inputs(request.at("seed").get<std::uint64_t>());
  const json inputs_before = describe_inputs(inputs, true);
  const auto begin = std::chrono::steady_clock::now();
  py::object result = model_(*inputs);
  timer_->synchronize();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();

  wire::Message reply{{{"ok", true}, {"ms", ms}, {"inputs", inputs_before}}, {}};
  json outputs = json::array();
  py::list flat = runtime_.host("flatten_outputs")(result);
  for (py::handle tensor : flat) {
    ExportedTensor exported = exporter_->export_tensor(tensor);
    outputs.push_back(exported.describe());
    reply.payload.insert(reply.payload.end(), exported.bytes.begin(), exported.bytes.end());
  }
  reply.header["outputs"] = outputs;
  reply.header["inputs_after"] = describe_inputs(inputs, true);
  return reply;
}

wire::Message Session::prepare_timing(const json& request) {
  const auto seed = request.at("seed").get<std::uint64_t>();
  const auto wanted = request.value("pool_size", std::size_t{16});
  const auto max_bytes = request.value("max_pool_bytes", std::uint64_t{2} << 30);
  pool_.clear();
  pool_.push_back(make_inputs(seed));
  std::uint64_t set_bytes = 0;
  for (py::handle value : pool_.front()) {
    if (exporter_->is_tensor(value)) {
      set_bytes += value.attr("numel")().cast<std::uint64_t>() *
                   value.attr("element_size")().cast<std::uint64_t>();
    }
  }
  // At least two sets so consecutive calls never see the same buffers.
  const std::size_t by_memory =
      set_bytes > 0 ? static_cast<std::size_t>(max_bytes / set_bytes) : wanted;
  const std::size_t count = std::max<std::size_t>(2, std::min(wanted, by_memory));
  for (std::size_t i = 1; i < count; ++i) pool_.push_back(make_inputs(seed + i));
  timer_->synchronize();
  // As timeit does: a cyclic garbage collection costs tens of microseconds and would land in
  // random samples. Collect once now; objects of a forward call are freed by reference counts.
  py::module_ gc = py::module_::import("gc");
  gc.attr("collect")();
  gc.attr("disable")();
  return {{{"ok", true},
           {"pool", pool_.size()},
           {"set_bytes", set_bytes},
           {"inputs", describe_inputs(pool_.front(), false)}},
          {}};
}

wire::Message Session::sample(const json& request) {
  if (pool_.empty()) throw std::runtime_error("sample requested before prepare_timing");
  const py::list& inputs = pool_[request.at("set").get<std::size_t>() % pool_.size()];
  py::object out;  // released after the window: freeing the result is not part of the call
  SampleResult result = timer_->time([&] { out = model_(*inputs); });
  return {{{"ok", true}, {"ms", result.ms}, {"host_ms", result.host_ms}}, {}};
}

}  // namespace cudal1::worker
