"""Arithmetic a call does, and what the device can do (part of the cudal1 worker's host module).

The reference's first call is counted: every matrix product, batched product, convolution and
attention PyTorch dispatches, by the precision it runs in. With the device's measured matmul
throughput per precision this gives the time the task's arithmetic takes at the roof, which the
profile compares a call's time with. Only the trusted reference is counted; its first call is
untimed, so counting costs no measured time and no extra device work.

PyTorch 2.x has a FLOP counter of its own (torch.utils.flop_counter), but not 1.13, and it does not
say in which precision the arithmetic ran; this one uses the dispatch mode both versions have.
"""


def _numel(shape):
    total = 1
    for size in shape:
        total *= int(size)
    return total


def _matmul_flops(a, b):
    # (..., m, k) @ (..., k, n): 2 m k n per batch element.
    if a.dim() == 1 or b.dim() == 1:
        return 2 * _numel(a.shape) * (1 if b.dim() == 1 else int(b.shape[-1]))
    batch = _numel(a.shape[:-2])
    return 2 * batch * int(a.shape[-2]) * int(a.shape[-1]) * int(b.shape[-1])


def _convolution_flops(x, weight, out, transposed):
    # Every output element of a convolution sums (C_in / groups) x kernel products; a transposed
    # one spreads every input element over (C_out / groups) x kernel outputs.
    per_element = _numel(weight.shape[1:])
    return 2 * _numel((x if transposed else out).shape) * per_element


def _attention_flops(q, k, v):
    # softmax(q k^T) v: (..., L, E) x (..., S, E) and (..., L, S) x (..., S, Ev).
    batch = _numel(q.shape[:-2])
    length, embed, source = int(q.shape[-2]), int(q.shape[-1]), int(k.shape[-2])
    return 2 * batch * length * source * (embed + int(v.shape[-1]))


def _formulas():
    import torch

    aten = torch.ops.aten
    table = {}

    def add(name, formula):
        packet = getattr(aten, name, None)
        if packet is not None:
            table[packet] = formula

    add("mm", lambda args, out: ("matmul", args[0], _matmul_flops(args[0], args[1])))
    add("bmm", lambda args, out: ("matmul", args[0], _matmul_flops(args[0], args[1])))
    add("addmm", lambda args, out: ("matmul", args[1], _matmul_flops(args[1], args[2])))
    add("baddbmm", lambda args, out: ("matmul", args[1], _matmul_flops(args[1], args[2])))
    add("mv", lambda args, out: ("matmul", args[0], _matmul_flops(args[0], args[1])))
    add("addmv", lambda args, out: ("matmul", args[1], _matmul_flops(args[1], args[2])))
    for name in ("convolution", "_convolution"):
        add(name, lambda args, out: ("convolution", args[0],
                                     _convolution_flops(args[0], args[1], out, bool(args[6]))))
    for name in ("_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
                 "_scaled_dot_product_cudnn_attention",
                 "_scaled_dot_product_flash_attention_for_cpu"):
        add(name, lambda args, out: ("matmul", args[0],
                                     _attention_flops(args[0], args[1], args[2])))
    return table


def _precision(kind, tensor):
    """The precision a product runs in: its dtype's name, or "tf32" for float32 work that
    PyTorch's settings let use TF32 tensor cores (cuDNN convolutions by default)."""
    import torch

    dtype = str(tensor.dtype).replace("torch.", "")
    if dtype != "float32" or tensor.device.type != "cuda":
        return dtype
    if kind == "convolution":
        allowed = torch.backends.cudnn.allow_tf32
    else:
        allowed = torch.backends.cuda.matmul.allow_tf32
    return "tf32" if allowed else dtype


def _counter_class():
    from torch.utils._python_dispatch import TorchDispatchMode

    class FlopCounter(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.formulas = _formulas()
            self.flops = {}
            self.unreadable = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            formula = self.formulas.get(func.overloadpacket)
            if formula is not None:
                try:
                    kind, operand, flops = formula(args, out)
                    key = _precision(kind, operand)
                    self.flops[key] = self.flops.get(key, 0) + int(flops)
                except Exception:  # an argument form the formula does not know: not counted
                    self.unreadable += 1
            return out

    return FlopCounter


def counted_call(model, inputs):
    """The model's call on `inputs` with its arithmetic counted: (result, {precision: flops}),
    the count None where it could not be made (no dispatch mode, or a product it could not read).
    A call that fails under the counter is made again without it: the model's own errors reach
    the caller as an uncounted call's would, and a model the dispatch mode disturbs still runs."""
    try:
        counter = _counter_class()()
    except Exception:
        return model(*inputs), None
    try:
        with counter:
            result = model(*inputs)
    except Exception:
        return model(*inputs), None
    if counter.unreadable:
        return result, None
    return result, dict(counter.flops)


def matmul_calls(device):
    """Calls whose time gives the device's matmul throughput per precision, under PyTorch's own
    settings (float32 without TF32 unless allowed, and TF32 where a GPU has it). Returns
    [(precision, flops, call)]."""
    import torch

    size = 512 if device == "cpu" else 8192
    calls = []
    kinds = [("float32", torch.float32)]
    if device != "cpu":
        kinds += [("float16", torch.float16), ("bfloat16", torch.bfloat16)]
    for name, dtype in kinds:
        a = torch.ones(size, size, dtype=dtype, device=device)
        b = torch.ones(size, size, dtype=dtype, device=device)
        calls.append((name, 2 * size ** 3, lambda a=a, b=b: torch.mm(a, b)))
    if device != "cpu":
        a = torch.ones(size, size, dtype=torch.float32, device=device)

        def tf32(a=a):
            matmul = torch.backends.cuda.matmul
            before = matmul.allow_tf32
            matmul.allow_tf32 = True
            try:
                return torch.mm(a, a)
            finally:
                matmul.allow_tf32 = before

        calls.append(("tf32", 2 * size ** 3, tf32))
    return calls
