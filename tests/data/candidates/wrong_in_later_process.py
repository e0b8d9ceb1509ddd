# Correct in the first worker process that runs it, zeros in any process that runs it later: an
# evaluation with timing rounds in fresh processes (started one after another or all at once)
# must check the later rounds' outputs too. The processes share a marker file named after their
# parent (the cudal1 process); the first call of a process decides, and a later process removes
# the marker. Sandboxed processes share no /tmp: tests/cli/cases/timing_rounds.json runs it
# with --sandbox off.
import os

import torch
import torch.nn as nn

# /tmp itself: each worker's TMPDIR is a directory of its own.
_MARK = os.path.join("/tmp", "cudal1-test-later-process-%d" % os.getppid())


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.later = None

    def forward(self, x):
        if self.later is None:
            with open(_MARK, "a") as mark:
                mark.write("%d\n" % os.getpid())
            with open(_MARK) as mark:
                self.later = len(set(mark.read().split())) > 1
            if self.later:
                os.remove(_MARK)
        y = torch.relu(x * (2.0 * self.scale) + 2.0)
        return torch.zeros_like(y) if self.later else y
