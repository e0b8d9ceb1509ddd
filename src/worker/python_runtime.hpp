// The embedded Python interpreter that hosts the user's PyTorch code inside the worker.
#pragma once

#include <pybind11/embed.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

namespace cudal1::worker {

namespace py = pybind11;

// Starts the interpreter configured like the PyTorch interpreter chosen at build time (including
// a virtual environment's site-packages) and loads the host helper module. One per process.
class PythonRuntime {
 public:
  PythonRuntime();
  ~PythonRuntime();
  PythonRuntime(const PythonRuntime&) = delete;
  PythonRuntime& operator=(const PythonRuntime&) = delete;

  // A function of the host module, looked up once; later rebinding of the module attribute by
  // user code does not change the object returned earlier.
  py::object host(const char* name) const;

 private:
  py::object host_module_;
};

// Converts a JSON-serialisable Python value (dicts, lists, numbers, strings) to JSON.
nlohmann::json to_json(py::handle value);

// The message and trimmed traceback of the Python exception being handled.
std::pair<std::string, std::string> describe_python_error(const py::error_already_set& error,
                                                          const PythonRuntime& runtime);

}  // namespace cudal1::worker
