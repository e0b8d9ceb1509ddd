#!/usr/bin/env python3
"""A stage-1 -> stage-3 rehearsal of CUDA-L1's training loop on one GPU (docs/rl.md), with a
tiny random model and the scripted test LLM, timing every command and counting what each
stage wrote:

  1. `cudal1 generate` over two CUDA tasks (examples/suite, level 1) against the scripted
     OpenAI-compatible test server (tests/llm_server): its replies are fixed files of this
     repository (a fused CUDA kernel, a PyTorch rewrite, a wrong one), not a model's output;
  2. `cudal1 data sft` from the store, then `python3 -m integrations.grpo sft` on a tiny random
     Qwen2 model (transformers + peft, a tokenizer trained in memory);
  3. `cudal1 serve` on the same store, `cudal1 data rl`, and `python3 -m integrations.grpo grpo`
     from the SFT adapter, against the server (the random policy writes no working code, so its
     rewards sit at the floor: the rehearsal checks the plumbing, not learning).

    python3 bench/rl_rehearsal.py --cudal1 build-gpu/cudal1 --server build-gpu/tests/llm_server/cudal1_test_llm_server \
        --out $OUT/rehearsal.json
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "integrations", "grpo"))

TASKS = {"1_GeluTanh": "examples/l1_gelu_tanh", "2_RmsNorm": "examples/l1_rms_norm"}


def reply(code):
    return ("## Performance Analysis\nThe reference makes several passes over memory.\n\n"
            "## Algorithm Design\nFuse the passes.\n\n## Code Implementation\n```python\n" + code + "\n```\n")


def timed(record, name, command, **kwargs):
    start = time.time()
    print("$ " + " ".join(command), flush=True)
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, **kwargs)
    record[name] = {"seconds": round(time.time() - start, 1), "exit": result.returncode,
                    "stderr_tail": result.stderr[-1500:]}
    print(f"  {name}: exit {result.returncode} in {record[name]['seconds']} s", flush=True)
    if result.returncode != 0:
        print(result.stderr[-3000:], flush=True)
    return result


def lines(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def wait_for_port(path, process, what):
    deadline = time.time() + 300
    while not (os.path.exists(path) and open(path).read().strip()):
        if process.poll() is not None or time.time() > deadline:
            raise SystemExit(f"{what} did not start")
        time.sleep(0.2)
    return open(path).read().strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cudal1", required=True)
    parser.add_argument("--server", required=True, help="cudal1_test_llm_server")
    parser.add_argument("--out", required=True, help="the summary JSON")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--grpo-steps", type=int, default=3)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="cudal1-rehearsal-")
    suite = os.path.join(work, "suite")
    os.makedirs(os.path.join(suite, "level1"))
    routes = []
    for name, folder in TASKS.items():
        shutil.copy(os.path.join(ROOT, folder, "task.py"), os.path.join(suite, "level1", name + ".py"))
        replies = []
        for file in ("fast.py", "fast_torch.py", "wrong.py"):
            path = os.path.join(work, f"{name}-{file}.md")
            with open(path, "w") as f:
                f.write(reply(open(os.path.join(ROOT, folder, file)).read()))
            replies.append({"content_file": path})
        routes.append({"match": name, "replies": replies})
    # Stage 1 flags every speedup over 2x the reference for review (a reward-checking LLM): the
    # scripted server answers those reviews with a fixed "legitimate" so that the verified
    # replies reach the SFT set. Scripted as well: the rehearsal checks the plumbing.
    review = {"match": "Review of a suspicious benchmark result",
              "default": {"content": '{"verdict": "legitimate", "class": "", '
                                     '"reasoning": "scripted review of the rehearsal"}'}}
    script = os.path.join(work, "script.json")
    with open(script, "w") as f:
        json.dump({"routes": [review] + routes}, f)
    summary = {"date": time.strftime("%Y-%m-%d"), "device": args.device, "commands": {}, "rows": {},
               "note": "stage 1's replies and the reviews of its large speedups come from the scripted test server "
                       "(fixed files), not a model"}
    cmd = summary["commands"]
    db = os.path.join(work, "stages.db")
    eval_args = ["--device", args.device, "--time-budget", "3"]

    llm_log = open(os.path.join(work, "llm.log"), "w")
    llm = subprocess.Popen([args.server, "--script", script, "--port", "0", "--port-file",
                            os.path.join(work, "llm.port")], stdout=llm_log, stderr=subprocess.STDOUT)
    try:
        port = wait_for_port(os.path.join(work, "llm.port"), llm, "the test LLM server")
        # Stage 1: one-shot prompts for every task, every reply evaluated on the GPU.
        timed(cmd, "generate", [args.cudal1, "generate", "--suite", suite, "--llm", f"http://127.0.0.1:{port}/v1",
                                "--model", "scripted", "--samples", "3", "--db", db,
                                "--out", os.path.join(work, "gen"), "-q"] + eval_args)
    finally:
        llm.terminate()
        llm.wait()
    sft_file = os.path.join(work, "sft.jsonl")
    timed(cmd, "data_sft", [args.cudal1, "data", "sft", "--db", db, "--out", sft_file])
    summary["rows"]["sft"] = len(lines(sft_file)) if os.path.exists(sft_file) else 0

    # The tiny model: a tokenizer trained on the texts it will see, a random Qwen2 config.
    import gpu_check  # integrations/grpo/gpu_check.py: the same tiny model as the GPU check
    texts = [m["content"] for r in lines(sft_file) for m in r["messages"]] if os.path.exists(sft_file) else []
    texts += [open(os.path.join(ROOT, f, "task.py")).read() for f in TASKS.values()]
    tokenizer = gpu_check.train_tokenizer(texts, os.path.join(work, "tokenizer"))
    config = os.path.join(work, "model_config.json")
    with open(config, "w") as f:
        json.dump(gpu_check.model_config("qwen2", tokenizer), f)
    model = ["--model", config, "--tokenizer", os.path.join(work, "tokenizer"), "--device", args.device]
    timed(cmd, "trainer_sft", [sys.executable, "-m", "integrations.grpo", "sft", *model, "--data", sft_file,
                               "--out", os.path.join(work, "sft"), "--steps", "3", "--batch-size", "2",
                               "--max-seq-len", "4096", "--lr", "1e-3"])

    # Stage 3: the reward service on the same store, a prompt set, GRPO from the SFT adapter.
    serve_log = open(os.path.join(work, "serve.log"), "w")
    serve = subprocess.Popen([args.cudal1, "serve", "--suite", suite, "--db", db, "--port", "0", "--port-file",
                              os.path.join(work, "serve.port"), "--hacks", os.path.join(work, "hacks"),
                              "--work-dir", os.path.join(work, "serve-work")] + eval_args,
                             stdout=serve_log, stderr=subprocess.STDOUT)
    try:
        url = "http://127.0.0.1:" + wait_for_port(os.path.join(work, "serve.port"), serve, "cudal1 serve")
        rl_file = os.path.join(work, "rl.jsonl")
        timed(cmd, "data_rl", [args.cudal1, "data", "rl", "--suite", suite, "--db", db, "--n", "2",
                               "--device", "cuda" if args.device.startswith("cuda") else "cpu", "--out", rl_file])
        summary["rows"]["rl"] = len(lines(rl_file)) if os.path.exists(rl_file) else 0
        # checkpoints/latest holds the name of the newest checkpoint directory.
        pointer = os.path.join(work, "sft", "checkpoints", "latest")
        adapter = os.path.join(work, "sft", "checkpoints", open(pointer).read().strip(), "adapter") \
            if os.path.exists(pointer) else ""
        init = ["--init-adapter", adapter] if adapter else []
        timed(cmd, "trainer_grpo", [sys.executable, "-m", "integrations.grpo", "grpo", *model, *init,
                                    "--serve", url, "--tasks", "all",
                                    "--prompts-per-step", "2", "--group-size", "4", "--max-new-tokens", "96",
                                    "--steps", str(args.grpo_steps), "--out", os.path.join(work, "grpo")])
        with urllib.request.urlopen(url + "/metrics") as r:
            summary["serve_metrics"] = [l for l in r.read().decode().splitlines()
                                        if l.startswith(("cudal1_evaluations_total", "cudal1_rewards_total",
                                                         "cudal1_device_busy_seconds_total",
                                                         "cudal1_reward_cache_hits_total"))]
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(300)
    metrics = os.path.join(work, "grpo", "metrics.jsonl")
    summary["grpo_steps"] = lines(metrics) if os.path.exists(metrics) else []
    import sqlite3
    with sqlite3.connect(db) as con:
        summary["rows"]["rewards"] = con.execute("SELECT count(*) FROM rewards").fetchone()[0]
        summary["rows"]["verdicts_by_status"] = dict(con.execute(
            "SELECT status, count(*) FROM verdicts GROUP BY status").fetchall())
        summary["stage1_verdicts"] = [
            {"status": status, "speedup": speedup, "flags": json.loads(verdict or "{}").get("flags", [])}
            for status, speedup, verdict in con.execute(
                "SELECT v.status, v.speedup, v.verdict FROM verdicts v JOIN candidates c ON c.id = v.candidate_id "
                "WHERE c.kind = 'generated'").fetchall()]
    with open(args.out, "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps({k: v for k, v in summary.items() if k != "grpo_steps"}, indent=1))
    ok = all(c["exit"] == 0 for c in cmd.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
