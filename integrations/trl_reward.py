"""cudal1 rewards for TRL's trainers (GRPOTrainer's reward_funcs).

TRL calls a reward function as reward_func(prompts=..., completions=..., **kwargs), where every
dataset column is passed by name; it must return one float per completion. The task key of each
completion comes from a dataset column (default "task"):

    from trl import GRPOConfig, GRPOTrainer
    from integrations.trl_reward import make_reward_function
    reward = make_reward_function("http://127.0.0.1:8765", task_column="task")
    trainer = GRPOTrainer(model=..., reward_funcs=[reward], train_dataset=dataset, args=GRPOConfig(...))

Completions are evaluated by `cudal1 serve`; TRL computes its own group advantages, so the
reward returned is the smoothed reward (or the raw speedup reward with field="raw_reward").
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cudal1_client import RewardClient, completion_text  # noqa: E402


def make_reward_function(url=None, task_column="task", field="reward", token=None, timeout=3600.0):
    client = RewardClient(url, token=token, timeout=timeout)
    if field not in ("reward", "raw_reward"):
        raise ValueError("field must be 'reward' (smoothed) or 'raw_reward'")

    def cudal1_reward(prompts=None, completions=None, **kwargs):
        if completions is None:
            raise ValueError("TRL passes completions=[...]; none were given")
        tasks = kwargs.get(task_column)
        if tasks is None:
            raise ValueError(f"the dataset has no column '{task_column}' with the task keys "
                             f"(columns passed: {sorted(kwargs)}); pass task_column=...")
        if len(tasks) != len(completions):
            raise ValueError(f"{len(completions)} completions but {len(tasks)} task keys")
        items = [{"task": str(task), "completion": completion_text(c)} for task, c in zip(tasks, completions)]
        step = None
        state = kwargs.get("trainer_state")
        if state is not None and getattr(state, "global_step", None) is not None:
            step = int(state.global_step)
        return [float(r[field]) for r in client.rewards(items, step=step)]

    # TRL logs each reward function under its __name__.
    cudal1_reward.__name__ = "cudal1_" + field
    return cudal1_reward
