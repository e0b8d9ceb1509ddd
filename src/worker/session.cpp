// The request loop and the dispatch of requests by operation; the operations themselves are in
// session_load.cpp (loading models), session_trial.cpp (correctness) and session_timing.cpp
// (timed samples).
#include "session.hpp"

#include <sys/resource.h>

#include <chrono>
#include <ctime>

#include "session_common.hpp"

namespace cudal1::worker {
namespace {

using json = nlohmann::json;
namespace ops = proto::op;
namespace req = proto::request;
namespace rep = proto::reply;

double process_cpu_seconds() {
  timespec t{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) != 0) return 0;
  return static_cast<double>(t.tv_sec) + t.tv_nsec / 1e9;
}

double children_cpu_seconds() {
  rusage children{};
  if (getrusage(RUSAGE_CHILDREN, &children) != 0) return 0;
  const auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(children.ru_utime) + seconds(children.ru_stime);
}

}  // namespace

Session::Session(PythonRuntime& runtime, int request_fd, int reply_fd)
    : runtime_(runtime), request_fd_(request_fd), reply_fd_(reply_fd) {}

int Session::run() {
  wire::FrameReader reader;
  // Where the process's CPU goes, by operation: read around each request (two clock reads, not
  // inside anything a sample measures).
  double cpu_last = process_cpu_seconds();
  cpu_by_op_["start"] = cpu_last;
  for (;;) {
    std::optional<wire::Message> request = wire::read_message_blocking(request_fd_, reader);
    if (!request) return 0;
    const std::string op = request->header.value(req::kOp, "");
    if (op == ops::kExit) return 0;
    const auto begin = std::chrono::steady_clock::now();
    const double cpu_begin = process_cpu_seconds();
    cpu_between_ += cpu_begin - cpu_last;
    wire::Message reply = op == ops::kCpuReport                  ? wire::Message{cpu_report(), {}}
                          : request->header.contains(req::kHold) ? dispatch_gated(request->header)
                                                                 : dispatch(request->header);
    cpu_last = process_cpu_seconds();
    cpu_by_op_[op] += cpu_last - cpu_begin;
    if (op == ops::kReset && reply.header.value(rep::kOk, false)) {
      // Its report went with the reply: the next evaluation's count starts here.
      cpu_by_op_.clear();
      cpu_between_ = 0;
      cpu_at_reset_ = cpu_last;
    }
    reply.header[rep::kOp] = op;
    // The worker's own time for the request: the rest of a round trip is the pipe's and the
    // orchestrator's.
    reply.header[rep::kWorkerS] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    if (op == ops::kLoad || op == ops::kLoadCandidate || op == ops::kReload)
      add_cpu_seconds(reply.header);
    wire::write_message(reply_fd_, reply);
    if (fatal_) return 3;
  }
}

void Session::add_cpu_seconds(json& header) const {
  // What the worker's start and load cost (the rest of an evaluation's CPU is the timing's), and
  // a build's compilers: read for loads only, not on the samples' path. A reused reference's
  // count starts at its reset.
  header[rep::kCpuS] = process_cpu_seconds() - cpu_at_reset_;
  header[rep::kChildrenCpuS] = children_cpu_seconds();
}

json Session::cpu_report() const {
  return {{rep::kOk, true},
          {rep::kCpuByOp, cpu_by_op_},
          {rep::kCpuBetween, cpu_between_},
          {rep::kChildrenCpuS, children_cpu_seconds()}};
}

wire::Message Session::dispatch_gated(const json& request) {
  const std::string op = request.value(req::kOp, "");
  // A sample under the gate: the warm-up before the timing phase (prewarm_timing), taken while
  // other evaluations may use the device.
  if (!gate_ || (op != ops::kFirstCall && op != ops::kTrial && op != ops::kPrepareTrials &&
                 op != ops::kPrepareTiming && op != ops::kSample)) {
    return {failure(proto::status::kInternalError,
                    "'" + op + "' cannot hold the device from the worker"),
            {}};
  }
  const json& hold = request.at(req::kHold);
  gate_->open(
      {hold.at(req::kHoldLock).get<std::string>(), hold.at(req::kHoldTurnstile).get<std::string>()},
      std::chrono::milliseconds(hold.at(req::kHoldIdleMs).get<int>()));
  wire::Message reply = dispatch(request);
  gate_->close();
  GateHolds holds = gate_->take_holds();
  reply.header[rep::kHolds] = std::move(holds.spans);
  reply.header[rep::kHoldWaitS] = holds.wait_s;
  return reply;
}

wire::Message Session::dispatch(const json& request) {
  const std::string op = request.value(req::kOp, "");
  // Timing holds the device alone (the orchestrator's hold): the gate is off from here on. (A
  // sample that carries a hold is a warm-up under the gate, before that.)
  if (gate_ && (op == ops::kSample || op == ops::kBandwidth || op == ops::kMoreUnseen) &&
      !request.contains(req::kHold)) {
    gate_->disable();
  }
  try {
    if (op == ops::kLoad) return load(request);
    if (op == ops::kPrepareDevice) return prepare_device(request);
    if (op == ops::kLoadCandidate) return load_candidate();
    if (op == ops::kReset) return reset();
    if (op == ops::kReload) return reload(request);
    if (op == ops::kCalibrationModel) return calibration_model(request);
    if (op == ops::kTrial) return trial(request);
    if (op == ops::kPrepareTrials) return prepare_trials(request);
    if (op == ops::kFirstCall) return first_call(request);
    if (op == ops::kPrepareTiming) return prepare_timing(request);
    if (op == ops::kMoreUnseen) return more_unseen(request);
    if (op == ops::kSample) return sample(request);
    if (op == ops::kBandwidth) return bandwidth(request);
    if (op == ops::kGuards) return {{{rep::kOk, true}, {rep::kGuards, check_guards()}}, {}};
    if (op == ops::kActivity) return activity();
    return {failure(proto::status::kInternalError, "unknown request '" + op + "'"), {}};
  } catch (const UserCodeError& e) {
    return {failure(e.status, e.error, e.trace), {}};
  } catch (const py::error_already_set& e) {
    auto [message, trace] = describe_python_error(e, runtime_);
    // A CUDA fault surfaces in Python as a RuntimeError; the context is unusable afterwards.
    if (message.find("CUDA error") != std::string::npos ||
        message.find("cudaError") != std::string::npos) {
      fatal_ = true;
    }
    return {failure(proto::status::kRuntimeError, message, trace), {}};
  } catch (const DeviceError& e) {
    fatal_ = true;
    return {failure(proto::status::kRuntimeError, e.what()), {}};
  } catch (const std::exception& e) {
    return {failure(proto::status::kRuntimeError, e.what()), {}};
  }
}

json Session::check_guards() const {
  if (!guards_) return json::object();
  return to_json(guards_());
}

}  // namespace cudal1::worker
