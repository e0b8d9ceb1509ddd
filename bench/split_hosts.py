"""Hosts on one machine, joined by a Redis queue of the run's own, for bench/rl_load.py (issue 32).
Standard library only.

SplitHosts (--build-host-cpus, "builds where the CPUs are"): the machine's cores are split in two
disjoint sets, as two hosts would have them: on the GPU host's cores a `cudal1 worker --device
DEVICE --builds queue --sandbox on`; on the build host's cores a `cudal1 worker --role build`;
between them a redis-server on the loopback interface, and a build secret made for the run.

QueueWorkers (--queue-workers, "one cudal1 worker per GPU through Redis"): one `cudal1 worker
--device DEVICE` per GPU, each on cores of its own and building its own candidates, as one GPU per
host would be.

`cudal1 serve --queue URL` (the submitter) is then started by rl_load. Each process is pinned with
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


def parse_queue_workers(text, parse_cpus):
    """"cuda:0@0-15;cuda:1@16-31" as [("cuda:0", {0..15}), ("cuda:1", {16..31})]: a worker's device
    and cores. Raises ValueError for a part without both, or for cores two workers share."""
    workers, seen = [], set()
    for part in filter(None, (p.strip() for p in text.split(";"))):
        device, sep, cores = part.partition("@")
        cpus = parse_cpus(cores) if sep else None
        if not device or not cpus:
            raise ValueError("a queue worker is DEVICE@CORES (e.g. cuda:0@0-15), not %r" % part)
        if cpus & seen:
            raise ValueError("queue workers share cores: %r" % part)
        seen |= cpus
        workers.append((device, cpus))
    if not workers:
        raise ValueError("no queue worker in %r" % text)
    return workers


class QueueRun:
    """A redis-server of the run's own and the cudal1 workers started around it."""

    def __init__(self, cudal1, work, redis_server=None):
        self.cudal1, self.work = cudal1, work
        self.redis_server = redis_server or shutil.which("redis-server")
        if not self.redis_server:
            raise SystemExit("a queue topology needs redis-server (--redis-server PATH)")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = "redis://127.0.0.1:%d/0" % self.port
        self.env = dict(os.environ, CUDAL1_BUILD_SECRET=base64.b64encode(os.urandom(24)).decode())
        self.processes = {}
        self.workers = []  # names, in the order they stop

    def _start(self, name, command, cpus):
        log = open(os.path.join(self.work, name + ".log"), "w")
        self.processes[name] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                                preexec_fn=pinned_to(cpus))

    def _start_redis(self, cpus):
        redis_dir = os.path.join(self.work, "redis")
        os.makedirs(redis_dir, exist_ok=True)
        self._start("redis", [self.redis_server, "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
                              redis_dir, "--save", "", "--appendonly", "no"], cpus)
        time.sleep(1)

    def _start_worker(self, name, arguments, cpus):
        self._start(name, [self.cudal1, "worker", "--name", name, "--queue", self.url,
                           "--cache-dir", os.path.join(self.work, name + "-cache")] + arguments, cpus)
        self.workers.append(name)

    def _wait_for_workers(self):
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        while time.monotonic() < deadline:
            status = subprocess.run([self.cudal1, "queue", "status", "--queue", self.url, "--json"],
                                    capture_output=True, text=True, env=self.env)
            if status.returncode == 0 and all('"%s"' % name in status.stdout for name in self.workers):
                return self
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise SystemExit("%s stopped: see %s/%s.log" % (name, self.work, name))
            time.sleep(1)
        raise SystemExit("the workers did not join within %d s (see %s)" % (JOIN_TIMEOUT_S, self.work))

    def stop(self):
        for name in self.workers:
            process = self.processes.get(name)
            if process and process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for name in self.workers:
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


class QueueWorkers(QueueRun):
    def __init__(self, cudal1, work, workers, redis_server=None, worker_args=()):
        super().__init__(cudal1, work, redis_server)
        self.spec = workers  # [(device, cpus)]
        self.worker_args = list(worker_args)  # for every worker (e.g. --keep-references 64)

    def start(self):
        self._start_redis(self.spec[0][1])
        for k, (device, cpus) in enumerate(self.spec):
            # As many evaluations at once as `cudal1 serve` holds on those cores (twice its builds).
            self._start_worker("worker-%d" % k, ["--device", device, "--jobs", str(2 * len(cpus))] + self.worker_args,
                               cpus)
        return self._wait_for_workers()


class SplitHosts(QueueRun):
    def __init__(self, cudal1, work, device, host_cpus, build_cpus, redis_server=None, worker_jobs=0):
        super().__init__(cudal1, work, redis_server)
        self.device = device
        # As many evaluations in flight as `cudal1 serve` holds on the host's cores alone (twice
        # its builds at once, one per core), so that the two topologies differ only in where
        # builds run; worker_jobs sets another number.
        self.worker_jobs = worker_jobs or 2 * len(host_cpus)
        self.host_cpus, self.build_cpus = host_cpus, build_cpus

    def start(self):
        self._start_redis(self.build_cpus)
        self._start_worker("gpu-worker", ["--device", self.device, "--builds", "queue", "--sandbox", "on",
                                          "--jobs", str(self.worker_jobs)], self.host_cpus)
        self._start_worker("builder", ["--role", "build", "--jobs", str(len(self.build_cpus))],
                           self.build_cpus)
        return self._wait_for_workers()
