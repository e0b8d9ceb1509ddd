"""cudal1 rewards for verl (custom_reward_function).

verl loads a file and calls a function of it per response, or per batch with the batch reward
manager. The ground truth of each sample is its task key; the server's address comes from
reward_kwargs (url=..., token=...) or $CUDAL1_SERVE_URL:

    custom_reward_function.path=integrations/verl_reward.py
    custom_reward_function.name=compute_score          # one response per call
    # or, evaluating a whole batch at once (much faster):
    reward_model.reward_manager=batch custom_reward_function.name=compute_score_batch
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cudal1_client import RewardClient  # noqa: E402

_clients = {}


def _client(url, token):
    key = (url, token)
    if key not in _clients:
        _clients[key] = RewardClient(url, token=token)
    return _clients[key]


def _score(result):
    # verl logs every key of a returned dict; "score" is the reward.
    return {
        "score": float(result["reward"]),
        "raw_reward": float(result["raw_reward"]),
        "speedup": float(result["speedup"] or 0.0),
        "correct": 1.0 if result["status"] == "ok" else 0.0,
        "rejected": 1.0 if result["status"] == "rejected" else 0.0,
    }


def compute_score(data_source, solution_str, ground_truth, extra_info=None, url=None, token=None, **kwargs):
    """One response: solution_str is the model's reply, ground_truth the task key."""
    result = _client(url, token).rewards([{"task": str(ground_truth), "completion": solution_str}])[0]
    return _score(result)


def compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos=None, url=None, token=None,
                        **kwargs):
    """A batch (verl's batch reward manager): one request for every response."""
    items = [{"task": str(t), "completion": s} for s, t in zip(solution_strs, ground_truths)]
    if len(items) != len(solution_strs) or len(items) != len(ground_truths):
        raise ValueError(f"{len(solution_strs)} responses but {len(ground_truths)} ground truths")
    return [_score(r) for r in _client(url, token).rewards(items)]
