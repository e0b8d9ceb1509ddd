"""Where a machine's CPU goes, by kind of process (issue 32). Standard library only.

ProcessCpu samples /proc every `period` seconds and keeps, per process (pid and start time, so a
reused pid is a new process), its kind and the CPU seconds it had used when last seen. A process
that ends between two samples loses at most one period of its CPU; short-lived compiler processes
are the ones that lose most, so the build's own accounting (the verdicts' build_cpu_s) stays the
number for builds. Kinds:

  serve              the cudal1 process
  zygote             cudal1-worker zygote (one import of PyTorch, forks workers)
  worker_forked      a worker forked by a zygote (its sandbox's bubblewrap included)
  worker_started     cudal1-worker serve (a worker started on its own)
  compilers          cc1plus, nvcc, cicc, ptxas, ld ... and the Python of a build
  other              everything else (the load's own clients among them)

summary() gives per kind the CPU seconds, the processes seen and the median share of a core each
used over the time it was seen (near 1.0 for a process that never sleeps).
"""

import os
import statistics
import time

from serve_load import Sampler

COMPILERS = {"cc1plus", "cc1", "nvcc", "cicc", "ptxas", "ld", "as", "collect2", "g++", "c++", "gcc",
             "fatbinary", "nvlink", "cudafe++", "ninja", "x86_64-linux-gnu-g++", "x86_64-linux-gnu-gcc", "ld.bfd",
             "ld.gold"}
TICK = os.sysconf("SC_CLK_TCK")


def machine_cpu_seconds(cpus=None):
    """The machine's busy CPU time in seconds, from /proc/stat: user, nice, system, irq and
    softirq (steal is another guest's; guest time is inside user already); of every core, or of
    the cores in `cpus` (a set of core numbers) only."""
    total = 0
    with open("/proc/stat") as f:
        for line in f:
            if not line.startswith("cpu"):
                break
            name, *fields = line.split()
            if (cpus is None) != (name == "cpu"):
                continue
            if cpus is not None and int(name[3:]) not in cpus:
                continue
            user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[:7])
            total += user + nice + system + irq + softirq
    return total / TICK


def parse_cpus(text):
    """"0-15,32" as {0, ..., 15, 32}; None for an empty text."""
    if not text:
        return None
    cpus = set()
    for part in text.split(","):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def read_processes():
    """{pid: (comm, ppid, start_ticks, cpu_s, argv)} of every process readable now."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                text = f.read()
            with open("/proc/%s/cmdline" % name, "rb") as f:
                argv = f.read().split(b"\0")[:3]
        except OSError:
            continue
        comm = text[text.index("(") + 1:text.rindex(")")]
        fields = text[text.rindex(")") + 2:].split()
        out[int(name)] = (comm, int(fields[1]), int(fields[19]), (int(fields[11]) + int(fields[12])) / TICK,
                          [a.decode(errors="replace") for a in argv])
    return out


def kind_of(pid, processes):
    comm, ppid, _, _, argv = processes[pid]
    base = os.path.basename(argv[0]) if argv and argv[0] else comm
    mode = argv[1] if len(argv) > 1 else ""
    if base == "cudal1" and mode == "serve":
        return "serve"
    if comm in COMPILERS or base in COMPILERS:
        return "compilers"
    if base == "cudal1-worker" and mode == "serve":
        return "worker_started"
    # A zygote's forks keep its command line; a fork sits below a zygote (through its bubblewrap).
    seen, parent = 0, ppid
    while parent in processes and seen < 8:
        p_argv = processes[parent][4]
        if p_argv and os.path.basename(p_argv[0]) == "cudal1-worker" and p_argv[1:2] == ["zygote"]:
            return "worker_forked"
        if p_argv and os.path.basename(p_argv[0]) == "cudal1-worker" and p_argv[1:2] == ["serve"]:
            return "compilers"  # a build's Python and tools below a build worker
        parent, seen = processes[parent][1], seen + 1
    if base == "cudal1-worker" and mode == "zygote":
        return "zygote"
    return "other"


class ProcessCpu:
    def __init__(self, period=0.5):
        self.period, self.seen = period, {}
        self.begin = time.time()
        # serve_load's periodic thread; sample() keeps its own records and gives it none.
        self.sampler = Sampler(self.sample, period)

    def start(self):
        self.sampler.start()

    def sample(self):
        now, processes = time.time(), read_processes()
        for pid, (comm, _, start, cpu, _) in processes.items():
            key = (pid, start)
            if key not in self.seen:
                # A process running when the sampling began counts from then on.
                self.seen[key] = {"kind": kind_of(pid, processes), "comm": comm, "first": now, "last": now,
                                  "cpu0": cpu if now - self.begin < self.period else 0.0, "cpu": cpu}
            else:
                entry = self.seen[key]
                entry["last"], entry["cpu"] = now, cpu
                if entry["kind"] == "other":  # a fork's parents may show after it
                    entry["kind"] = kind_of(pid, processes)

    def stop(self):
        self.sampler.done.set()
        self.sampler.join()
        self.sample()

    def summary(self):
        kinds = {}
        for entry in self.seen.values():
            used = entry["cpu"] - entry["cpu0"]
            k = kinds.setdefault(entry["kind"], {"cpu_s": 0.0, "processes": 0, "shares": []})
            k["cpu_s"] += used
            k["processes"] += 1
            lived = entry["last"] - entry["first"]
            if lived >= 2.0:
                k["shares"].append(used / lived)
        out = {}
        for kind, k in sorted(kinds.items(), key=lambda kv: -kv[1]["cpu_s"]):
            out[kind] = {"cpu_s": round(k["cpu_s"], 1), "processes": k["processes"],
                         "core_share_median": round(statistics.median(k["shares"]), 2) if k["shares"] else None}
        return out
