
# ---- extension_builds.py: builds a model's constructor makes, once per candidate -------------
#
# Many candidates call load_inline in their model's constructor, often inside try/except with
# PyTorch as the fallback. An import-time build is made once, in the build step, and cached; a
# constructor's build would be made again in every worker that constructs the model (the
# correctness trials' and every timing round's), and a failing one, never cached by PyTorch, is
# compiled again and fails again in each of them. So the build step also constructs the model
# (construct_for_builds), and a build that failed with a compiler's error is recorded in the
# build folder: a later call with the same arguments in a worker that got that folder raises the
# same error at once instead of compiling (_replay_failed_builds). The record is the candidate's
# own folder, written by its own build step: all it can do is fail the candidate's own build.

_FAILED_BUILDS = "cudal1-failed-builds"
_builds_failed = []    # names of the builds that failed with a compiler's error in this process
_builds_replayed = []  # names of the builds whose recorded failure this process raised again


def _build_call_key(kind, bound):
    """What decides a build's outcome in a build folder of one toolchain: the call and its
    arguments (less `verbose`) and the variables that change its flags."""
    import hashlib

    arguments = sorted((k, repr(v)) for k, v in bound.arguments.items() if k != "verbose")
    if kind == "load":  # files named by path: their text decides, not their names
        sources = bound.arguments.get("sources")
        for path in [sources] if isinstance(sources, str) else list(sources or []):
            try:
                with open(path, "rb") as f:
                    arguments.append((path, hashlib.sha256(f.read()).hexdigest()))
            except (OSError, TypeError):
                arguments.append((repr(path), None))
    text = repr((kind, arguments, [os.environ.get(k, "") for k in
                                   ("TORCH_CUDA_ARCH_LIST", "CUDAL1_PCH_DIR", "CXX", "CC", "CUDA_HOME")]))
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:32]


def _bound_build_call(signature, kind, args, kwargs):
    """A builder's call: its arguments bound, with their defaults, and its _build_call_key; None
    for a call PyTorch would refuse."""
    try:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return bound, _build_call_key(kind, bound)
    except Exception:  # noqa: BLE001 - any failure here is PyTorch's to report
        return None


def _is_compiler_failure(message):
    """A failure the same sources and flags would meet again: the compiler or linker said why.
    A compiler killed (out of memory, a signal) may do better next time, so it is not recorded."""
    return (message.startswith("Error building extension") and "Killed signal" not in message
            and "signal terminated" not in message)


def _replay_failed_builds():
    """Wraps cpp_extension.load_inline and load (outermost, so the candidate's own arguments
    make the key): a call whose failure this build folder recorded raises it again; a new
    failure with a compiler's error is recorded."""
    import json

    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    if not root:
        return

    def wrap(original, signature, kind):
        def replaying(*args, **kwargs):
            call = _bound_build_call(signature, kind, args, kwargs)
            if call is None:
                return original(*args, **kwargs)  # PyTorch says what is wrong with the call
            bound, key = call
            name = str(bound.arguments.get("name", ""))
            record = os.path.join(root, _FAILED_BUILDS, key + ".json")
            try:
                with open(record, encoding="utf-8") as f:
                    message = json.load(f)["message"]
            except (OSError, ValueError, KeyError, TypeError):
                message = None
            if isinstance(message, str):
                _builds_replayed.append(name)
                raise RuntimeError(message)
            try:
                return original(*args, **kwargs)
            except RuntimeError as error:
                message = str(error)
                if _is_compiler_failure(message):
                    _builds_failed.append(name)
                    _write_build_record(record, name, message)
                raise

        return replaying

    _wrap_extension_builders("_cudal1_replays_failures", wrap)


def _write_build_record(record, name, message):
    """Writes a record of a build into its folder, atomically (a failed build's, or the CUDA
    sources' header): a folder it cannot write leaves later workers to find out again, as
    without the record."""
    import json

    try:
        os.makedirs(os.path.dirname(record), exist_ok=True)
        with open(record + ".tmp", "w", encoding="utf-8") as f:
            json.dump({"name": name, "message": message}, f)
        os.replace(record + ".tmp", record)
    except OSError:
        pass


def replayed_failed_builds():
    """Builds of this worker that raised the failure its build step recorded, without a compile."""
    return list(_builds_replayed)


def _names_cuda_device(value):
    import torch

    if isinstance(value, torch.device):
        return value.type == "cuda"
    return isinstance(value, str) and value.split(":")[0] == "cuda"


def answer_as_gpu(capability):
    """A build step on a host without the GPU it builds for (a build worker's): PyTorch's CUDA
    queries answer as that GPU's host would, for the rest of this build process, so that a
    candidate building under `if torch.cuda.is_available():` builds here what it would build
    there; and moving a tensor or a module to the GPU (`.cuda()`, `.to("cuda")`) leaves it on
    the CPU, so that a constructor that moves its weights before it builds gets to its build.
    Nothing else: what needs the device itself still fails (an error of the construction, only
    reported). The process only builds; the model it constructs is thrown away."""
    import torch

    major, minor = (int(part) for part in capability.split(".")[:2])
    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: 1
    torch.cuda.current_device = lambda: 0
    torch.cuda.get_device_capability = lambda device=None: (major, minor)
    torch.Tensor.cuda = lambda self, *args, **kwargs: self
    torch.nn.Module.cuda = lambda self, *args, **kwargs: self

    def on_cpu(original):
        def to(self, *args, **kwargs):
            args = tuple("cpu" if _names_cuda_device(a) else a for a in args)
            if _names_cuda_device(kwargs.get("device")):
                kwargs["device"] = "cpu"
            return original(self, *args, **kwargs)
        return to

    torch.Tensor.to = on_cpu(torch.Tensor.to)
    torch.nn.Module.to = on_cpu(torch.nn.Module.to)


def construct_for_builds(candidate, candidate_path, task_path, seed):
    """The build step's construction of the candidate's model, on the CPU, for the builds its
    constructor makes (they land in the build folder the cache keeps, failures recorded). Only
    for a candidate that names PyTorch's extension builder; returns None for others. The model
    is not used: an error constructing it here (a tensor on a GPU this process was not meant to
    use, ...) is only reported, and the evaluation's own workers construct it as ever."""
    if not _names_the_extension_builder(candidate_path) or not hasattr(candidate, "ModelNew"):
        return None
    failed_before = len(_builds_failed)
    before = _built_libraries()
    error = ""
    try:
        task = load_module(task_path, "cudal1_task")
        args = make_init_args(task.get_init_inputs, seed)
        seed_everything(seed)
        candidate.ModelNew(*args)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - the candidate's code: anything may come out
        error = describe_exception(e)[0][:2000]
    return {"built": libraries_built_since(before), "failed": _builds_failed[failed_before:],
            "error": error}


# ---- A CUDA source's torch/extension.h, lighter for nvcc ------------------------------------
#
# load_inline starts cuda.cu with torch/types.h (ATen and torch's tensor functions), and most
# candidates include torch/extension.h in their CUDA source as well: PyTorch's whole C++ frontend
# (nn, optim, data, jit, serialize) and its Python bindings, which nvcc parses three times
# (cudafe++, cicc, and the host compiler on cudafe++'s output). A kernel file uses the tensor
# API and, for a PYBIND11_MODULE of its own, pybind11 with torch's type casters: what
# torch/csrc/utils/pybind.h declares (torch/extension.h includes both). With
# CUDAL1_CUDA_HEADERS=light (the orchestrator's variable, forwarded to the workers; the default,
# full, leaves every build as written) a load_inline build's CUDA sources get that header on the
# line of torch/extension.h, so the compiler's line numbers stay the candidate's. A build whose
# cuda.cu then fails to compile, for whatever reason, is built again with its sources as
# written, and its build folder records that, so the workers that load the build go straight to
# it: the build ends as PyTorch's own would, and only the CPU seconds differ (less for a
# build that compiles, or fails elsewhere; the light attempt's more for one whose CUDA source
# does not compile).

_FULL_HEADER_BUILDS = "cudal1-full-headers"
_LIGHT_EXTENSION_HEADER = "<torch/csrc/utils/pybind.h>"
_cuda_header_builds = {"light": [], "full": []}  # build names by the header they compiled with


def _lighter_cuda_sources(sources):
    """`sources` (load_inline's cuda_sources: a string or a list of them) with each
    `#include <torch/extension.h>` line including the light header instead, and whether any did."""
    import re

    pattern = re.compile(r'^([ \t]*#[ \t]*include[ \t]*)[<"]torch/extension\.h[>"]', re.M)
    texts = [sources] if isinstance(sources, str) else list(sources or [])
    if not all(isinstance(text, str) for text in texts):
        return sources, False
    light = [pattern.sub(lambda m: m.group(1) + _LIGHT_EXTENSION_HEADER, text) for text in texts]
    if light == texts:
        return sources, False
    return (light[0] if isinstance(sources, str) else light), True


def _needs_full_header(message):
    """Whether a build's failure may be the light header's: ninja says cuda.cu's object failed
    (main.cpp's errors and the link's are the same with either header)."""
    return _is_compiler_failure(message) and any(
        line.startswith("FAILED:") and "cuda.cuda.o" in line for line in message.splitlines())


def _lighten_cuda_headers():
    """Wraps cpp_extension.load_inline (inside _replay_failed_builds: a failure it records is
    the one the build ends with) so that its CUDA sources build with the light header first."""
    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    if not root or os.environ.get("CUDAL1_CUDA_HEADERS") != "light":
        return

    def wrap(original, signature, kind):
        if kind != "load_inline" or "cuda_sources" not in signature.parameters:
            return None

        def lightening(*args, **kwargs):
            call = _bound_build_call(signature, kind, args, kwargs)
            if call is None:
                return original(*args, **kwargs)
            bound, key = call
            written = bound.arguments["cuda_sources"]
            light, changed = _lighter_cuda_sources(written)
            name = str(bound.arguments.get("name", ""))
            marker = os.path.join(root, _FULL_HEADER_BUILDS, key)
            if changed and not os.path.exists(marker):
                bound.arguments["cuda_sources"] = light
                try:
                    module = original(*bound.args, **bound.kwargs)
                    _cuda_header_builds["light"].append(name)
                    return module
                except RuntimeError as error:
                    if not _needs_full_header(str(error)):
                        raise
                _write_build_record(marker, name, "built with torch/extension.h")
                _forget_extension_version(name)
                bound.arguments["cuda_sources"] = written
            module = original(*bound.args, **bound.kwargs)
            if changed:
                _cuda_header_builds["full"].append(name)
            return module

        return lightening

    _wrap_extension_builders("_cudal1_lightens_cuda_headers", wrap)


def _forget_extension_version(name):
    """PyTorch gives a build whose sources changed within one process a new version (name_v1),
    which would compile both files again, and make every later process's build of the name out
    of date: the sources as written are the same build, not a new version of it."""
    from torch.utils import cpp_extension

    versioner = getattr(cpp_extension, "JIT_EXTENSION_VERSIONER", None)
    entries = getattr(versioner, "entries", None)
    if isinstance(entries, dict):
        entries.pop(name, None)


def cuda_header_builds():
    """This process's load_inline builds with CUDA sources, by the torch header they built with."""
    return {kind: list(names) for kind, names in _cuda_header_builds.items() if names}
