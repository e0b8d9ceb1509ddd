"""Checkpoints of a training run, and resuming from them exactly.

    OUT/checkpoints/step-00000010/adapter/      the LoRA adapter in the model library's format
                                  state.pt      trainable tensors, optimizer, step, RNG states,
                                                the run's id and the stage
                                  trainer.json  the same facts for people (step, stage, metrics)
    OUT/checkpoints/latest                      the name of the newest complete checkpoint

A checkpoint is written under a temporary name and renamed when complete, and `latest` is
replaced after that, so a run killed while saving resumes from the previous checkpoint. The
data order is a function of (seed, step), so the step and the RNG states are all a resumed run
needs to continue as the uninterrupted run would have.
"""

import json
import os
import random
import shutil

import torch


def rng_state():
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    try:
        import numpy

        state["numpy"] = numpy.random.get_state()
    except ImportError:
        pass
    return state


def set_rng_state(state):
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if "numpy" in state:
        import numpy

        numpy.random.set_state(state["numpy"])


def checkpoint_dir(out_dir):
    return os.path.join(out_dir, "checkpoints")


def _write_atomically(path, text):
    partial = path + ".partial"
    with open(partial, "w") as f:
        f.write(text)
    os.replace(partial, path)


def save(out_dir, step, policy, optimizer, stage, run_id, metrics=None, keep=3):
    """Writes the checkpoint of `step` (steps done) and points `latest` at it; keeps the newest
    `keep` checkpoints. Returns its directory."""
    root = checkpoint_dir(out_dir)
    name = f"step-{step:08d}"
    final, partial = os.path.join(root, name), os.path.join(root, name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    os.makedirs(partial)
    policy.save_adapter(os.path.join(partial, "adapter"))
    torch.save({"step": step, "stage": stage, "run_id": run_id, "trainable": policy.trainable_state(),
                "optimizer": optimizer.state_dict(), "rng": rng_state()}, os.path.join(partial, "state.pt"))
    with open(os.path.join(partial, "trainer.json"), "w") as f:
        json.dump({"step": step, "stage": stage, "run_id": run_id, "model": policy.describe(),
                   "metrics": metrics or {}}, f, indent=1, default=str)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(partial, final)
    _write_atomically(os.path.join(root, "latest"), name + "\n")
    _prune(root, keep, name)
    return final


def _prune(root, keep, newest):
    names = sorted(n for n in os.listdir(root) if n.startswith("step-") and not n.endswith(".partial"))
    for old in names[:-keep] if keep > 0 else []:
        if old != newest:
            shutil.rmtree(os.path.join(root, old), ignore_errors=True)


def latest(out_dir):
    """The newest complete checkpoint's directory, or None."""
    pointer = os.path.join(checkpoint_dir(out_dir), "latest")
    if not os.path.exists(pointer):
        return None
    with open(pointer) as f:
        path = os.path.join(checkpoint_dir(out_dir), f.read().strip())
    return path if os.path.exists(os.path.join(path, "state.pt")) else None


def load(path, policy, optimizer, stage):
    """Restores the adapter, optimizer and RNG states of a checkpoint directory. Returns its
    state (step, run_id, ...)."""
    state = torch.load(os.path.join(path, "state.pt"), map_location="cpu", weights_only=False)
    if state["stage"] != stage:
        raise ValueError(f"{path} is a checkpoint of '{state['stage']}', not of '{stage}': "
                         f"start {stage} from it with --init-adapter {os.path.join(path, 'adapter')}")
    policy.load_trainable_state(state["trainable"])
    optimizer.load_state_dict(state["optimizer"])
    set_rng_state(state["rng"])
    return state
