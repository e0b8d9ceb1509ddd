"""A GPU host and a build host on one machine, for bench/rl_load.py --build-host-cpus (issue 32,
"builds where the CPUs are"). Standard library only.

The machine's cores are split in two disjoint sets, as two hosts would have them: on the GPU
host's cores a `cudal1 worker --device DEVICE --builds queue --sandbox on`; on the build host's
cores a `cudal1 worker --role build`; between them a redis-server of this run's own on the
loopback interface, and a build secret made for the run. `cudal1 serve --queue URL` (the
submitter) is then started on the GPU host's cores by rl_load. Each process is pinned with
sched_setaffinity, which everything it starts (zygotes, workers, compilers) inherits.
"""

import base64
import os
import shutil
import signal
import socket
import subprocess
import time

from serve_load import pinned_to

JOIN_TIMEOUT_S = 180


class SplitHosts:
    def __init__(self, cudal1, work, device, host_cpus, build_cpus, redis_server=None, worker_jobs=0):
        self.cudal1, self.work, self.device = cudal1, work, device
        # As many evaluations in flight as `cudal1 serve` holds on the host's cores alone (twice
        # its builds at once, one per core), so that the two topologies differ only in where
        # builds run; worker_jobs sets another number.
        self.worker_jobs = worker_jobs or 2 * len(host_cpus)
        self.host_cpus, self.build_cpus = host_cpus, build_cpus
        self.redis_server = redis_server or shutil.which("redis-server")
        if not self.redis_server:
            raise SystemExit("--build-host-cpus needs redis-server (--redis-server PATH)")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = "redis://127.0.0.1:%d/0" % self.port
        self.env = dict(os.environ, CUDAL1_BUILD_SECRET=base64.b64encode(os.urandom(24)).decode())
        self.processes = {}

    def _start(self, name, command, cpus):
        log = open(os.path.join(self.work, name + ".log"), "w")
        self.processes[name] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                                preexec_fn=pinned_to(cpus))

    def start(self):
        redis_dir = os.path.join(self.work, "redis")
        os.makedirs(redis_dir, exist_ok=True)
        self._start("redis", [self.redis_server, "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
                              redis_dir, "--save", "", "--appendonly", "no"], self.build_cpus)
        time.sleep(1)
        common = ["--queue", self.url, "--jobs", str(len(self.build_cpus))]
        self._start("builder", [self.cudal1, "worker", "--role", "build", "--name", "builder",
                                "--cache-dir", os.path.join(self.work, "builder-cache")] + common,
                    self.build_cpus)
        self._start("gpu-worker", [self.cudal1, "worker", "--device", self.device, "--builds", "queue",
                                   "--sandbox", "on", "--name", "gpu-worker", "--jobs", str(self.worker_jobs),
                                   "--queue", self.url, "--cache-dir", os.path.join(self.work, "worker-cache")],
                    self.host_cpus)
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        while time.monotonic() < deadline:
            status = subprocess.run([self.cudal1, "queue", "status", "--queue", self.url, "--json"],
                                    capture_output=True, text=True, env=self.env)
            if status.returncode == 0 and '"builder"' in status.stdout and '"gpu-worker"' in status.stdout:
                return self
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise SystemExit("%s stopped: see %s/%s.log" % (name, self.work, name))
            time.sleep(1)
        raise SystemExit("the workers did not join within %d s (see %s)" % (JOIN_TIMEOUT_S, self.work))

    def stop(self):
        for name in ("gpu-worker", "builder"):
            process = self.processes.get(name)
            if process and process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for name in ("gpu-worker", "builder"):
            process = self.processes.get(name)
            if process:
                try:
                    process.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        if "redis" in self.processes:
            self.processes["redis"].kill()
            self.processes["redis"].wait()
