"""What the cudal1 worker binds before any candidate code runs (part of its host module).

The guards capture what a candidate must not change and report later what it did; the harness
is the functions the worker applies to user tensors, bound to PyTorch's own implementations so
that a candidate replacing torch attributes cannot change what they do.
"""

import sys

# --- Guards: what a candidate must not change ---------------------------------------------------
# Timing, synchronisation, comparison and input-generation entry points whose replacement would
# change what a harness measures or compares. cudal1 does not use most of them (its timer and its
# comparisons are C++), but a candidate that replaces one is trying to, and is flagged.
_WATCHED = (
    "torch.Tensor", "torch.nn.Module", "torch.nn.Module.__call__", "torch.nn.Module._call_impl",
    "torch.nn.Module.parameters", "torch.nn.Module.buffers",
    "torch.cuda.Event", "torch.cuda.Event.record", "torch.cuda.Event.elapsed_time",
    "torch.cuda.Event.synchronize", "torch.cuda.synchronize", "torch.cuda.Stream",
    "torch.cuda.current_stream", "torch.cuda.default_stream", "torch.cuda.stream",
    "torch.allclose", "torch.isclose", "torch.equal", "torch.testing.assert_close",
    "torch.Tensor.__eq__", "torch.Tensor.equal", "torch.Tensor.allclose", "torch.Tensor.data_ptr",
    "torch.Tensor.clone", "torch.Tensor.copy_", "torch.Tensor.to", "torch.Tensor.cpu",
    "torch.Tensor.detach", "torch.Tensor.fill_", "torch.Tensor.__dlpack__",
    "torch.utils.dlpack.to_dlpack", "torch.manual_seed", "torch.randn", "torch.rand",
    "torch.randint", "torch.empty", "torch.zeros", "torch.ones",
    "time.perf_counter", "time.perf_counter_ns", "time.time", "time.monotonic", "time.sleep",
    "gc.collect", "gc.disable", "gc.enable", "random.seed", "threading.Thread",
    "threading.enumerate", "builtins.id", "builtins.isinstance", "builtins.type",
)
_SIMPLE = (bool, int, float, str, bytes, type(None))


def _is_simple(value):
    if isinstance(value, _SIMPLE):
        return True
    if isinstance(value, (tuple, list)):
        return all(_is_simple(v) for v in value)
    return False


def capture_guards(task_module):
    """Captures the watched objects, the task module's globals and the precision settings.

    Returns a function that reports what changed since. It holds its own references to everything
    it needs, so rebinding module attributes cannot blind it.
    """
    import builtins
    import torch

    modules = sys.modules
    missing = object()
    vars_of, len_of, isinstance_of, sorted_of = builtins.vars, builtins.len, builtins.isinstance, builtins.sorted

    def resolve(path):
        parts = path.split(".")
        obj = modules.get(parts[0], missing)
        for name in parts[1:]:
            if obj is missing:
                return missing
            if isinstance_of(obj, type):
                # Through the class dictionaries: getattr would build a new bound object for
                # class methods and could be redirected by a metaclass.
                found = missing
                for klass in obj.__mro__:
                    namespace = vars_of(klass)
                    if name in namespace:
                        found = namespace[name]
                        break
                obj = found
            else:
                obj = vars_of(obj).get(name, missing) if hasattr(obj, "__dict__") else missing
        return obj

    watched = {path: resolve(path) for path in _WATCHED}
    watched = {path: obj for path, obj in watched.items() if obj is not missing}
    task_globals = vars_of(task_module)
    task_snapshot = {}
    for name, value in list(task_globals.items()):
        if name.startswith("__"):
            continue
        task_snapshot[name] = ("value", value) if _is_simple(value) else ("object", value)

    C = torch._C
    readers = {}
    for name in ("_get_cublas_allow_tf32", "_get_cudnn_allow_tf32", "_get_float32_matmul_precision",
                 "_get_cublas_allow_fp16_reduced_precision_reduction",
                 "_get_cublas_allow_bf16_reduced_precision_reduction", "is_autocast_enabled",
                 "is_autocast_cpu_enabled"):
        reader = getattr(C, name, None)
        if reader is not None:
            readers[name.lstrip("_").replace("get_", "")] = reader

    def precision_state():
        state = {}
        for name, reader in readers.items():
            try:
                state[name] = reader()
            except Exception:  # noqa: BLE001 - a reader that needs arguments on this version
                pass
        return state

    precision_before = precision_state()

    def check():
        patched = [path for path, obj in watched.items() if resolve(path) is not obj]
        task_changes = []
        for name, (kind, value) in task_snapshot.items():
            now = task_globals.get(name, missing)
            if kind == "value":
                same = now is not missing and type(now) is type(value) and now == value
            else:
                same = now is value
            if not same:
                task_changes.append(name)
        precision = {}
        now_state = precision_state()
        for name, value in now_state.items():
            if precision_before.get(name) != value:
                precision[name] = [str(precision_before.get(name)), str(value)]
        return {"patched": sorted_of(patched), "task_globals_changed": sorted_of(task_changes),
                "precision_changed": precision}

    return check


def capture_harness():
    """Functions the worker uses on user tensors, bound now to PyTorch's own implementations so a
    candidate that later replaces torch attributes cannot change what they do."""
    import math
    import torch

    tensor_type = torch.Tensor
    fill_, clone = torch.Tensor.fill_, torch.Tensor.clone
    is_floating_point, is_complex = torch.Tensor.is_floating_point, torch.Tensor.is_complex
    data_ptr, stride, size = torch.Tensor.data_ptr, torch.Tensor.stride, torch.Tensor.size
    element_size, numel = torch.Tensor.element_size, torch.Tensor.numel
    device_of, dtype_of = torch.Tensor.device.__get__, torch.Tensor.dtype.__get__
    parameters, buffers = torch.nn.Module.parameters, torch.nn.Module.buffers
    bool_dtype, nan = torch.bool, math.nan
    isinstance_, list_, zip_ = isinstance, list, zip

    def poison(values):
        """Overwrites tensors so that memory reused without being recomputed is visibly wrong."""
        for t in values:
            if not isinstance_(t, tensor_type) or numel(t) == 0:
                continue
            if is_floating_point(t) or is_complex(t):
                fill_(t, nan)
            elif dtype_of(t) is bool_dtype:
                fill_(t, True)
            else:
                fill_(t, 90)

    def fresh(values):
        """Copies of an input set at newly allocated addresses."""
        return list_(clone(v) if isinstance_(v, tensor_type) else v for v in values)

    def memory_range(t):
        """(device, first byte, end byte, dense) of the memory a tensor view touches."""
        device = device_of(t)
        begin = data_ptr(t)
        count = numel(t)
        width = element_size(t)
        if count == 0:
            return (str(device), begin, begin, True)
        span = 1
        for extent, step in zip_(size(t), stride(t)):
            span += (extent - 1) * step
        return (str(device), begin, begin + span * width, span >= count)

    def model_tensors(model):
        return list_(parameters(model)) + list_(buffers(model))

    take, randint, generator, to = torch.take, torch.randint, torch.Generator, torch.Tensor.to

    def subset(values, seed, count):
        """[(elements, full shape)]: `count` elements of each tensor at positions drawn from `seed`
        (row-major, with repeats) on the CPU, so the same in every process for the same seed and
        shape whatever the tensor's device; a tensor of `count` elements or fewer, or every
        tensor when `count` is 0, whole."""
        out = []
        for t in values:
            n = numel(t)
            if count == 0 or n <= count:
                out.append((t, list_(size(t))))
                continue
            g = generator()
            g.manual_seed(seed % (1 << 63))
            positions = to(randint(0, n, (count,), generator=g), device_of(t))
            out.append((take(t, positions), list_(size(t))))
        return out

    cuda = torch.cuda
    set_stream, external_stream, current_stream = (
        cuda.set_stream, cuda.ExternalStream, cuda.current_stream)
    device_type = torch.device

    def streams(handles, device):
        """Streams made by the worker's timer (CUstream handles) as PyTorch's streams."""
        return list_(external_stream(h, device=device_type(device)) for h in handles)

    def current(device):
        return current_stream(device_type(device))

    harness = {"poison": poison, "fresh": fresh, "memory_range": memory_range,
               "model_tensors": model_tensors, "subset": subset, "streams": streams,
               "current_stream": current, "set_stream": set_stream}
    harness.update(_capture_hiding(torch))
    return harness


def _capture_hiding(torch):
    """The harness's hide and reveal (see capture_harness), bound when it is captured."""
    tensor_type, clone, to = torch.Tensor, torch.Tensor.clone, torch.Tensor.to
    size, dtype_of = torch.Tensor.size, torch.Tensor.dtype.__get__
    isinstance_, list_ = isinstance, list
    uint8, strided = torch.uint8, torch.strided
    frombuffer, empty = torch.frombuffer, torch.empty
    contiguous, is_contiguous = torch.Tensor.contiguous, torch.Tensor.is_contiguous
    view, reshape, numpy_of = torch.Tensor.view, torch.Tensor.reshape, torch.Tensor.numpy
    requires_grad_of, layout_of = torch.Tensor.requires_grad.__get__, torch.Tensor.layout.__get__
    dtypes = {str(d): d for d in vars(torch).values() if isinstance(d, torch.dtype)}
    type_, str_, bytearray_, len_ = type, str, bytearray, len

    def hide(values):
        """An input set as bytearrays, shapes and plain values, for the worker to keep: the
        garbage collector does not track bytearrays, so a candidate that searches its process
        for input tensors to compute answers ahead finds none of these. None when a tensor
        cannot be kept so (a subclass, sparse or not contiguous, requiring grad, a dtype without
        bytes): the worker then keeps the tensors themselves."""
        out = []
        for v in values:
            if not isinstance_(v, tensor_type):
                out.append((False, v, "", []))
                continue
            name = str_(dtype_of(v))
            if (type_(v) is not tensor_type or requires_grad_of(v) or layout_of(v) is not strided
                    or not is_contiguous(v) or name not in dtypes):
                return None
            try:
                flat = view(reshape(contiguous(to(v, "cpu")), (-1,)), uint8)
                out.append((True, bytearray_(numpy_of(flat)), name, list_(size(v))))
            except (RuntimeError, TypeError):  # a dtype this version cannot view as bytes
                return None
        return out

    def reveal(data, name, shape, device):
        """A tensor kept by hide(), at newly allocated memory on `device` (one copy, as fresh())."""
        dtype = dtypes[name]
        if len_(data) == 0:
            return empty(shape, dtype=dtype, device=device)
        t = reshape(view(frombuffer(data, dtype=uint8), dtype), shape)
        return clone(t) if str_(device) == "cpu" else to(t, device)

    return {"hide": hide, "reveal": reveal}
