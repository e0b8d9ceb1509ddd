
# ---- precompiled_header.py: PyTorch's extension header, compiled once per toolchain ----------
#
# load_inline's main.cpp starts with `#include <torch/extension.h>`, and parsing that header is
# half of the file's CPU time. GCC reuses a header compiled ahead of time (a .gch next to the
# header it would include) when the flags that matter are the same, and compiles from the text
# otherwise. cudal1 makes one such file per toolchain, in a trusted process of its own
# (make_precompiled_header: no candidate code runs there), and every build and load of a
# candidate gets the same extra include directory (CUDAL1_PCH_DIR), read-only to it, whether or
# not the file is there yet: the flags of a build do not depend on it, so a cached build is never
# rebuilt because the header appeared or went.

_PCH_HEADER = os.path.join("torch", "extension.h")


def _extension_header():
    """The torch/extension.h a build would include, from PyTorch's include paths."""
    from torch.utils import cpp_extension

    for path in cpp_extension.include_paths():
        header = os.path.join(path, _PCH_HEADER)
        if os.path.isfile(header):
            return header
    raise RuntimeError("PyTorch's include paths have no torch/extension.h (its headers are not "
                       "installed)")


def _ninja_variables(text):
    """The top-level `name = value` lines of a ninja file."""
    variables = {}
    for line in text.splitlines():
        if not line or line[0].isspace() or "=" not in line:
            continue
        name, _, value = line.partition("=")
        name = name.strip()
        if name.replace("_", "").isalnum():
            variables[name] = value.strip()
    return variables


def precompiled_header_flags():
    """The compiler and the flags load_inline compiles main.cpp with on this machine, asked of
    PyTorch's own ninja-file writer, less the one that names the extension (it differs per
    extension, and GCC refuses a precompiled header made with another value)."""
    import inspect
    import shlex
    import tempfile

    import torch
    from torch.utils import cpp_extension

    writer = getattr(cpp_extension, "_write_ninja_file_to_build_library", None)
    if writer is None:
        raise RuntimeError("this PyTorch has no _write_ninja_file_to_build_library")
    with_cuda = bool(torch.cuda.is_available() and getattr(cpp_extension, "CUDA_HOME", None))
    with tempfile.TemporaryDirectory(prefix="cudal1-pch-") as folder:
        sources = [os.path.join(folder, "main.cpp")]
        if with_cuda:
            sources.append(os.path.join(folder, "cuda.cu"))
        values = {"path": os.path.join(folder, "build.ninja"), "name": "cudal1_pch",
                  "sources": sources, "objects": [], "extra_cflags": [], "extra_cuda_cflags": [],
                  "extra_sycl_cflags": [], "extra_ldflags": [], "extra_include_paths": [],
                  "with_cuda": with_cuda, "with_sycl": False, "is_standalone": False,
                  "is_python_module": True}
        parameters = inspect.signature(writer).parameters
        missing = [name for name, p in parameters.items()
                   if name not in values and p.default is inspect.Parameter.empty]
        if missing:
            raise RuntimeError("PyTorch's ninja-file writer wants arguments cudal1 does not "
                               "know: %s" % ", ".join(missing))
        writer(**{name: value for name, value in values.items() if name in parameters})
        with open(values["path"], encoding="utf-8") as f:
            variables = _ninja_variables(f.read())
    flags = shlex.split(variables.get("cflags", "")) + shlex.split(variables.get("post_cflags", ""))
    flags = [flag for flag in flags if not flag.startswith("-DTORCH_EXTENSION_NAME=")]
    compiler = shlex.split(variables.get("cxx") or os.environ.get("CXX") or "c++")
    return compiler, flags


def _compile_seconds(command, timeout):
    """Runs a compiler command; returns (its CPU seconds, stderr). Raises on failure."""
    import resource
    import subprocess

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if result.returncode != 0:
        raise RuntimeError("%s failed (exit %d): %s" % (command[0], result.returncode,
                                                        result.stderr[-3000:]))
    return cpu, result.stderr


# The variants made, in the order GCC tries them: optimisation changes predefined macros
# (__OPTIMIZE__, __NO_INLINE__), so a file made without -O is refused by a build with -O3 (and
# the reverse). Without -O is load_inline's default; one made with -O2 serves -O1 to -O3.
_PCH_VARIANTS = (("O0", []), ("O2", ["-O2"]))


def make_precompiled_header(directory, timeout=900):
    """Makes DIRECTORY/torch/extension.h (a link to PyTorch's) and, in the folder
    DIRECTORY/torch/extension.h.gch, its precompiled forms (GCC tries each file there and uses the
    first one valid for the build), checking for each that a main.cpp compiled as load_inline
    compiles it uses the file. ready.json says what is there once the first is. Returns
    ready.json's content; raises when a variant cannot be made or would not be used."""
    import json
    import time

    start = time.monotonic()
    header = _extension_header()
    compiler, flags = precompiled_header_flags()
    os.makedirs(os.path.join(directory, "torch"), exist_ok=True)
    link = os.path.join(directory, _PCH_HEADER)
    if os.path.realpath(link) != os.path.realpath(header):
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(header, link)
    variants_dir = link + ".gch"
    os.makedirs(variants_dir, exist_ok=True)
    for name in os.listdir(directory):  # what an interrupted attempt left
        if name.startswith(".partial-"):
            os.unlink(os.path.join(directory, name))
    made = {"header": header, "compiler": compiler, "flags": flags, "variants": {}}
    for variant, extra in _PCH_VARIANTS:
        target = os.path.join(variants_dir, variant + ".gch")
        partial = os.path.join(directory, ".partial-%d-%s.gch" % (os.getpid(), variant))
        try:
            cpu, _ = _compile_seconds(compiler + flags + extra +
                                      ["-x", "c++-header", link, "-o", partial], timeout)
            os.chmod(partial, 0o444)
            os.replace(partial, target)
        finally:
            if os.path.exists(partial):
                os.unlink(partial)
        # The check: a file as load_inline writes it, with its flags and this folder first.
        # GCC's -H marks a precompiled header it used with "!" and one it refused with "x".
        check = os.path.join(directory, ".check-%d.cpp" % os.getpid())
        with open(check, "w", encoding="utf-8") as f:
            f.write("#include <torch/extension.h>\nint cudal1_pch_check() { return 0; }\n")
        try:
            _, stderr = _compile_seconds(
                compiler + ["-DTORCH_EXTENSION_NAME=cudal1_pch_check", "-I" + directory] +
                flags + extra + ["-H", "-fsyntax-only", check], timeout)
        finally:
            os.unlink(check)
        if not any(line.startswith("! ") and line.endswith(variant + ".gch")
                   for line in stderr.splitlines()):
            os.unlink(target)
            raise RuntimeError("the precompiled header %s was made but a load_inline build "
                               "would not use it (GCC's -H output: %s)" % (variant, stderr[:600]))
        made["variants"][variant] = {"flags": extra, "cpu_s": round(cpu, 2),
                                     "bytes": os.path.getsize(target)}
        made["seconds"] = round(time.monotonic() - start, 2)
        with open(os.path.join(directory, ".ready.json.tmp"), "w", encoding="utf-8") as f:
            json.dump(made, f, indent=2)
        os.replace(os.path.join(directory, ".ready.json.tmp"),
                   os.path.join(directory, "ready.json"))
    return made


def _offer_precompiled_header():
    """Puts CUDAL1_PCH_DIR first among the include directories of every cpp_extension build of
    this process (load_inline, load). The same directory for every build and load of a toolchain,
    whether or not its precompiled header exists yet, so it never changes a build's flags."""
    directory = os.environ.get("CUDAL1_PCH_DIR")
    if not directory:
        return

    def wrap(original, signature, _kind):
        if "extra_include_paths" not in signature.parameters:
            return None

        def offering(*args, **kwargs):
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError:
                return original(*args, **kwargs)  # PyTorch says what is wrong with the call
            paths = bound.arguments.get("extra_include_paths")
            if isinstance(paths, str):
                paths = [paths]
            bound.arguments["extra_include_paths"] = [directory] + list(paths or [])
            return original(*bound.args, **bound.kwargs)

        return offering

    _wrap_extension_builders("_cudal1_offers_pch", wrap)
