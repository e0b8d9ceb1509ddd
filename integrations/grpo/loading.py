"""The policy a command line names. Its own module: it knows every kind of policy (tiny.py builds
on policy.py), so policy.py need not import its own subclasses.
"""
import os

from . import tiny
from .policy import TransformersPolicy


def load_policy(args):
    """The policy the command line names: --model tiny[:SEED] (the pure-PyTorch test model) or
    a transformers checkpoint directory / config .json."""
    lora = dict(lora_rank=args.lora_rank, lora_alpha=args.lora_alpha, lora_dropout=args.lora_dropout,
                init_adapter=args.init_adapter)
    if args.model == "tiny" or args.model.startswith("tiny:"):
        seed = int(args.model.split(":", 1)[1]) if ":" in args.model else 0
        return tiny.TinyPolicy(seed=seed, device=args.device or "cpu", **lora)
    if not os.path.exists(args.model):
        raise FileNotFoundError(f"--model {args.model}: no such directory or config file (nothing is downloaded)")
    return TransformersPolicy.load(args.model, tokenizer_path=args.tokenizer, dtype=args.dtype, device=args.device,
                                   seed=args.seed, lora_targets=args.lora_targets,
                                   gradient_checkpointing=args.gradient_checkpointing, **lora)

