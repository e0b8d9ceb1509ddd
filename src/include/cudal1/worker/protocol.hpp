// The protocol between the orchestrator and a cudal1-worker process, in one place for both sides.
//
// A worker started in serve mode reads requests on fd 3 and writes replies on fd 4, one framed
// message each (cudal1/common/wire.hpp): a JSON header and an optional binary payload. Every
// request names its operation under "op"; every reply echoes it, says "ok", and carries the
// worker's own time for the request ("worker_s"). A failed request's reply has ok=false, a
// status (the kinds below), an error message and a traceback.
//
// The names are character arrays, the same type as the literals they replace, so that every JSON
// overload (nlohmann 3.9 on) takes them as it took the literals.
#pragma once

namespace cudal1::worker_protocol {

// Command-line modes of cudal1-worker.
namespace mode {
inline constexpr char kServe[] = "serve";      // the request loop on the two descriptors below
inline constexpr char kInspect[] = "inspect";  // syntax check and top-level names of a file
inline constexpr char kProbe[] = "probe";      // the toolchain a compiled candidate depends on
inline constexpr char kZygote[] = "zygote";    // imports PyTorch once, then forks serving workers
// Makes PyTorch's extension header precompiled in the folder it is given (trusted: no user code).
inline constexpr char kPrecompiledHeader[] = "pch";
}  // namespace mode

// Where a serving worker finds its requests and puts its replies.
inline constexpr int kRequestFd = 3;
inline constexpr int kReplyFd = 4;

// A zygote (mode kZygote) reads spawn requests on kZygoteFd, a SOCK_SEQPACKET socket: one JSON
// text per packet, a spawn's descriptors beside it (SCM_RIGHTS, in the order of fork::fd). It
// answers each spawn, and reports each forked worker's end, on the same socket.
inline constexpr int kZygoteFd = 3;
namespace fork {
// The zygote's first packet, once PyTorch is imported: {"ready": true, "pid", "preload_s"}.
inline constexpr char kReady[] = "ready";
inline constexpr char kPid[] = "pid";
inline constexpr char kPreloadS[] = "preload_s";
inline constexpr char kForkSafe[] = "fork_safe";  // false: its forks could not use CUDA
// A spawn: {"id", "name", "sandboxed", "uid", "gid", "cpu_seconds", "file_bytes", "tasks",
// "tmp_bytes", "environment": {...}, "directory", "nice"}.
inline constexpr char kId[] = "id";
inline constexpr char kName[] = "name";  // the worker's folder under the spool
inline constexpr char kSandboxed[] = "sandboxed";
inline constexpr char kUid[] = "uid";
inline constexpr char kGid[] = "gid";
inline constexpr char kCpuSeconds[] = "cpu_seconds";
inline constexpr char kFileBytes[] = "file_bytes";
inline constexpr char kTasks[] = "tasks";
inline constexpr char kTmpBytes[] = "tmp_bytes";
inline constexpr char kEnvironment[] = "environment";
inline constexpr char kDirectory[] = "directory";  // unsandboxed: its working directory
inline constexpr char kNice[] = "nice";  // a lower CPU priority (builds), set by the fork itself
// Answers: {"spawned": id, "pid"} (the pid in the zygote's namespace) or {"failed": id, "error"};
// a worker's end: {"exited": pid, "code"} or {"exited": pid, "signal"}.
inline constexpr char kSpawned[] = "spawned";
inline constexpr char kFailed[] = "failed";
inline constexpr char kError[] = "error";
inline constexpr char kExited[] = "exited";
inline constexpr char kCode[] = "code";
inline constexpr char kSignal[] = "signal";
// The descriptors of a spawn, in this order: the worker's request pipe (read end), its reply pipe
// (write end), its log, and the go pipe (read end) it waits on until the orchestrator has put it
// in its cgroup.
inline constexpr int kRequestIndex = 0;
inline constexpr int kReplyIndex = 1;
inline constexpr int kLogIndex = 2;
inline constexpr int kGoIndex = 3;
inline constexpr int kDescriptors = 4;
// Where a sandboxed zygote sees the spool (each worker's folder below it), and where a forked
// worker sees its own inputs (read-only) and build folder once it has hidden the spool.
inline constexpr char kSpoolPath[] = "/cudal1/spool";
inline constexpr char kInputsPath[] = "/cudal1/inputs";
inline constexpr char kExtensionsPath[] = "/cudal1/extensions";
// Where every sandboxed worker sees the build cache's precompiled headers (read-only).
inline constexpr char kHeadersPath[] = "/cudal1/pch";
}  // namespace fork

// Operations, the value of a request's "op".
namespace op {
inline constexpr char kExit[] = "exit";  // no reply: the worker ends
inline constexpr char kLoad[] = "load";
// A worker started ahead of its evaluation (ready workers): its device's context made before any
// task or candidate is known; its load then makes only the timer. Reply: {ok, load_parts}.
inline constexpr char kPrepareDevice[] = "prepare_device";
inline constexpr char kLoadCandidate[] = "load_candidate";
// A reference worker kept for the next evaluation of its task (reference_pool.hpp): `reset` drops
// everything of the evaluation it served (model, inputs, pools, trace, gate) and replies with its
// CPU report since the last reset; `reload` then builds the task's model for the next one, with
// that evaluation's init_seed, and replies as a load does. Refused by any other role.
inline constexpr char kReset[] = "reset";
inline constexpr char kReload[] = "reload";
inline constexpr char kCalibrationModel[] = "calibration_model";
inline constexpr char kPrepareTrials[] = "prepare_trials";
inline constexpr char kFirstCall[] = "first_call";
inline constexpr char kTrial[] = "trial";
inline constexpr char kPrepareTiming[] = "prepare_timing";
inline constexpr char kMoreUnseen[] = "more_unseen";
inline constexpr char kSample[] = "sample";
inline constexpr char kActivity[] = "activity";
inline constexpr char kBandwidth[] = "bandwidth";
inline constexpr char kGuards[] = "guards";
// The worker's CPU seconds by operation (asked before exit): {by_op, between, children}.
inline constexpr char kCpuReport[] = "cpu_report";
}  // namespace op

// Keys of requests, grouped by the operations that read them.
namespace request {
inline constexpr char kOp[] = "op";
// Any correctness request (first_call, trial, prepare_trials, prepare_timing) the worker's
// device gate is to hold the device for: {lock, turnstile, idle_ms}.
inline constexpr char kHold[] = "hold";
inline constexpr char kHoldLock[] = "lock";
inline constexpr char kHoldTurnstile[] = "turnstile";
inline constexpr char kHoldIdleMs[] = "idle_ms";
// load
inline constexpr char kRole[] = "role";  // one of the roles below
inline constexpr char kTask[] = "task";
inline constexpr char kCandidate[] = "candidate";
inline constexpr char kInitSeed[] = "init_seed";
// A build step's load on a host without the GPU it builds for (a build worker): the GPU's
// compute capability ("9.0"), which PyTorch's CUDA queries answer while the candidate is
// imported and constructed, so that its `if torch.cuda.is_available():` builds are made.
inline constexpr char kBuildForGpu[] = "build_for_gpu";
inline constexpr char kDevice[] = "device";
inline constexpr char kMemoryFraction[] = "memory_fraction";
inline constexpr char kTraceActivity[] = "trace_activity";
// load: variables of the worker's role (its build folder, architectures, precompiled headers),
// set before the task's import; a ready worker gets them here instead of at its fork.
inline constexpr char kEnvironment[] = "environment";
inline constexpr char kCalibrate[] = "calibrate";
inline constexpr char kDeviceGate[] = "device_gate";
// calibration_model
inline constexpr char kUse[] = "use";
// prepare_trials, first_call, trial, prepare_timing
inline constexpr char kSeeds[] = "seeds";
inline constexpr char kSeed[] = "seed";
inline constexpr char kCalls[] = "calls";         // first_call: warm calls timed after it
inline constexpr char kSettleMs[] = "settle_ms";  // trial
// prepare_timing
inline constexpr char kStreams[] = "streams";
inline constexpr char kPoolSize[] = "pool_size";
inline constexpr char kMaxPoolBytes[] = "max_pool_bytes";
inline constexpr char kUnseen[] = "unseen";  // also a set of sample's "sets": {"unseen": j}
// more_unseen
inline constexpr char kCount[] = "count";
// sample
inline constexpr char kMode[] = "mode";  // one of the timing modes below
inline constexpr char kHoldTimeoutMs[] = "hold_timeout_ms";
inline constexpr char kSet[] = "set";    // a single sample's input set
inline constexpr char kSets[] = "sets";  // a batch's input sets
inline constexpr char kTrace[] = "trace";
inline constexpr char kTraced[] = "traced";
inline constexpr char kCheck[] = "check";  // {index, seed, elements}
inline constexpr char kCheckIndex[] = "index";
inline constexpr char kCheckSeed[] = "seed";
inline constexpr char kCheckElements[] = "elements";
inline constexpr char kReturnOutputs[] = "return_outputs";
inline constexpr char kReturnCheckSeed[] = "check_seed";
inline constexpr char kReturnCheckElements[] = "check_elements";
}  // namespace request

// Values of load's "role".
namespace role {
// Imports the candidate (compiles its extensions); given the task, it also constructs the
// candidate's model on the CPU for the builds its constructor makes.
inline constexpr char kBuild[] = "build";
inline constexpr char kReference[] = "reference";
inline constexpr char kCandidate[] = "candidate";
}  // namespace role

// Values of sample's "mode" and of a sample's reply "mode"; bandwidth's "clock".
namespace timing_mode {
inline constexpr char kWindow[] = "window";
inline constexpr char kQueued[] = "queued";
}  // namespace timing_mode

// Keys of replies, grouped by the operations that write them.
namespace reply {
// Every reply.
inline constexpr char kOp[] = "op";
inline constexpr char kOk[] = "ok";
inline constexpr char kWorkerS[] = "worker_s";
// Every load and load_candidate reply: the worker's own CPU time so far (a fork's counts from its
// fork), and that of its children it has waited for (a build's compilers).
inline constexpr char kCpuS[] = "cpu_s";
inline constexpr char kChildrenCpuS[] = "children_cpu_s";
// A build's load: the nice value its process group (autogroup) took, where the kernel has them.
inline constexpr char kAutogroupNice[] = "autogroup_nice";
// cpu_report: the process's CPU seconds in each operation (and "start": before the first
// request, from its fork or exec), between requests (threads of its own, its libraries'), and of
// the children it waited for.
inline constexpr char kCpuByOp[] = "by_op";
inline constexpr char kCpuBetween[] = "between";
// A build's load given the task: what constructing the model built, {built, failed, error}.
inline constexpr char kConstruction[] = "construction";
// A build's load: its load_inline builds with CUDA sources by the torch header they compiled
// with, {light: [names], full: [names]} (extension_builds.py; absent when there were none).
inline constexpr char kCudaHeaders[] = "cuda_headers";
// A failure (ok=false).
inline constexpr char kStatus[] = "status";  // one of the statuses below
inline constexpr char kError[] = "error";
inline constexpr char kTraceback[] = "traceback";
// A request that held the device through the worker's gate.
inline constexpr char kHolds[] = "holds";
inline constexpr char kHoldWaitS[] = "hold_wait_s";
// load, load_candidate (and guards, trial: the guards' report)
inline constexpr char kDevice[] = "device";
inline constexpr char kTimer[] = "timer";
inline constexpr char kMemory[] = "memory";
inline constexpr char kGuards[] = "guards";
inline constexpr char kCalibrating[] = "calibrating";
// load, load_candidate: the worker's seconds in each part of it ("task": importing the task and
// making its constructor's arguments, "context": the CUDA context (none on the CPU), "timer": the
// sample timer (on a GPU its CUPTI subscription and events), "harness": what is bound before
// user code, "candidate": importing the candidate, "model": constructing it, "gate": the device
// gate and the reply).
inline constexpr char kLoadParts[] = "load_parts";
inline constexpr char kGate[] = "gate";
inline constexpr char kGateUnavailable[] = "gate_unavailable";
inline constexpr char kRebuiltExtensions[] = "rebuilt_extensions";
inline constexpr char kBuiltKernels[] = "built_kernels";
inline constexpr char kBuiltKernelsError[] = "built_kernels_error";
// The candidate's builds that raised the failure its build step recorded, without compiling.
inline constexpr char kReplayedBuildFailures[] = "replayed_build_failures";
// first_call, trial
inline constexpr char kMs[] = "ms";
inline constexpr char kOutputDigests[] = "output_digests";
inline constexpr char kCallMs[] = "call_ms";
// first_call of the reference: the arithmetic of the call, {precision: flops} (absent where it
// could not be counted)
inline constexpr char kFlops[] = "flops";
inline constexpr char kInputs[] = "inputs";  // also prepare_timing: the pool's first set
inline constexpr char kInputsAfter[] = "inputs_after";
inline constexpr char kOutputs[] = "outputs";  // also sample: the spot check's outputs
inline constexpr char kBusyTicksAfterReturn[] = "busy_ticks_after_return";
inline constexpr char kBusyThreads[] = "busy_threads";  // [{name, ticks}]
inline constexpr char kThreadName[] = "name";
inline constexpr char kThreadTicks[] = "ticks";
inline constexpr char kNewThreads[] = "new_threads";
inline constexpr char kPartsMs[] = "parts_ms";
// A trial's output, besides its tensor description.
inline constexpr char kChangedAfterReturn[] = "changed_after_return";
inline constexpr char kDense[] = "dense";
inline constexpr char kAliasesInput[] = "aliases_input";
inline constexpr char kAliasesParameter[] = "aliases_parameter";
inline constexpr char kAliasesPreviousOutput[] = "aliases_previous_output";
// prepare_timing, more_unseen
inline constexpr char kPool[] = "pool";
inline constexpr char kSetBytes[] = "set_bytes";
inline constexpr char kLastInputs[] = "last_inputs";
inline constexpr char kUnseen[] = "unseen";
inline constexpr char kUnseenInputs[] = "unseen_inputs";
inline constexpr char kUnseenHidden[] = "unseen_hidden";
inline constexpr char kStreams[] = "streams";
inline constexpr char kStreamsUnavailable[] = "streams_unavailable";
inline constexpr char kFirst[] = "first";
// sample (a single one's keys are the reply's own; a batch's are under "samples")
inline constexpr char kSamples[] = "samples";
inline constexpr char kStepsS[] = "steps_s";
inline constexpr char kOutputsS[] = "outputs_s";
inline constexpr char kFullShape[] = "full_shape";
inline constexpr char kHostMs[] = "host_ms";
inline constexpr char kMode[] = "mode";
inline constexpr char kHeld[] = "held";
inline constexpr char kKernelMs[] = "kernel_ms";
inline constexpr char kKernels[] = "kernels";
inline constexpr char kQueuedUnavailable[] = "queued_unavailable";
// activity
inline constexpr char kActivity[] = "activity";
// bandwidth: {"<call>_gbs"..., gbs, clock, matmul_tflops: {precision: TFLOP/s}}
inline constexpr char kBandwidth[] = "bandwidth";
inline constexpr char kGbs[] = "gbs";
inline constexpr char kGbsSuffix[] = "_gbs";
inline constexpr char kMatmulTflops[] = "matmul_tflops";
inline constexpr char kClock[] = "clock";
}  // namespace reply

// The parts of a trial's time (reply "parts_ms") and of a batch's (reply "steps_s").
namespace part {
inline constexpr char kInputs[] = "inputs";
inline constexpr char kOutputExport[] = "output_export";
inline constexpr char kInputDigestsAfter[] = "input_digests_after";
inline constexpr char kSettle[] = "settle";
inline constexpr char kChecks[] = "checks";
inline constexpr char kCopy[] = "copy";
inline constexpr char kTimed[] = "timed";
inline constexpr char kOutputs[] = "outputs";
inline constexpr char kTrace[] = "trace";
}  // namespace part

// An input set's description (reply "inputs", "inputs_after", "last_inputs", "unseen_inputs"):
// a tensor's description with its digest, or a plain value's repr.
namespace input {
inline constexpr char kKind[] = "kind";
inline constexpr char kTensor[] = "tensor";  // value of "kind"
inline constexpr char kValue[] = "value";    // value of "kind"
inline constexpr char kRepr[] = "repr";
inline constexpr char kDigest[] = "digest";
}  // namespace input

// A tensor's description (an input's, an output's; the payload holds its bytes).
namespace tensor {
inline constexpr char kDtype[] = "dtype";
inline constexpr char kShape[] = "shape";
inline constexpr char kDevice[] = "device";
inline constexpr char kExactType[] = "exact_type";
inline constexpr char kNbytes[] = "nbytes";
}  // namespace tensor

// The timer's description (load's reply "timer").
namespace timer {
inline constexpr char kClock[] = "clock";  // "steady_clock" on the CPU, "cuda_events"
inline constexpr char kFlushBytes[] = "flush_bytes";
inline constexpr char kActivityTrace[] = "activity_trace";  // "cupti", or why there is none
inline constexpr char kQueuedTiming[] = "queued_timing";    // true, or why not
inline constexpr char kUuid[] = "uuid";
inline constexpr char kPciBusId[] = "pci_bus_id";
inline constexpr char kCudaDriverApi[] = "cuda_driver_api";
// CUDA_DEVICE_MAX_CONNECTIONS as the context was made with it (null: unset, the driver's 8).
inline constexpr char kCudaConnections[] = "cuda_connections";
}  // namespace timer

// The activity trace's summary (activity's reply "activity").
namespace activity {
inline constexpr char kWindows[] = "windows";
inline constexpr char kOutsideKernels[] = "outside_kernels";
inline constexpr char kOutsideCopies[] = "outside_copies";
// Of those, records that started inside a window and ended after it (a window ends after a
// device-wide synchronize: only the trace's timestamps can put them there), and by how much.
inline constexpr char kOutsideAtWindowEnd[] = "outside_at_window_end";
inline constexpr char kOutsideOvershootNs[] = "outside_overshoot_ns";  // the largest
// Of those, records that started at most 100 us before an interval of the harness's own device
// work (input copies, poisoning) and ended inside it: the harness's, by its timing.
inline constexpr char kOutsideBeforeHarness[] = "outside_before_harness";
// Up to a few outside records: [name, ns from the window before it began, ns from that window's
// end, ns until the harness's next interval began (null: none after it)]
inline constexpr char kOutsideExamples[] = "outside_examples";
inline constexpr char kStreams[] = "streams";
inline constexpr char kDefaultStream[] = "default_stream";
inline constexpr char kKernelNames[] = "kernel_names";
inline constexpr char kKernelTime[] = "kernel_time";  // the longest kernels: [{name, ns, launches}]
inline constexpr char kKernelName[] = "name";
inline constexpr char kKernelNs[] = "ns";
inline constexpr char kKernelLaunches[] = "launches";
inline constexpr char kKernelTimeTotalNs[] = "kernel_time_total_ns";
inline constexpr char kRotationStreams[] = "rotation_streams";
inline constexpr char kDroppedRecords[] = "dropped_records";
// How late the trace's timestamps ran, measured on the timer's cache flush before each window
// (TraceShift): {"max_ns", "windows", "ambiguous"}. Records were placed after taking it off.
inline constexpr char kTraceShift[] = "trace_shift";
// Records that started inside a window timed with the trace suspended (left out: see summarize).
inline constexpr char kUntracedWindowRecords[] = "untraced_window_records";
}  // namespace activity

// Values of a failed reply's "status".
namespace status {
inline constexpr char kInternalError[] = "internal_error";  // a request the worker cannot serve
inline constexpr char kCompileError[] = "compile_error";    // the candidate's import or ModelNew
inline constexpr char kTaskError[] = "task_error";          // the task's import or Model
inline constexpr char kRuntimeError[] = "runtime_error";    // anything else
}  // namespace status

}  // namespace cudal1::worker_protocol
