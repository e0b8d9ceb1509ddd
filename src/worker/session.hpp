// The request loop of a worker process: load a model, run correctness trials, run timed samples.
// Requests arrive on one file descriptor and replies leave on another (see common/wire.hpp);
// the process's stdout and stderr are the evaluation log.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cudal1/common/wire.hpp"
#include "python_runtime.hpp"
#include "sample_timer.hpp"
#include "tensor_export.hpp"

namespace cudal1::worker {

class Session {
 public:
  Session(PythonRuntime& runtime, int request_fd, int reply_fd);
  // Serves until an "exit" request, end of input, or a fatal device error. Returns the exit code.
  int run();

 private:
  wire::Message dispatch(const nlohmann::json& request);
  wire::Message load(const nlohmann::json& request);
  wire::Message trial(const nlohmann::json& request);
  wire::Message prepare_timing(const nlohmann::json& request);
  wire::Message sample(const nlohmann::json& request);

  void set_up_device(const std::string& device, const nlohmann::json& request);
  py::list make_inputs(std::uint64_t seed) const;
  nlohmann::json describe_inputs(const py::list& inputs, bool with_digest) const;

  PythonRuntime& runtime_;
  int request_fd_;
  int reply_fd_;
  bool fatal_ = false;

  std::string role_;
  std::string device_ = "cpu";
  py::object get_inputs_;
  py::object model_;
  std::unique_ptr<SampleTimer> timer_;
  std::optional<TensorExporter> exporter_;
  std::vector<py::list> pool_;
};

}  // namespace cudal1::worker
