# Poison job for the queue tests (tests/queue/queue_test.py, poison_job): importing it kills the
# process that started this one, the `cudal1 worker`, as a candidate that brings its host down
# would (only without a sandbox: the test starts its workers with --sandbox off). Never evaluate
# it with a local `cudal1 bench` or `cudal1 eval --sandbox off`: it would kill them.
import os
import signal

import torch.nn as nn

os.kill(os.getppid(), signal.SIGKILL)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()

    def forward(self, x):
        return x
