#include "python_runtime.hpp"

#include <Python.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "host_module.hpp"

namespace cudal1::worker {
namespace {

void initialize_interpreter() {
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  // The worker's own signal dispositions stay in force: SIGINT/SIGTERM must end the process even
  // while a candidate sits in a tight loop that never returns to the interpreter.
  config.install_signal_handlers = 0;
  config.write_bytecode = 0;
  config.parse_argv = 0;
  // Naming the build's interpreter makes CPython find its prefix and any pyvenv.cfg, so a
  // virtual environment's site-packages are on sys.path as they are for that interpreter.
  PyStatus status =
      PyConfig_SetBytesString(&config, &config.program_name, CUDAL1_PYTHON_EXECUTABLE);
  if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status)) {
    throw std::runtime_error(std::string("cannot start the embedded Python interpreter: ") +
                             (status.err_msg ? status.err_msg : "unknown error"));
  }
}

// Adds the build interpreter's sys.path entries that embedding did not reproduce.
void complete_sys_path() {
  const auto info = nlohmann::json::parse(kBuildPythonInfo, nullptr, false);
  if (info.is_discarded() || !info.contains("path")) return;
  py::list path = py::module_::import("sys").attr("path");
  for (const auto& entry : info["path"]) {
    py::str item(entry.get<std::string>());
    if (!path.contains(item)) path.append(item);
  }
}

}  // namespace

PythonRuntime::PythonRuntime() {
  initialize_interpreter();
  complete_sys_path();
  py::module_ faulthandler = py::module_::import("faulthandler");
  faulthandler.attr("enable")();  // a segfault in user code leaves a Python traceback in the log
  py::module_ module =
      py::module_::create_extension_module("cudal1_host", nullptr, new py::module_::module_def);
  py::exec(kHostModuleSource, module.attr("__dict__"));
  host_module_ = module;
}

PythonRuntime::~PythonRuntime() {
  // The interpreter is deliberately not finalized: extension modules (CUDA contexts, compiled
  // candidates) may hang or crash in their destructors, and the process is about to exit anyway.
  host_module_.release();
}

py::object PythonRuntime::host(const char* name) const {
  return host_module_.attr(name);
}

nlohmann::json to_json(py::handle value) {
  static py::object dumps = py::module_::import("json").attr("dumps");
  return nlohmann::json::parse(dumps(value).cast<std::string>());
}

std::pair<std::string, std::string> describe_python_error(const py::error_already_set& error,
                                                          const PythonRuntime& runtime) {
  try {
    py::object trace =
        error.trace() ? py::reinterpret_borrow<py::object>(error.trace()) : py::none();
    py::tuple described = runtime.host("describe_exception")(error.value(), trace);
    return {described[0].cast<std::string>(), described[1].cast<std::string>()};
  } catch (const std::exception&) {
    return {error.what(), error.what()};
  }
}

}  // namespace cudal1::worker
