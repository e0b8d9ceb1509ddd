# Containment: computes the right answer (as fast as the reference), and leaves a detached
# process (a new session, outside the worker's process group) that finds the other workers of
# its evaluation in /proc (its worker's siblings) and stops and continues them in a tight loop.
# Without a PID namespace this made a 1.2x candidate `ok` at 3.9-4.7x: the reference's timed
# calls ran while it was paused.
import os
import subprocess
import sys

import torch
import torch.nn as nn

PAUSER = r"""
import os, signal, sys, time
worker, parent = int(sys.argv[1]), int(sys.argv[2])
def others():
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == worker:
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and parent > 1:
            yield int(name)
end = time.time() + 60
while time.time() < end:
    victims = list(others())
    for pid in victims:
        try: os.kill(pid, signal.SIGSTOP)
        except OSError: pass
    time.sleep(0.004)
    for pid in victims:
        try: os.kill(pid, signal.SIGCONT)
        except OSError: pass
    time.sleep(0.001)
"""


def python():
    for candidate in (sys.executable, "/usr/bin/python3"):
        if candidate and os.path.exists(candidate) and "worker" not in candidate:
            return candidate
    return "python3"


try:
    subprocess.Popen([python(), "-c", PAUSER, str(os.getpid()), str(os.getppid()), "{{MARKER}}"],
                     start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
except OSError:
    pass


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))
