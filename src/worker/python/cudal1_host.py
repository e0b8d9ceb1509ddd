"""Python side of the cudal1 worker.

The worker is a C++ program; this module is compiled into it and run in its embedded interpreter
before any task or candidate code is imported. It holds only what is naturally Python: importing
a file as a module, seeding the random generators, calling get_inputs()/constructors and moving
results to a device. Every decision (comparisons, timings, digests) is made in C++ or in the
orchestrator process; nothing here is trusted after the candidate has been imported.
"""

import ast
import importlib.util
import random
import sys
import traceback

_MAX_TRACEBACK_CHARS = 6000


def inspect_source(path):
    """Syntax check plus the top-level names a file defines, without running it."""
    with open(path, "rb") as handle:
        source = handle.read()
    try:
        tree = compile(source, path, "exec", ast.PyCF_ONLY_AST)
        compile(tree, path, "exec")
    except SyntaxError as error:
        return {
            "ok": False,
            "error": "%s: %s" % (type(error).__name__, error.msg),
            "line": error.lineno,
            "column": error.offset,
        }
    except (ValueError, UnicodeDecodeError) as error:
        return {"ok": False, "error": str(error), "line": None, "column": None}

    classes, functions, assignments = [], [], []

    def visit(body):
        for node in body:
            if isinstance(node, ast.ClassDef):
                classes.append(node.name)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):
                            assignments.append(name.id)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
                visit(getattr(node, "finalbody", []))

    visit(tree.body)
    return {
        "ok": True,
        "classes": classes,
        "functions": functions,
        "assignments": sorted(set(assignments)),
        "uses_load_inline": "load_inline" in source.decode("utf-8", "replace"),
    }


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def seed_everything(seed):
    import torch

    seed = int(seed) % (2**63)
    random.seed(seed)
    torch.manual_seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed % (2**32))


def to_device(value, device):
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    return value


def make_inputs(get_inputs, seed, device):
    seed_everything(seed)
    inputs = get_inputs()
    if not isinstance(inputs, (list, tuple)):
        raise TypeError("get_inputs() must return a list or tuple, got %s" % type(inputs).__name__)
    return [to_device(v, device) for v in inputs]


def make_init_args(get_init_inputs, seed):
    seed_everything(seed)
    args = get_init_inputs()
    if not isinstance(args, (list, tuple)):
        raise TypeError("get_init_inputs() must return a list or tuple, got %s" % type(args).__name__)
    return list(args)


def build_model(cls, init_args, seed, device):
    seed_everything(seed)
    model = cls(*init_args)
    return model.to(device)


def flatten_outputs(value):
    """Tensors of a forward's result, in order; Python numbers become 0-d tensors."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        out = []
        for item in value:
            out.extend(flatten_outputs(item))
        return out
    if isinstance(value, (bool, int, float)):
        return [torch.tensor(value)]
    raise TypeError("forward returned %s; expected tensors" % type(value).__name__)


def describe_exception(error, trace=None):
    trace = trace if trace is not None else error.__traceback__
    text = "".join(traceback.format_exception(type(error), error, trace))
    if len(text) > _MAX_TRACEBACK_CHARS:
        text = text[:1000] + "\n...\n" + text[-(_MAX_TRACEBACK_CHARS - 1000):]
    return "%s: %s" % (type(error).__name__, error), text


def device_info(device):
    import torch

    if device == "cpu":
        return {"type": "cpu", "name": "cpu"}
    index = torch.device(device).index or 0
    props = torch.cuda.get_device_properties(index)
    return {
        "type": "cuda",
        "name": props.name,
        "capability": "%d.%d" % (props.major, props.minor),
        "total_memory": props.total_memory,
        "sm_count": props.multi_processor_count,
    }


def toolchain():
    """What a compiled candidate depends on: a change to any of these invalidates cached builds."""
    import platform
    import subprocess

    import torch

    info = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "torch_cuda": getattr(torch.version, "cuda", None),
        "cuda_available": torch.cuda.is_available(),
        "platform": platform.platform(),
    }
    try:
        info["cxx"] = subprocess.run(["c++", "--version"], capture_output=True, text=True,
                                     timeout=30).stdout.splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        info["cxx"] = None
    if torch.cuda.is_available():
        info["capabilities"] = sorted({"%d.%d" % torch.cuda.get_device_capability(i)
                                       for i in range(torch.cuda.device_count())})
        try:
            from torch.utils.cpp_extension import CUDA_HOME
            nvcc = subprocess.run([CUDA_HOME + "/bin/nvcc", "--version"], capture_output=True,
                                  text=True, timeout=30).stdout.strip().splitlines()
            info["nvcc"] = nvcc[-1] if nvcc else None
        except (OSError, TypeError, subprocess.SubprocessError):
            info["nvcc"] = None
    return info
