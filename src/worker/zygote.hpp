// The zygote: a worker process that imports PyTorch once and then forks serving workers on
// request, each of which runs exactly one role of one evaluation and is then discarded.
//
// It forks before any CUDA call and before PyTorch's thread pools start: each forked worker
// creates its own CUDA context and threads, as a freshly started worker does. Inside a sandbox a
// forked worker first makes its own namespaces (mount, PID, IPC), sees only its own folder of the
// spool, a fresh /tmp and /dev/shm, and gives up every capability (and, where the zygote runs as
// root, becomes a user of its own) before it reads its first request. docs/evaluation.md
// ("Warm workers") says what is shared and why that is safe.
#pragma once

#include "python_runtime.hpp"

namespace cudal1::worker {

// Serves spawn requests on `control_fd` (cudal1/worker/protocol.hpp, namespace fork) until it
// closes. Returns the zygote's exit code; in a forked worker it does not return.
int run_zygote(PythonRuntime& runtime, int control_fd);

}  // namespace cudal1::worker
