// The request loop of a worker process: load a model, run correctness trials, run timed samples.
// Requests arrive on one file descriptor and replies leave on another (cudal1/worker/protocol.hpp
// names the operations and keys); the process's stdout and stderr are the evaluation log.
// session.cpp dispatches; session_load.cpp, session_trial.cpp and session_timing.cpp serve.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cudal1/common/wire.hpp"
#include "device_gate.hpp"
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
  // A request on the device during correctness ("hold" in the request): the gate takes the
  // shared hold while the worker uses the device; the reply lists the holds.
  wire::Message dispatch_gated(const nlohmann::json& request);
  // A load reply's cpu_s (since the process began, or since its last reset) and children_cpu_s
  // (protocol.hpp).
  void add_cpu_seconds(nlohmann::json& header) const;
  // cpu_report's reply: where this process's CPU went (cpu_by_op_, cpu_between_).
  nlohmann::json cpu_report() const;
  wire::Message load(const nlohmann::json& request);
  // The candidate's import and model, after a load that deferred them ("calibrate"): until
  // then the candidate's worker holds the task's own model, which the orchestrator times against
  // the reference's worker to measure this process's offset (docs/evaluation.md).
  wire::Message load_candidate();
  // A reference worker between two evaluations of its task (op::kReset, op::kReload): reset
  // forgets the evaluation it served; reload builds the model again for the next one, with the
  // request's init_seed, in the process, context, timer and task module it has.
  wire::Message reset();
  wire::Message reload(const nlohmann::json& request);
  // {"use": true}: the reference's worker sets its model aside and builds a second copy of the
  // task's model (same seed) for the calibration to call; {"use": false} puts the first back.
  // The model the trials and the timing call is never called by the calibration: a model with
  // state (an RNN's hidden state) stays where the candidate's is.
  wire::Message calibration_model(const nlohmann::json& request);
  // The model of `role_` (the candidate's import first), the device gate, the load reply.
  nlohmann::json load_model(const nlohmann::json& request);
  // A new instance of the task's own Model, built as the reference's was (same seed).
  py::object build_task_model() const;
  // Drops the timing pool and the request it answered.
  void forget_pool();
  // What every load reply says: the device, the timer, memory in use, the guards' report.
  nlohmann::json loaded_reply() const;
  // The seconds of a load's parts (reply "load_parts"): start_load_parts when a load begins,
  // end_load_part after each part, with its name.
  void start_load_parts();
  void end_load_part(const char* part);
  wire::Message trial(const nlohmann::json& request);
  wire::Message prepare_trials(const nlohmann::json& request);
  wire::Message first_call(const nlohmann::json& request);
  wire::Message prepare_timing(const nlohmann::json& request);
  wire::Message more_unseen(const nlohmann::json& request);
  wire::Message sample(const nlohmann::json& request);
  // A sample request, read and checked before anything is timed.
  struct SampleRequest {
    // An input set: a pool index, or an unseen set (used this once).
    struct SetRef {
      std::size_t index = 0;
      bool unseen = false;
    };
    bool batch = false;  // "sets" (a batch) rather than "set" (a single sample)
    std::vector<SetRef> sets;
    std::vector<bool> traced;  // per sample: whether its window is traced
    // The sample whose outputs go back for a spot check, and how many elements of each.
    std::optional<std::size_t> check_index;
    std::uint64_t check_seed = 0, check_elements = 0;
  };
  SampleRequest read_sample_request(const nlohmann::json& request) const;
  // A fresh copy of an input set for one sample.
  py::list sample_inputs(const SampleRequest::SetRef& set);
  // One timed call on the next stream of the rotation (when there is one); its result in `out`.
  SampleResult timed_sample(const py::list& inputs, TimingMode mode, bool traced,
                            const py::object& previous_stream, py::object& out);
  // Exports (a sample of) a sample's outputs into `reply` for the orchestrator's spot check.
  void spot_check(const py::list& flat, std::uint64_t seed, std::uint64_t elements,
                  wire::Message& reply);
  // The end of a measurement: the activity trace's summary.
  wire::Message activity();
  wire::Message bandwidth(const nlohmann::json& request);
  nlohmann::json check_guards() const;
  // Memory of the model's parameters and buffers, and of the previous call's outputs.
  struct Range {
    std::string device;
    std::uint64_t begin = 0, end = 0;
    bool dense = true;
    bool overlaps(const Range& other) const {
      return device == other.device && begin < other.end && other.begin < end;
    }
  };
  Range range_of(py::handle tensor) const;
  std::vector<Range> ranges_of(py::handle values) const;
  // Describes in `outputs` how each of a trial's outputs (`flat`, digested as `digests`) relates
  // to other memory; returns those that may be poisoned (no input's, no parameter's).
  py::list inspect_outputs(const py::list& flat, const std::vector<std::uint64_t>& digests,
                           const py::list& inputs, nlohmann::json& outputs) const;

  // The device, its context and its timer (load parts "context" and "timer"); a ready worker's
  // load finds the context made (prepare_device) and makes the timer.
  void set_up_device(const std::string& device, const nlohmann::json& request);
  // A ready worker's first request: the device's context, before any task is known.
  wire::Message prepare_device(const nlohmann::json& request);
  py::list make_inputs(std::uint64_t seed) const;
  // The inputs for `seed` on the device: those prepare_trials made on the host, or made now;
  // with their description (digests) in `described` when given.
  py::list inputs_for(std::uint64_t seed, nlohmann::json* described);
  nlohmann::json describe_inputs(const py::list& inputs, bool with_digest) const;
  // Bytes of the tensors among `values`.
  std::uint64_t tensor_bytes(const py::list& values) const;

  PythonRuntime& runtime_;
  int request_fd_;
  int reply_fd_;
  bool fatal_ = false;

  std::string role_;
  py::object task_;
  py::object init_args_;
  nlohmann::json deferred_load_;  // the load request whose candidate part waits (calibration)
  nlohmann::json load_parts_;     // {part: seconds} of the load under way
  std::chrono::steady_clock::time_point load_part_start_;
  std::string device_ = "cpu";
  bool device_prepared_ = false;             // prepare_device made device_'s context
  std::map<std::string, double> cpu_by_op_;  // the process's CPU seconds per operation
  double cpu_between_ = 0;                   // and between requests
  double cpu_at_reset_ = 0;                  // the process's CPU seconds at its last reset
  py::object get_inputs_;
  py::object model_;
  py::object set_aside_model_;  // the reference's own model while the calibration's is in use
  std::uint64_t init_seed_ = 0;
  std::unique_ptr<SampleTimer> timer_;
  // Holds the device (shared) from inside this worker during correctness; null on the CPU, where
  // CUPTI's callbacks are missing, or when CUDAL1_DEVICE_GATE=0.
  std::unique_ptr<DeviceGate> gate_;
  std::optional<TensorExporter> exporter_;
  std::vector<py::list> pool_;
  nlohmann::json pool_request_, pool_reply_;  // the request that made pool_, and its reply
  // Input sets of the coming calls, made ahead (before the device is held), by seed: the inputs
  // and their description with digests.
  struct PreparedInputs {
    py::list inputs;
    nlohmann::json described;
  };
  std::map<std::uint64_t, PreparedInputs> prepared_;
  // Input sets made for one timed call each (prepare_timing's "unseen"), from seeds no other set
  // uses: a candidate that keeps results by input content is as slow on them as it really is.
  // Kept as bytes and plain values (the harness's hide) where it can be, else as the tensors.
  struct UnseenSet {
    struct Value {
      bool tensor = false;
      py::object data;  // the bytes of a tensor, or the plain value
      std::string dtype;
      std::vector<int64_t> shape;
    };
    std::vector<Value> hidden;
    py::list inputs;  // when they could not be hidden
    bool used = false;
  };
  std::vector<UnseenSet> unseen_;
  std::uint64_t unseen_seed_ = 0;  // set i comes from unseen_seed_ + i
  std::size_t unseen_limit_ = 0;   // sets at most (memory)
  bool unseen_hidden_ = true;
  // Up to `count` more unseen sets; their descriptions with digests.
  nlohmann::json make_unseen(std::size_t count);
  // The unseen set `index` on the device, once: a second use throws.
  py::list take_unseen(std::size_t index);
  py::object guards_;          // reports what the candidate changed (cudal1_host.capture_guards)
  py::dict harness_;           // poison, fresh, memory_range, model_tensors, bound before user code
  py::list previous_outputs_;  // the last trial's outputs, kept alive to see reuse
  // Streams the samples' calls run on in turn (prepare_timing's "streams"; empty: the current
  // stream), and the next one's index.
  py::list rotation_;
  std::size_t next_stream_ = 0;
  std::size_t trials_done_ = 0;
};

}  // namespace cudal1::worker
