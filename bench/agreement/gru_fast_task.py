"""Benchmark (b), agreement: the GRU example's CUDA candidate turned into a task.

The GRU example's reference issues ~21 000 launches per call, so it cannot be queued behind the
timer's hold and that example is timed on the window clock. Here the reference is the candidate
itself (same sizes and inputs as examples/l3_gru_sequence/task.py), so both sides run a few
kernels of ~2.4 ms and are timed on the queued clock: the verdict's candidate time can be held
against the sum of its CUPTI kernel durations for kernels over 1 ms.

  cudal1 eval --task bench/agreement/gru_fast_task.py \
              --candidate examples/l3_gru_sequence/fast.py --device cuda
"""
import importlib.util
import os

_examples = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")


def _load(name, relative):
    spec = importlib.util.spec_from_file_location(name, os.path.join(_examples, relative))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_task = _load("gru_sequence_task", "l3_gru_sequence/task.py")
_fast = _load("gru_sequence_fast", "l3_gru_sequence/fast.py")

batch_size = _task.batch_size
seq_len = _task.seq_len
input_size = _task.input_size
hidden_size = _task.hidden_size
output_size = _task.output_size


class Model(_fast.ModelNew):
    pass


def get_inputs():
    return _task.get_inputs()


def get_init_inputs():
    return _task.get_init_inputs()
