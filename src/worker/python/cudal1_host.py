"""Python side of the cudal1 worker.

The worker is a C++ program; this module is compiled into it and run in its embedded interpreter
before any task or candidate code is imported. It holds only what is naturally Python: importing
a file as a module, seeding the random generators, calling get_inputs()/constructors and moving
results to a device. Every decision (comparisons, timings, digests) is made in C++ or in the
orchestrator process; nothing here is trusted after the candidate has been imported.

The build joins this file, capture.py (what is bound before user code: the guards and the
harness), source_scan.py (static inspection of files), flop_count.py (the arithmetic a call
does, and the device's matmul throughput), precompiled_header.py (PyTorch's extension header,
compiled once per toolchain) and extension_builds.py (a constructor's builds, made once per
candidate; CUDA sources built with a lighter torch/extension.h) into the one module cudal1_host.
"""

import gc
import importlib.util
import os
import random
import struct
import sys
import traceback

_MAX_TRACEBACK_CHARS = 6000


def preload():
    """What a zygote does once for every worker it forks: PyTorch's import, and a first call
    under a dispatch mode. Nothing here may start a thread pool or ask the CUDA runtime anything
    (a fork of a parent that asked could not use CUDA: PyTorch marks it a "bad fork").
    PyTorch's extension builder is left to the forks: its import asks whether CUDA is available
    (on PyTorch 2.11, through the runtime)."""
    import torch  # noqa: F401

    _warm_dispatch_mode()


def _warm_dispatch_mode():
    """PyTorch 2.11 spends about 4 CPU-s the first time a process calls anything under a
    TorchDispatchMode, whatever the call (H100 host, bench/diag/dispatch_mode_cost.py), and every
    reference worker's first call is counted under one (flop_count.py): on an RL load that was
    most of the references' CPU. One call under the counter here, on one element of the CPU
    (no thread pool, no CUDA), leaves that paid in every fork: its first counted call on the GPU
    then took 0.013 CPU-s. A failure here only leaves the cost to the forks."""
    try:
        import torch

        with _counter_class()():
            torch.zeros(1).add_(1)
    except Exception:  # noqa: BLE001 - an optimisation: the forks count as before
        pass


def fork_safe():
    """In a fork of the zygote: whether PyTorch lets it use CUDA (a parent that asked the CUDA
    runtime anything leaves its forks marked unable to)."""
    import torch

    check = getattr(torch._C, "_cuda_isInBadFork", None)
    return check is None or not check()


def enter_worker(environment, directory):
    """A forked worker's own variables (its build folder, home, architectures) and working
    directory, set before any task or candidate code runs, as a fresh start would have them."""
    for key, value in environment.items():
        os.environ[key] = value
    if directory:
        os.chdir(directory)


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _built_libraries():
    """Modification times of the shared libraries under TORCH_EXTENSIONS_DIR."""
    import glob

    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    if not root:
        return {}
    out = {}
    for path in glob.glob(os.path.join(root, "*", "*.so")):
        try:
            out[path] = os.stat(path).st_mtime_ns
        except OSError:
            pass
    return out


def _mangled_identifier(text):
    """The kernel's own name from a mangled name's start: "Z19ln_normalize_kernelILb1EE..." and
    "ZN3foo5innerEPi" give ln_normalize_kernel and inner; an unmangled (extern "C") name is
    itself."""
    if not text.startswith("Z"):
        return text
    i = 1
    nested = text[i:i + 1] == "N"
    i += nested
    last = None
    while i < len(text) and text[i].isdigit():
        j = i
        while j < len(text) and text[j].isdigit():
            j += 1
        length = int(text[i:j])
        last = text[j:j + length]
        i = j + length
        if not nested:
            break
    return last


def kernel_names_in_library(path):
    """The CUDA kernels a shared library defines, read off its ELF symbol tables: nvcc gives every
    __global__ function (every template instance, every macro-made one) a host-side launch stub
    named __device_stub__<mangled kernel name>. Nothing of the library is run."""
    names = set()
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:  # 64-bit little-endian only
        return names
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + k * shentsize) for k in range(shnum)]
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind not in (2, 11) or entsize != 24:  # SHT_SYMTAB, SHT_DYNSYM
            continue
        strings_offset, strings_size = sections[link][4], sections[link][5]
        strings = data[strings_offset:strings_offset + strings_size]
        for at in range(offset, offset + size, entsize):
            name_at, = struct.unpack_from("<I", data, at)
            end = strings.find(b"\0", name_at)
            name = strings[name_at:end].decode("ascii", "replace")
            marker = name.find("__device_stub__")
            if marker < 0:
                continue
            stub = name[marker + len("__device_stub__"):]
            if marker >= 2 and name[marker - 1].isdigit():
                # _Z[L]<length>__device_stub__<kernel>...: the stub's own name is <length> long.
                digits = marker
                while digits > 0 and name[digits - 1].isdigit():
                    digits -= 1
                stub = name[marker:marker + int(name[digits:marker])][len("__device_stub__"):]
            kernel = _mangled_identifier(stub)
            if kernel:
                names.add(kernel)
    return names


def built_kernel_names():
    """Kernels of the shared libraries this process loaded that are the candidate's own: mapped
    from TORCH_EXTENSIONS_DIR or from outside the Python installation and the system's library
    folders (a library it compiled and loaded itself). What it built is what it may claim."""
    roots = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    system = ("/usr/lib", "/lib", "/usr/local/lib", "/usr/local/cuda", "/opt/conda", "/opt/torch")
    extensions = os.environ.get("TORCH_EXTENSIONS_DIR")
    libraries = set()
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split(None, 5)
                if len(fields) == 6 and ".so" in fields[5]:
                    libraries.add(fields[5].strip())
    except OSError:
        return []
    names = set()
    for path in sorted(libraries):
        real = os.path.realpath(path)
        own = extensions and real.startswith(os.path.realpath(extensions) + os.sep)
        if not own and (real.startswith(system) or any(real.startswith(r + os.sep) for r in roots)):
            continue
        try:
            names.update(kernel_names_in_library(real))
        except (OSError, ValueError, IndexError, struct.error):
            continue
    return sorted(names)


def _names_the_extension_builder(path):
    """Whether a candidate's source mentions PyTorch's extension builder. Importing it costs
    about 0.3 s (setuptools, hipify) in every worker, so it is imported only for candidates that
    use it."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return True
    return "cpp_extension" in text or "load_inline" in text


def _keep_unchanged_inline_sources():
    """PyTorch before 2.0 writes load_inline's main.cpp and cuda.cu on every call, even when
    their text is the same, so ninja rebuilds a cached extension in every worker that loads it.
    Where that is so, a source whose text did not change gets its old modification time back
    before the build runs."""
    import functools
    import inspect

    from torch.utils import cpp_extension

    if getattr(cpp_extension.load_inline, "_cudal1_keeps_sources", False):
        return
    if not all(hasattr(cpp_extension, f) for f in ("_jit_compile", "_get_build_directory")):
        return  # not the PyTorch this was written against: leave it alone
    try:
        if "_maybe_write" in inspect.getsource(cpp_extension.load_inline):
            return  # this PyTorch writes only what changed
    except (OSError, TypeError):
        return
    original = cpp_extension.load_inline

    @functools.wraps(original)
    def load_inline(name, *args, **kwargs):
        directory = kwargs.get("build_directory")
        if directory is None and len(args) >= 8:
            directory = args[7]
        try:
            if directory is None:
                directory = cpp_extension._get_build_directory(name, False)
        except Exception:  # noqa: BLE001 - then PyTorch itself reports the problem
            return original(name, *args, **kwargs)
        before = {}
        for source in ("main.cpp", "cuda.cu"):
            path = os.path.join(directory, source)
            try:
                with open(path, "rb") as f:
                    before[path] = (f.read(), os.stat(path))
            except OSError:
                pass
        compile_ = cpp_extension._jit_compile

        def jit_compile(*a, **k):
            for path, (text, stat) in before.items():
                try:
                    with open(path, "rb") as f:
                        if f.read() == text:
                            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
                except OSError:
                    pass
            return compile_(*a, **k)

        cpp_extension._jit_compile = jit_compile
        try:
            return original(name, *args, **kwargs)
        finally:
            cpp_extension._jit_compile = compile_

    load_inline._cudal1_keeps_sources = True
    cpp_extension.load_inline = load_inline


def _wrap_extension_builders(marker, wrap):
    """Replaces PyTorch's cpp_extension.load_inline and load, once each per `marker`, with
    wrap(original, signature, kind), a function taking the same arguments; a builder this
    PyTorch lacks, or whose signature cannot be read, is left as it is (so is one `wrap`
    returns None for)."""
    import functools
    import inspect

    from torch.utils import cpp_extension

    for kind in ("load_inline", "load"):
        original = getattr(cpp_extension, kind, None)
        if original is None or getattr(original, marker, False):
            continue
        try:
            signature = inspect.signature(original)
        except (TypeError, ValueError):
            continue
        wrapped = wrap(original, signature, kind)
        if wrapped is None:
            continue
        wrapped = functools.wraps(original)(wrapped)
        setattr(wrapped, marker, True)
        setattr(cpp_extension, kind, wrapped)


def load_candidate(path):
    """Imports the candidate; returns it, the extension libraries its import (re)built, and the
    libraries there after it (for libraries_built_since)."""
    if _names_the_extension_builder(path):
        _keep_unchanged_inline_sources()
        _lighten_cuda_headers()
        _offer_precompiled_header()
        _replay_failed_builds()
    before = _built_libraries()
    module = load_module(path, "cudal1_candidate")
    after = _built_libraries()
    return module, libraries_built_since(before, after), after


def libraries_built_since(before, after=None):
    """The extension libraries (re)built since `before` (a _built_libraries() snapshot): a
    candidate that builds in its model's constructor builds in every worker that loads it."""
    after = _built_libraries() if after is None else after
    return sorted(os.path.basename(p) for p, t in after.items() if before.get(p) != t)


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


def memory_use(device):
    """What this worker holds on the device now and at most so far, and what the device has
    left: the orchestrator's estimate of how many more pairs of workers fit at once, and of what
    the task's next evaluation takes (bytes; empty on the CPU, where the orchestrator reads
    resident memory itself)."""
    if device == "cpu":
        return {}
    import torch

    index = torch.device(device).index or 0
    free, total = torch.cuda.mem_get_info(index)
    return {"device_free": free, "device_total": total,
            "device_reserved": torch.cuda.memory_reserved(index),
            "device_peak_reserved": torch.cuda.max_memory_reserved(index)}


def release_cached_memory(device):
    """Gives the allocator's cached blocks back to the device (what a model that is gone held)."""
    if device != "cpu":
        import torch

        torch.cuda.empty_cache()


def reset_worker(device):
    """A reference worker between two evaluations: the objects of the one it served collected,
    collection on again (timing turns it off), PyTorch's default stream current again (samples
    run on rotated streams). The allocator keeps its cached blocks: the next model takes them
    back without asking the driver."""
    gc.collect()
    gc.enable()
    if device != "cpu":
        import torch

        torch.cuda.set_stream(torch.cuda.default_stream(torch.device(device)))


def toolchain():
    """What a compiled candidate depends on: a change to any of these invalidates cached builds."""
    import os
    import platform
    import shutil
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
    # Installing PyTorch's headers (Debian ships them in libtorch-dev) turns a failed build into
    # a working one: their presence is part of the toolchain, so a cached failure is not reused.
    headers = []
    try:
        from torch.utils import cpp_extension
        headers = [os.path.join(path, "torch", "extension.h") for path in cpp_extension.include_paths()]
        info["torch_headers"] = ["%s@%d" % (h, int(os.path.getmtime(h))) for h in headers if os.path.exists(h)]
    except (ImportError, OSError):
        info["torch_headers"] = None
    # The files this answer came from, the headers whether or not they are there yet: cudal1
    # reuses a stored probe while none of them changed (present or not, size, modification time)
    # instead of importing PyTorch again for every evaluation.
    depends_on = [sys.executable, torch.__file__, getattr(torch.version, "__file__", None),
                  shutil.which("c++")] + headers
    if torch.cuda.is_available():
        info["capabilities"] = sorted({"%d.%d" % torch.cuda.get_device_capability(i)
                                       for i in range(torch.cuda.device_count())})
    # A CUDA build of PyTorch builds CUDA extensions with or without a GPU here (a build host).
    if getattr(torch.version, "cuda", None):
        try:
            from torch.utils.cpp_extension import CUDA_HOME
            nvcc_path = CUDA_HOME + "/bin/nvcc"
            depends_on.append(nvcc_path)
            nvcc = subprocess.run([nvcc_path, "--version"], capture_output=True,
                                  text=True, timeout=30).stdout.strip().splitlines()
            info["nvcc"] = nvcc[-1] if nvcc else None
        except (OSError, TypeError, subprocess.SubprocessError):
            info["nvcc"] = None
    info["depends_on"] = sorted({os.path.realpath(path) for path in depends_on if path})
    return info


def bandwidth_calls(device):
    """Calls whose time gives the device's memory bandwidth: a copy and a reduction over a buffer
    far larger than any cache. Returns [(name, bytes moved, call)]."""
    import torch

    count = (256 << 20) // 4
    src = torch.ones(count, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    return [("copy", 2 * count * 4, lambda: dst.copy_(src)),
            ("read", count * 4, lambda: src.sum())]


def warm_up_threads(device):
    """Starts PyTorch's own thread pools (intra-op, and the device's) before user code runs, so
    that threads appearing during a call are the call's."""
    import torch

    a = torch.ones(256, 256)
    (a @ a).sum()
    torch.ones(1 << 20).mul(2.0).sum()
    if device != "cpu":
        b = torch.ones(256, 256, device=device)
        (b @ b).sum().item()
