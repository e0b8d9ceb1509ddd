#!/usr/bin/env python3
"""How long a process's first CUDA call (its context) takes while the GPU host does what an RL
load makes it do: the diagnostic behind issue 32's 16 s context waits under `bench/rl_load.py`,
where the same call takes 0.37 s on an idle machine (bench/diag/context_contention.py).

    context_under_load.py [--device 0] [--probes 6] [--together 8] [--loaders 4]
                          [--idle 48] [--idle-mib 1024] [--load-device N]
                          [--background-env K=V ...] [--probe-env K=V ...]
                          [--scenarios idle,gpu_busy,alloc_churn,context_churn,cpu_busy]

Per scenario, background processes start and run until the probes are done:
  idle           nothing
  gpu_busy       LOADERS processes multiplying 8192x8192 matrices back to back (time-slicing)
  alloc_churn    LOADERS processes allocating and freeing 2 GiB (cudaMalloc/cudaFree) in a loop
  context_churn  LOADERS loops each starting a process that makes a context, 1 GiB and a few
                 PyTorch kernels (their modules load), then exits (the context torn down)
  cpu_busy       one busy loop per core
  idle_contexts  IDLE processes each holding a context with IDLE_MIB MiB (0: none) and a few
                 kernels loaded, idle (what ready workers, kept references and staged pairs are)
  exit_churn     LOADERS loops each starting a process that makes a context, allocates 8 GiB in
                 512 MiB blocks, then exits (a big worker's teardown)
  cupti_churn    LOADERS loops each starting a process that makes a context and records a few
                 kernels with PyTorch's profiler (CUPTI's activity on and off), then exits
The background runs on --load-device (default: --device; another GPU of the host asks whether
what slows a context is the GPU's or the host's driver). --background-env and --probe-env set
variables in the background's and the probes' environments before they import PyTorch (say
CUDA_DEVICE_MAX_CONNECTIONS=1: one hardware queue, so fewer channels, per context). Then PROBES processes, PyTorch imported beforehand, make their first CUDA call one after another
(latency), and TOGETHER more make theirs at once (throughput: TOGETHER / the slowest). One JSON
line per scenario on stdout.
"""

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time
from unittest import mock

CHURN_CHILD = (
    "import torch\n"
    "x = torch.empty(1 << 30, dtype=torch.uint8, device='cuda:%d')\n"
    "y = torch.randn(512, 512, device='cuda:%d')\n"
    "z = (y @ y).relu().sum() + torch.nn.functional.gelu(y).mean()\n"
    "torch.cuda.synchronize()\n")
EXIT_CHILD = (
    "import torch\n"
    "blocks = [torch.empty(512 << 20, dtype=torch.uint8, device='cuda:%d') for _ in range(16)]\n"
    "torch.cuda.synchronize()\n")
CUPTI_CHILD = (
    "import torch\n"
    "y = torch.randn(256, 256, device='cuda:%d')\n"
    "with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):\n"
    "    for _ in range(4):\n"
    "        y = (y @ y).tanh()\n"
    "    torch.cuda.synchronize()\n")


def loader(kind, device, stop, ready, idle_mib):
    import torch

    if kind == "idle_contexts":
        x = torch.empty(idle_mib << 20, dtype=torch.uint8, device="cuda:%d" % device)
        y = torch.randn(512, 512, device="cuda:%d" % device)
        (y @ y).relu().sum().item()
        ready.put(1)
        stop.wait()
        return
    ready.put(1)
    if kind == "gpu_busy":
        x = torch.randn(8192, 8192, device="cuda:%d" % device)
        while not stop.is_set():
            for _ in range(8):
                x = (x @ x).clamp_(-1, 1)
            torch.cuda.synchronize()
    elif kind == "alloc_churn":
        torch.zeros(1, device="cuda:%d" % device)
        while not stop.is_set():
            t = torch.empty(2 << 30, dtype=torch.uint8, device="cuda:%d" % device)
            del t
            torch.cuda.empty_cache()
    elif kind == "context_churn":
        code = CHURN_CHILD % (device, device)
        while not stop.is_set():
            subprocess.run([sys.executable, "-c", code], check=False)
    elif kind in ("exit_churn", "cupti_churn"):
        code = (EXIT_CHILD if kind == "exit_churn" else CUPTI_CHILD) % device
        while not stop.is_set():
            subprocess.run([sys.executable, "-c", code], check=False, stderr=subprocess.DEVNULL)
    elif kind == "cpu_busy":
        while not stop.is_set():
            pass


def probe(device, go, results, done):
    import torch  # before the start: a fork of the zygote has it already

    go.wait()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    torch.zeros(1, device="cuda:%d" % device)
    torch.cuda.synchronize()
    results.put({"wall_s": time.perf_counter() - wall0, "cpu_s": time.process_time() - cpu0})
    done.wait()


def start_probes(ctx, count, device, results, done):
    gos = [ctx.Event() for _ in range(count)]
    procs = [ctx.Process(target=probe, args=(device, go, results, done)) for go in gos]
    for p in procs:
        p.start()
    return gos, procs


def parse_env(pairs):
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit("expected K=V, got %r" % pair)
        env[key] = value
    return env


def scenario(kind, opts):
    ctx = mp.get_context("spawn")
    stop, done, results, ready = ctx.Event(), ctx.Event(), ctx.Queue(), ctx.Queue()
    loaders = []
    if kind != "idle":
        count = {"cpu_busy": os.cpu_count(), "idle_contexts": opts.idle}.get(kind, opts.loaders)
        loaders = [ctx.Process(target=loader,
                               args=(kind, opts.load_device, stop, ready, opts.idle_mib))
                   for _ in range(count)]
        with mock.patch.dict(os.environ, opts.background_env):
            for p in loaders:
                p.start()
        for _ in loaders:
            ready.get(timeout=300)  # every idle context made before the probes
    with mock.patch.dict(os.environ, opts.probe_env):
        one_by_one, one_procs = start_probes(ctx, opts.probes, opts.device, results, done)
        together, together_procs = start_probes(ctx, opts.together, opts.device, results, done)
    time.sleep(12)  # every probe has imported PyTorch, every loader is under way
    latency = []
    for go in one_by_one:
        go.set()
        latency.append(results.get(timeout=600))
    start = time.perf_counter()
    for go in together:
        go.set()
    batch = [results.get(timeout=600) for _ in together]
    batch_s = time.perf_counter() - start
    done.set()
    stop.set()
    for p in one_procs + together_procs + loaders:
        p.join(timeout=60)
        if p.is_alive():
            p.kill()
    walls = [r["wall_s"] for r in latency]
    return {"scenario": kind, "loaders": len(loaders), "device": opts.device,
            "load_device": opts.load_device,
            "idle_mib": opts.idle_mib if kind == "idle_contexts" else None,
            "background_env": opts.background_env, "probe_env": opts.probe_env,
            "one_by_one_wall_s": {"median": round(statistics.median(walls), 3),
                                  "max": round(max(walls), 3)},
            "one_by_one_cpu_s_median": round(statistics.median(r["cpu_s"] for r in latency), 3),
            "together": len(together), "together_s": round(batch_s, 3),
            "contexts_per_s": round(len(together) / batch_s, 2)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--probes", type=int, default=6)
    parser.add_argument("--together", type=int, default=8)
    parser.add_argument("--loaders", type=int, default=4)
    parser.add_argument("--idle", type=int, default=48, help="processes of idle_contexts")
    parser.add_argument("--idle-mib", type=int, default=1024,
                        help="MiB each idle_contexts process holds")
    parser.add_argument("--load-device", type=int, default=None, help="the background's GPU")
    parser.add_argument("--background-env", action="append", default=[], metavar="K=V")
    parser.add_argument("--probe-env", action="append", default=[], metavar="K=V")
    parser.add_argument("--scenarios", default="idle,gpu_busy,alloc_churn,context_churn,cpu_busy")
    opts = parser.parse_args()
    opts.background_env = parse_env(opts.background_env)
    opts.probe_env = parse_env(opts.probe_env)
    if opts.load_device is None:
        opts.load_device = opts.device
    for kind in opts.scenarios.split(","):
        print(json.dumps(scenario(kind, opts)), flush=True)


if __name__ == "__main__":
    main()
