"""python3 -m integrations.grpo sft|grpo ...: the one-GPU trainer's command line.

    python3 -m integrations.grpo sft --model MODEL_DIR --data sft.jsonl --out runs/sft --steps 500
    python3 -m integrations.grpo grpo --model MODEL_DIR --init-adapter runs/sft/checkpoints/step-00000500/adapter \\
        --serve http://127.0.0.1:8765 --tasks all --group-size 8 --steps 200 --out runs/grpo

Run from the repository root (or with it on PYTHONPATH). README.md in this directory has the
whole story.
"""

import argparse
import sys

from .datasets import DataError

EPILOG = "Progress goes to stderr, metrics to OUT/metrics.jsonl, checkpoints to OUT/checkpoints/."


def common_arguments(parser):
    model = parser.add_argument_group("model")
    model.add_argument("--model", required=True,
                       help="a local transformers checkpoint directory, a config .json (random weights), "
                            "or tiny[:SEED] (the pure-PyTorch test model)")
    model.add_argument("--tokenizer", help="tokenizer directory (default: the model directory)")
    model.add_argument("--init-adapter", help="a LoRA adapter (e.g. SFT's) merged into the base before training: "
                                              "it becomes the reference policy")
    model.add_argument("--lora-rank", type=int, default=16)
    model.add_argument("--lora-alpha", type=float, default=32)
    model.add_argument("--lora-dropout", type=float, default=0.0)
    model.add_argument("--lora-targets", default="all-linear",
                       help="module names, comma-separated, or all-linear (default)")
    model.add_argument("--dtype", choices=["auto", "bf16", "fp16", "fp32"], default="auto",
                       help="auto: bf16 on a GPU that has it, else fp32")
    model.add_argument("--device", help="cuda, cuda:N or cpu (default: cuda when available)")
    model.add_argument("--gradient-checkpointing", action="store_true",
                       help="recompute activations in the backward pass (long sequences on one GPU)")
    run = parser.add_argument_group("run")
    run.add_argument("--out", required=True, help="run directory: metrics.jsonl, run.json, checkpoints/")
    run.add_argument("--steps", type=int, help="optimizer steps in all (with --resume: the total, not more)")
    run.add_argument("--resume", action="store_true", help="continue from OUT/checkpoints/latest")
    run.add_argument("--lr", type=float, default=1e-5)
    run.add_argument("--warmup-steps", type=int, default=0)
    run.add_argument("--weight-decay", type=float, default=0.0)
    run.add_argument("--max-grad-norm", type=float, default=1.0, help="0: no clipping")
    run.add_argument("--micro-batch-size", type=int, default=1, help="sequences per forward pass")
    run.add_argument("--save-every", type=int, default=50, help="checkpoint every K steps (and after the last)")
    run.add_argument("--keep-checkpoints", type=int, default=3)
    run.add_argument("--seed", type=int, default=0)


def build_parser():
    parser = argparse.ArgumentParser(prog="python3 -m integrations.grpo",
                                     description="The one-GPU trainer: SFT and GRPO of LoRA adapters against cudal1 "
                                                 "serve.", epilog=EPILOG)
    sub = parser.add_subparsers(dest="command", required=True)

    sft = sub.add_parser("sft", help="supervised fine-tuning on `cudal1 data sft` output", epilog=EPILOG)
    common_arguments(sft)
    sft.add_argument("--data", required=True, action="append", help="a `cudal1 data sft` JSONL file (repeatable)")
    sft.add_argument("--batch-size", type=int, default=8, help="conversations per optimizer step")
    sft.add_argument("--epochs", type=float, help="passes over the data (instead of --steps)")
    sft.add_argument("--max-seq-len", type=int, default=8192,
                     help="tokens per conversation: longer replies are cut, longer prompts skipped")

    grpo = sub.add_parser("grpo", help="GRPO against a running cudal1 serve", epilog=EPILOG)
    common_arguments(grpo)
    grpo.add_argument("--serve", help="cudal1 serve's URL (default $CUDAL1_SERVE_URL or http://127.0.0.1:8765)")
    grpo.add_argument("--token", help="bearer token (default $CUDAL1_SERVE_TOKEN)")
    grpo.add_argument("--tasks", default="all", help="all, or task keys separated by commas")
    grpo.add_argument("--prompts", help="a `cudal1 data rl` JSONL file instead of fresh prompts from the server")
    grpo.add_argument("--prompts-per-step", type=int, default=4, help="B: prompts per step")
    grpo.add_argument("--group-size", type=int, default=8, help="G: completions per prompt")
    grpo.add_argument("--max-new-tokens", type=int, default=1024)
    grpo.add_argument("--max-prompt-tokens", type=int, default=0, help="skip longer prompts (0: no limit)")
    grpo.add_argument("--temperature", type=float, default=1.0)
    grpo.add_argument("--top-p", type=float, default=1.0)
    grpo.add_argument("--inner-steps", type=int, default=1, help="mu: updates per batch of samples")
    grpo.add_argument("--clip-eps", type=float, default=0.2)
    grpo.add_argument("--beta", type=float, default=0.04, help="weight of KL(policy || reference); 0: none")
    grpo.add_argument("--advantage", choices=["server", "reward", "raw"], default="server",
                      help="server: the server's group advantages; reward / raw: computed here from the smoothed "
                           "or the raw rewards")
    grpo.add_argument("--log-completions", action="store_true", help="keep each completion's text in rollouts.jsonl")
    return parser


def run_settings(args, steps):
    from .training import RunSettings

    return RunSettings(out=args.out, steps=steps, lr=args.lr, warmup_steps=args.warmup_steps,
                       weight_decay=args.weight_decay, max_grad_norm=args.max_grad_norm,
                       micro_batch_size=args.micro_batch_size, save_every=args.save_every,
                       keep_checkpoints=args.keep_checkpoints, seed=args.seed, resume=args.resume)


def command_sft(args):
    import math

    from .datasets import sft_examples
    from .loading import load_policy
    from .sft import train_sft

    if (args.steps is None) == (args.epochs is None):
        raise SystemExit("sft: give --steps or --epochs (one of them)")
    policy = load_policy(args)
    examples, skipped = sft_examples(args.data, policy.tokenizer, args.max_seq_len)
    print(f"sft: {len(examples)} examples ({skipped} skipped: prompt longer than --max-seq-len)", file=sys.stderr)
    steps = args.steps if args.steps is not None else math.ceil(args.epochs * len(examples) / args.batch_size)
    train_sft(policy, examples, run_settings(args, steps), args.batch_size,
              {"data": args.data, "skipped": skipped, "max_seq_len": args.max_seq_len})


def grpo_settings(args):
    from .grpo import GrpoSettings

    return GrpoSettings(prompts_per_step=args.prompts_per_step, group_size=args.group_size,
                        max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_p=args.top_p,
                        inner_steps=args.inner_steps, clip_eps=args.clip_eps, beta=args.beta,
                        advantage=args.advantage, max_prompt_tokens=args.max_prompt_tokens,
                        log_completions=args.log_completions)


def command_grpo(args):
    from ..cudal1_client import RewardClient
    from .datasets import FilePrompts, ServePrompts
    from .grpo import train_grpo
    from .loading import load_policy

    if args.steps is None:
        raise SystemExit("grpo: --steps N is required")
    client = RewardClient(args.serve, token=args.token)
    known = client.tasks()
    tasks = known if args.tasks == "all" else [t for t in args.tasks.split(",") if t]
    unknown = sorted(set(tasks) - set(known))
    if unknown:
        raise SystemExit(f"grpo: the server does not know the tasks {unknown} (GET /v1/tasks lists {len(known)})")
    if args.prompts:
        source = FilePrompts(args.prompts, args.seed, args.prompts_per_step, None if args.tasks == "all" else set(tasks))
    else:
        source = ServePrompts(client, tasks, args.seed)
    policy = load_policy(args)
    train_grpo(policy, source, client, run_settings(args, args.steps), grpo_settings(args),
               {"serve": client.url, "tasks": tasks, "prompts": args.prompts})


def main(argv=None):
    args = build_parser().parse_args(argv)
    from ..cudal1_client import ServeError
    from .training import RunError

    try:
        {"sft": command_sft, "grpo": command_grpo}[args.command](args)
    except (DataError, RunError, ServeError, FileNotFoundError) as e:
        print(f"{args.command}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
