"""Helpers shared by the diagnostics in bench/diag (run from the repository root)."""
import glob, importlib.util, json, os, tempfile


def load(path, name):
    """Imports a task or candidate file as a module named `name`."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def queued_call_ms(model, inputs, start, stop, stream=None):
    """Device ms of one call of `model` queued behind a spin kernel (about 0.5 ms, during which the
    host queues the call), between CUDA events `start` and `stop` on `stream` (default: the
    current one); waits for every stream after."""
    import torch

    torch.cuda.synchronize()
    s = torch.cuda.current_stream() if stream is None else stream
    with torch.cuda.stream(s), torch.no_grad():
        torch.cuda._sleep(1_000_000)
        start.record(s)
        model(*inputs)
        stop.record(s)
    torch.cuda.synchronize()
    return start.elapsed_time(stop)


def suite_tasks_parser(pairs):
    """An argument parser for SUITE_DIR SOLUTIONS.jsonl LEVEL/ID [...] [--pairs K] [--samples N]."""
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("suite")
    p.add_argument("solutions")
    p.add_argument("tasks", nargs="+", help="LEVEL/ID, e.g. 1/100")
    p.add_argument("--pairs", type=int, default=pairs, help="fresh pairs of processes per task")
    p.add_argument("--samples", type=int, default=300)
    return p


def load_suite_task(suite, solutions, task):
    """The reference module and the candidate module of one task ("LEVEL/ID") of a cudal1 bench
    suite directory and its solutions file (lines with level_id, task_id, custom_code)."""
    level, tid = (int(x) for x in task.split("/"))
    [task_file] = glob.glob(os.path.join(suite, f"level{level}", f"{tid}_*.py"))
    rows = (json.loads(line) for line in open(solutions))
    code = next(r["custom_code"] for r in rows if r["level_id"] == level and r["task_id"] == tid)
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(code)
    return load(task_file, "task"), load(f.name, "cand")
