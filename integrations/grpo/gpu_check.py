#!/usr/bin/env python3
"""The trainer on a GPU with transformers + peft, without any download: a tiny random
Llama/Qwen2 model built from a config, a byte-level BPE tokenizer trained in memory on a few
texts (with a chat template), LoRA adapters, and `cudal1 serve --device cuda` as the reward.

    python3 integrations/grpo/gpu_check.py --cudal1 build/cudal1 --summary gpu-check.json

Checks, each recorded in the summary (and the exit status is 1 if one fails):
  - SFT: the loss is finite and falls over 3 steps on a fixed batch; 3 steps of `train_sft`
    write a checkpoint;
  - GRPO: 3 steps with a scripted policy (known-good and known-bad completions of
    tests/fixtures/tasks/scale_relu.py, each one new code so the server evaluates it): rewards
    recorded in the server's store, advantages zero-mean per group, the loss finite; the
    checkpoint restores the same adapter, and a resumed run samples its 4th step with
    model.generate;
  - the command line: `sft` then `grpo --init-adapter` on the same model through
    --model CONFIG.json --tokenizer DIR, with gradient checkpointing.
The summary holds times, rewards per step and the reward service's seconds and items per
second during the GRPO steps. Uses only stable APIs: AutoModelForCausalLM.from_config,
generate, peft.LoraConfig and get_peft_model.
"""

import argparse
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402

from integrations.cudal1_client import RewardClient  # noqa: E402
from integrations.grpo import chat, checkpoint, datasets, sft  # noqa: E402
from integrations.grpo.grpo import GrpoSettings, train_grpo  # noqa: E402
from integrations.grpo.policy import TransformersPolicy, config_from_fields  # noqa: E402
from integrations.grpo.scripted import ScriptedPolicy  # noqa: E402
from integrations.grpo.training import RunSettings  # noqa: E402

TASK_FILE = "tests/fixtures/tasks/scale_relu.py"
GOOD, BAD = "tests/fixtures/candidates/fast.py", "tests/fixtures/candidates/wrong.py"
SPECIAL = ["<|pad|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def read(path):
    with open(os.path.join(ROOT, path)) as f:
        return f.read()


def completion(code):
    return f"## Performance Analysis\nOne pass over memory.\n\n## Code Implementation\n```python\n{code}\n```\n"


class Checks:
    """Named pass/fail results; a failing check records its reason and the run goes on."""

    def __init__(self):
        self.results = {}

    def expect(self, name, condition, detail=""):
        self.results[name] = {"ok": bool(condition), "detail": detail}
        print(f"gpu_check: {'ok  ' if condition else 'FAIL'} {name} {detail}", file=sys.stderr, flush=True)
        return bool(condition)

    def stage(self, name, function, *args):
        try:
            return function(*args)
        except Exception as e:  # the summary says which stage broke and how
            self.expect(name + " ran", False, f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
            return None

    @property
    def ok(self):
        return all(r["ok"] for r in self.results.values())


# --- the server ------------------------------------------------------------------------------

class ServeProcess:
    """cudal1 serve on a free port over a one-task suite (scale_relu)."""

    def __init__(self, binary, work, device, time_budget, key):
        suite = os.path.join(work, "suite", os.path.dirname(key))
        os.makedirs(suite, exist_ok=True)
        shutil.copy(os.path.join(ROOT, TASK_FILE), os.path.join(work, "suite", key + ".py"))
        self.db = os.path.join(work, "serve.db")
        port_file = os.path.join(work, "serve.port")
        self.log_path = os.path.join(work, "serve.log")
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [binary, "serve", "--suite", os.path.join(work, "suite"), "--device", device, "--port", "0",
             "--port-file", port_file, "--db", self.db, "--hacks", os.path.join(work, "hacks"),
             "--work-dir", os.path.join(work, "serve-work"), "--time-budget", str(time_budget)],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 300
        while not self.port(port_file):
            if self.process.poll() is not None or time.time() > deadline:
                self.stop()
                raise RuntimeError(f"cudal1 serve did not start; its log: {self.log_path}")
            time.sleep(0.2)
        self.url = "http://127.0.0.1:" + self.port(port_file)

    @staticmethod
    def port(path):
        if not os.path.exists(path):
            return ""
        with open(path) as f:
            return f.read().strip()

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(120)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.log.close()


# --- the tiny transformers model -------------------------------------------------------------

def train_tokenizer(texts, out_dir):
    """A byte-level BPE (any text round-trips) trained on `texts`, with ChatML-style turns;
    saved to out_dir for the command line."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    try:
        from transformers import PreTrainedTokenizerFast
    except ImportError:  # transformers 5 names the tokenizers-backed class this way
        from transformers import TokenizersBackend as PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1024, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    backend.train_from_iterator(texts, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<|pad|>", eos_token="<|im_end|>",
                                        clean_up_tokenization_spaces=False)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out_dir)
    return tokenizer


def model_config(arch, tokenizer):
    """A few-hundred-thousand-parameter decoder of the named architecture, as config.json fields."""
    return {"model_type": arch, "vocab_size": len(tokenizer), "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "max_position_embeddings": 8192, "tie_word_embeddings": False,
            "pad_token_id": tokenizer.pad_token_id, "eos_token_id": tokenizer.eos_token_id,
            "bos_token_id": tokenizer.eos_token_id}


def build_policy(config_fields, tokenizer, device, dtype, seed=0, **lora):
    import transformers

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        base = transformers.AutoModelForCausalLM.from_config(config_from_fields(transformers, config_fields)).to(dtype)
    return TransformersPolicy.wrap(base, tokenizer, device, lora_rank=8, lora_alpha=16,
                                   lora_targets="q_proj,k_proj,v_proj,o_proj", **lora)


# --- the stages ------------------------------------------------------------------------------

def check_sft(policy, examples, out, checks, summary):
    fixed = examples[:4]
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=5e-3)
    losses = []
    policy.model.train()
    for _ in range(3):
        loss, _, _ = sft.batch_loss(policy, fixed, micro_batch_size=2)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss)
    checks.expect("sft loss finite", all(math.isfinite(x) for x in losses), str(losses))
    checks.expect("sft loss falls on a fixed batch", losses[-1] < losses[0], str(losses))
    start = time.perf_counter()
    sft.train_sft(policy, examples, RunSettings(out=out, steps=3, lr=5e-3, save_every=3, micro_batch_size=2),
                  batch_size=4)
    summary["sft"] = {"fixed_batch_losses": losses, "train_sft_s": time.perf_counter() - start,
                      "metrics": [r for _, r in datasets.read_jsonl(os.path.join(out, "metrics.jsonl"))]}
    checks.expect("sft checkpoint written", checkpoint.latest(out) is not None, str(checkpoint.latest(out)))


def check_grpo(make_policy, client, key, db, out, texts, checks, summary):
    prompts = datasets.ServePrompts(client, [key], seed=0)
    grpo = GrpoSettings(prompts_per_step=2, group_size=4, max_new_tokens=32, beta=0.04)
    settings = RunSettings(out=out, steps=3, lr=5e-3, save_every=3, micro_batch_size=4)
    policy = make_policy()
    start = time.perf_counter()
    run = train_grpo(ScriptedPolicy(policy, texts, unique=True), prompts, client, settings, grpo)
    seconds = time.perf_counter() - start
    metrics = [r for _, r in datasets.read_jsonl(os.path.join(out, "metrics.jsonl"))]
    logged = [r for _, r in datasets.read_jsonl(os.path.join(out, "rollouts.jsonl"))]
    summary["grpo"] = {"seconds": seconds, "steps": step_summary(os.path.join(out, "metrics.jsonl"))}
    checks.expect("grpo loss finite", all(math.isfinite(m["loss"]) for m in metrics), str([m["loss"] for m in metrics]))
    sums = {}
    for r in logged:
        sums[(r["step"], r["prompt"])] = sums.get((r["step"], r["prompt"]), 0.0) + r["advantage_used"]
    worst = max(abs(v) for v in sums.values())
    checks.expect("grpo advantages zero-mean per group", worst < 1e-5, f"max |sum| {worst:.2e}")
    checks.expect("grpo rewards differ within groups", {r["status"] for r in logged} >= {"ok", "incorrect"},
                  str(sorted({r["status"] for r in logged})))
    if db:
        with sqlite3.connect(db) as connection:
            rows = connection.execute("SELECT step, group_id FROM rewards WHERE request_id LIKE ?",
                                      (f"grpo-{run.run_id}-%",)).fetchall()
        summary["grpo"]["store_rows"] = len(rows)
        checks.expect("grpo rewards recorded in the store", sorted({r[0] for r in rows}) == [1, 2, 3] and
                      len(rows) == len(logged), f"{len(rows)} rows for {len(logged)} completions")

    fresh = make_policy()
    state = checkpoint.load(checkpoint.latest(out), fresh, torch.optim.AdamW(fresh.trainable_parameters()), "grpo")
    same = all(torch.equal(t, fresh.trainable_state()[n]) for n, t in policy.trainable_state().items())
    checks.expect("grpo checkpoint restores step and adapter", state["step"] == 3 and same, f"step {state['step']}")
    # One more step, resumed, with completions sampled by model.generate.
    resumed = train_grpo(make_policy(), prompts, client, RunSettings(out=out, steps=4, lr=5e-3, save_every=3,
                                                                      micro_batch_size=4, resume=True), grpo)
    last = [r for _, r in datasets.read_jsonl(os.path.join(out, "metrics.jsonl"))][-1]
    summary["grpo"]["sampled_step"] = last
    checks.expect("grpo resumed and sampled a step", resumed.start_step == 3 and last["step"] == 4 and
                  math.isfinite(last["loss"]), f"start {resumed.start_step}, last step {last['step']}")


def step_summary(metrics_path):
    """The per-step numbers the bench results quote, from a run's metrics.jsonl."""
    keys = ("step", "loss", "kl", "reward_mean", "reward_std", "raw_reward_mean", "frac_ok", "frac_rejected",
            "frac_unparseable", "evaluated", "completions", "reward_s", "reward_items_per_s", "generate_s",
            "gen_tokens_per_s", "train_s", "step_s")
    return [{k: m.get(k) for k in keys} for _, m in datasets.read_jsonl(metrics_path)]


def check_cli(work, config_path, tokenizer_dir, sft_file, url, key, checks, summary):
    base = [sys.executable, "-m", "integrations.grpo"]
    model = ["--model", config_path, "--tokenizer", tokenizer_dir, "--lora-rank", "8", "--lora-targets",
             "q_proj,v_proj", "--gradient-checkpointing", "--save-every", "3"]
    commands = {
        "sft": base + ["sft"] + model + ["--data", sft_file, "--out", os.path.join(work, "cli-sft"), "--steps", "3",
                                         "--batch-size", "4", "--micro-batch-size", "2", "--lr", "5e-3"],
        "grpo": base + ["grpo"] + model + ["--init-adapter",
                                           os.path.join(work, "cli-sft", "checkpoints", "step-00000003", "adapter"),
                                           "--serve", url, "--tasks", key, "--steps", "3", "--prompts-per-step", "2",
                                           "--group-size", "4", "--max-new-tokens", "64", "--micro-batch-size", "4",
                                           "--out", os.path.join(work, "cli-grpo")],
    }
    summary["cli"] = {}
    for name, command in commands.items():
        start = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1800)
        summary["cli"][name] = {"command": " ".join(command[1:]), "seconds": time.perf_counter() - start,
                                "returncode": done.returncode, "stderr_tail": done.stderr[-3000:]}
        checks.expect(f"cli {name} ran", done.returncode == 0, done.stderr[-500:] if done.returncode else "")
    grpo_metrics = os.path.join(work, "cli-grpo", "metrics.jsonl")
    if os.path.exists(grpo_metrics):
        summary["cli"]["grpo"]["steps"] = step_summary(grpo_metrics)


MARKER = ".cudal1-gpu-check"


def fresh_work_dir(path):
    """An empty directory for the runs: --work is emptied if an earlier check made it (so the
    runs start fresh), refused if it holds anything else."""
    if not path:
        path = tempfile.mkdtemp(prefix="cudal1-gpu-check-")
    elif os.path.exists(path) and os.listdir(path):
        if not os.path.exists(os.path.join(path, MARKER)):
            raise SystemExit(f"--work {path} is not empty and was not made by gpu_check: choose another directory")
        shutil.rmtree(path)
    os.makedirs(path, exist_ok=True)
    open(os.path.join(path, MARKER), "w").close()
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--summary", required=True, help="where to write the JSON summary")
    parser.add_argument("--cudal1", default=os.path.join(ROOT, "build", "cudal1"),
                        help="the cudal1 binary: a server over scale_relu is started with it")
    parser.add_argument("--serve", help="use this running server instead (its suite must hold scale_relu.py as --task)")
    parser.add_argument("--db", help="with --serve: the server's store, to check the rewards recorded")
    parser.add_argument("--task", default="level1/1_ScaleRelu", help="the task key of tests/fixtures/tasks/scale_relu.py")
    parser.add_argument("--device", default="cuda", help="the trainer's and the server's device")
    parser.add_argument("--arch", choices=["llama", "qwen2"], default="qwen2")
    parser.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    parser.add_argument("--time-budget", type=float, default=5, help="the server's timing seconds per candidate")
    parser.add_argument("--work", help="keep the runs here (default: a temporary directory)")
    args = parser.parse_args()

    import peft
    import tokenizers
    import transformers

    work = fresh_work_dir(args.work)
    checks = Checks()
    summary = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "work": work, "arch": args.arch, "dtype": args.dtype,
               "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
               "versions": {"python": sys.version.split()[0], "torch": torch.__version__,
                            "transformers": transformers.__version__, "peft": peft.__version__,
                            "tokenizers": tokenizers.__version__}}
    server = None
    try:
        if args.serve:
            url, db = args.serve, args.db
        else:
            server = ServeProcess(args.cudal1, work, args.device, args.time_budget, args.task)
            url, db = server.url, server.db
        client = RewardClient(url, timeout=1800)
        texts = [completion(read(GOOD)), completion(read(BAD))]
        served = client.prompts(args.task, n=4, seed=1)
        # SFT data in `cudal1 data sft`'s shape: a contrastive prompt and the good completion.
        sft_file = os.path.join(work, "sft.jsonl")
        with open(sft_file, "w") as f:
            for p in served:
                f.write(json.dumps({"messages": p["messages"] + [{"role": "assistant", "content": texts[0]}],
                                    "task": args.task, "stage": "sft"}) + "\n")
        corpus = [m["content"] for p in served for m in p["messages"]] + texts + [read(TASK_FILE)]
        tokenizer = train_tokenizer(corpus, os.path.join(work, "tokenizer"))
        prompt_tokens = len(chat.prompt_ids(tokenizer, served[0]["messages"]))
        checks.expect("tokenizer round-trips code", tokenizer.decode(chat.encode(tokenizer, texts[0]),
                                                                     clean_up_tokenization_spaces=False) == texts[0])
        fields = model_config(args.arch, tokenizer)
        config_path = os.path.join(work, "model_config.json")
        with open(config_path, "w") as f:
            json.dump(fields, f, indent=1)
        dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32

        def make_policy():
            return build_policy(fields, tokenizer, args.device, dtype)

        probe = make_policy()
        summary["model"] = {"config": fields, "prompt_tokens": prompt_tokens, "vocab": len(tokenizer),
                            "parameters": sum(p.numel() for p in probe.model.parameters()),
                            "trainable": sum(p.numel() for p in probe.trainable_parameters())}
        examples = datasets.sft_examples([sft_file], tokenizer)[0]
        checks.stage("sft", check_sft, probe, examples, os.path.join(work, "sft"), checks, summary)
        checks.stage("grpo", check_grpo, make_policy, client, args.task, db, os.path.join(work, "grpo"), texts, checks,
                     summary)
        checks.stage("cli", check_cli, work, config_path, os.path.join(work, "tokenizer"), sft_file, url, args.task,
                     checks, summary)
    except Exception as e:
        checks.expect("setup", False, f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
    finally:
        if server:
            server.stop()
            summary["serve_log"] = server.log_path
    summary["checks"], summary["ok"] = checks.results, checks.ok
    with open(args.summary, "w") as f:
        json.dump(summary, f, indent=1, default=str)
    print(f"gpu_check: {'PASS' if checks.ok else 'FAIL'}; summary in {args.summary}", file=sys.stderr)
    return 0 if checks.ok else 1


if __name__ == "__main__":
    sys.exit(main())
