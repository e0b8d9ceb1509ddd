# Containment of warm workers: a worker forked from a zygote shares its parent's import of
# PyTorch, and its siblings are forks of the same process. On its first call this candidate looks
# for everything that sharing could expose: other workers' folders in the spool, processes outside
# its own PID namespace (the zygote, the reference, other candidates), a capability it kept, a
# way to write into the precompiled headers every worker sees. It
# writes into whatever folder it finds and signals whatever process it finds, and answers wrongly
# when it found anything: the verdict is ok only where it found nothing.
import os
import signal

import torch
import torch.nn as nn


def reach():
    found = []
    # The precompiled headers every worker is shown (read-only) count only if it can write there.
    for folder, _, _ in os.walk("/cudal1/pch"):
        try:
            with open(os.path.join(folder, "cudal1-wrote-{{MARKER}}"), "w") as f:
                f.write("x")
            found.append(folder + " (writable)")
        except OSError:
            pass
    for root in ("/cudal1/spool", "/cudal1"):
        try:
            for name in os.listdir(root):
                if name not in ("spool", "inputs", "extensions", "pch"):
                    found.append(os.path.join(root, name))
                    try:
                        with open(os.path.join(root, name, "cudal1-wrote-{{MARKER}}"), "w") as f:
                            f.write("x")
                    except OSError:
                        pass
        except OSError:
            pass
    # Its namespace's first process (bubblewrap's init for a worker started in a sandbox of its
    # own, the worker itself for a forked one) is not another worker.
    mine = {os.getpid(), 1}
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in mine:
            try:
                with open("/proc/%s/stat" % name) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid not in mine:
                found.append("pid %s" % name)
                try:
                    os.kill(int(name), signal.SIGSTOP)
                except OSError:
                    pass
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("CapEff", "CapPrm", "CapBnd", "CapAmb") and int(value, 16) != 0:
                found.append("%s %s" % (key, value.strip()))
    return found


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.found = None

    def forward(self, x):
        if self.found is None:
            self.found = reach()
        out = torch.relu(self.linear(x))
        return out + 1.0 if self.found else out
