"""Static inspection of task and candidate files (part of the cudal1 worker's host module).

Nothing here imports or runs the file: it is parsed, and what the verdict needs to know about its
code is read off the syntax tree (top-level names, precision markers, the candidate's own kernel
names, and whether it needs CUDA).
"""

import ast
import re


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
    cuda_builds, cuda_calls = cuda_usage(tree)
    return {
        "ok": True,
        "classes": classes,
        "functions": functions,
        "assignments": sorted(set(assignments)),
        "uses_load_inline": "load_inline" in source.decode("utf-8", "replace"),
        "precision_markers": precision_markers(tree),
        "kernel_names": own_kernel_names(tree),
        "cuda_builds": cuda_builds,
        "cuda_calls": cuda_calls,
    }


def precision_markers(tree):
    """Signs of reduced precision in a file's code: identifiers, and CUDA source in strings."""
    import re

    words = {"half", "float16", "bfloat16", "autocast", "allow_tf32", "set_float32_matmul_precision",
             "HalfTensor", "BFloat16Tensor"}
    cuda = re.compile(r"__half|half2|__nv_bfloat16|nv_bfloat162|__float2half|__half2float|"
                      r"__float2bfloat16|wmma::|mma\.sync[^;]*f16|tf32")
    # "half" is a common variable name; only x.half() and torch.half count.
    names = words - {"half"}
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in words:
            found.add(node.attr)
        elif isinstance(node, ast.Name) and node.id in names:
            found.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value in ("float16", "bfloat16", "half", "bf16", "fp16", "medium", "high"):
                found.add(node.value)
            for match in cuda.finditer(node.value):
                found.add(match.group(0).split("[")[0])
    return sorted(found)


# Attributes that may stand between __global__ and a kernel's name, each with a parenthesised
# argument list: __global__ void __launch_bounds__(256, 2) name(...).
_KERNEL_ATTRIBUTE = re.compile(r"\b(?:__launch_bounds__|__cluster_dims__|__maxnreg__|__attribute__|"
                               r"__declspec|alignas)\s*\(")
_KERNEL = re.compile(r"__global__\b((?:\s|[\w:*&<>,]|\bconst\b)*?)\b([A-Za-z_]\w*)\s*(?:<[^;{}()]*>\s*)?\(")
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)\(([^)]*)\)((?:\\\n|[^\n])*)", re.M)
# A kernel in a macro's body, its name possibly pasted together: NAME##_kernel.
_MACRO_KERNEL = re.compile(r"__global__\b(?:\s|\\\n|[\w:*&<>,]|#(?!#))*?((?:[A-Za-z_]\w*)?(?:\s*##\s*\w+)*)\s*"
                           r"(?:<[^;{}()]*>\s*)?\(")
_NOT_NAMES = {"void", "static", "inline", "extern", "const", "unsigned", "signed", "int", "float",
              "double", "char", "long", "short", "bool", "auto", "template", "typename"}


def _strip_attributes(text):
    """The text without the attribute groups of _KERNEL_ATTRIBUTE (balanced parentheses)."""
    out, at = [], 0
    for match in _KERNEL_ATTRIBUTE.finditer(text):
        if match.start() < at:
            continue
        depth, i = 1, match.end()
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        out.append(text[at:match.start()] + " ")
        at = i
    out.append(text[at:])
    return "".join(out)


def kernel_names_in_cuda(text):
    """__global__ function names a CUDA source text defines: with templates, attributes
    (__launch_bounds__, __cluster_dims__, ...) before or after the return type, qualifiers, and
    kernels a function-like macro defines from its argument (NAME or pre##NAME##post)."""
    text = _strip_attributes(text)
    names = set()
    for match in _KERNEL.finditer(text):
        name = match.group(2)
        if name not in _NOT_NAMES:
            names.add(name)
    # #define DEFINE_KERNEL(NAME, T) __global__ void NAME##_kernel(T* x) ... then DEFINE_KERNEL(relu, float).
    for macro in _DEFINE.finditer(text):
        params = [p.strip() for p in macro.group(2).split(",")]
        body = macro.group(3)
        for kernel in _MACRO_KERNEL.finditer(body):
            parts = [p.strip() for p in kernel.group(1).split("##")]
            if not any(p in params for p in parts):
                continue
            names.discard(parts[0])
            for call in re.finditer(r"\b%s\s*\(([^()]*)\)" % re.escape(macro.group(1)), text):
                if call.start() == macro.start(1):
                    continue
                args = [a.strip() for a in call.group(1).split(",")]
                if len(args) != len(params):
                    continue
                names.add("".join(args[params.index(p)] if p in params else p for p in parts))
    return names


def own_kernel_names(tree):
    """Names of the kernels a file defines itself: CUDA __global__ functions in its source strings
    and Triton @jit functions. A name put together at run time is not in the text: the worker
    adds the kernels of the libraries the candidate built (cudal1_host.built_kernel_names)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if "__global__" in node.value:
                names.update(kernel_names_in_cuda(node.value))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in node.decorator_list:
                text = ast.dump(decorator)
                if "jit" in text or "autotune" in text or "heuristics" in text:
                    names.add(node.name)
    return sorted(names)


def _called_name(call):
    """The last part of a call's function name: load_inline for cpp_extension.load_inline(...)."""
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return call.func.id if isinstance(call.func, ast.Name) else ""


def _gives_code(node):
    """Whether an argument may hold source code: anything but None, "", [] or ()."""
    if isinstance(node, ast.Constant):
        return node.value not in (None, "")
    return not (isinstance(node, (ast.List, ast.Tuple)) and not node.elts)


def _is_cuda_device(node):
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and \
        (node.value == "cuda" or node.value.startswith("cuda:"))


def _builds_cuda(call, name):
    """What a call builds with nvcc, or None: load_inline with CUDA sources, load of .cu files,
    either with with_cuda=True."""
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    if name == "load_inline":
        # load_inline(name, cpp_sources, cuda_sources, ...)
        sources = keywords.get("cuda_sources", call.args[2] if len(call.args) > 2 else None)
        if sources is not None and _gives_code(sources):
            return "load_inline with cuda_sources"
    if name == "load" and any(isinstance(n, ast.Constant) and isinstance(n.value, str) and
                              n.value.endswith((".cu", ".cuh")) for n in ast.walk(call)):
        return "load of a .cu source"
    flag = keywords.get("with_cuda")
    if name in ("load", "load_inline") and isinstance(flag, ast.Constant) and flag.value is True:
        return name + " with with_cuda=True"
    return None


def cuda_usage(tree):
    """What in a file needs CUDA, each as "what (line N)", in line order: code it builds for the
    GPU (nvcc through torch.utils.cpp_extension, Triton kernels), which cannot be built or run on a
    machine without one; and calls that put work on a CUDA device (.cuda(), device "cuda",
    torch.cuda functions), which fail there at run time."""
    builds, calls = [], []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any("triton" in ast.dump(d) for d in node.decorator_list):
                builds.append((line, "the Triton kernel %s" % node.name))
        elif (isinstance(node, ast.Name) and node.id == "CUDAExtension") or \
                (isinstance(node, ast.Attribute) and node.attr == "CUDAExtension"):
            builds.append((line, "CUDAExtension"))
        elif isinstance(node, ast.Call):
            name = _called_name(node)
            built = _builds_cuda(node, name)
            if built:
                builds.append((line, built))
            if name == "cuda" and isinstance(node.func, ast.Attribute):
                calls.append((line, ".cuda()"))
            elif isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Attribute) and \
                    node.func.value.attr == "cuda" and name not in ("is_available", "device_count"):
                calls.append((line, "torch.cuda.%s()" % name))
            for arg in list(node.args) + [k.value for k in node.keywords]:
                if _is_cuda_device(arg):
                    calls.append((line, "the device '%s'" % arg.value))

    def described(found):
        return ["%s on line %d" % (what, line) for line, what in sorted(set(found))]

    return described(builds), described(calls)
