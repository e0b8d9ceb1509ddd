"""A small client of `cudal1 serve` (standard library only), shared by the trainer adapters.

    client = RewardClient("http://127.0.0.1:8765")
    results = client.rewards([{"task": "level1/1_Name", "completion": text, "group": 0}])
    prompts = client.prompts("level1/1_Name", n=8)

The server's address comes from the argument, else $CUDAL1_SERVE_URL, else
http://127.0.0.1:8765; the bearer token from the argument, else $CUDAL1_SERVE_TOKEN.
"""

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request

DEFAULT_URL = "http://127.0.0.1:8765"


class ServeError(RuntimeError):
    """The server refused a request (4xx/5xx) or could not be reached."""


class RewardClient:
    def __init__(self, url=None, token=None, timeout=3600.0, retries=3):
        self.url = (url or os.environ.get("CUDAL1_SERVE_URL") or DEFAULT_URL).rstrip("/")
        self.token = token if token is not None else os.environ.get("CUDAL1_SERVE_TOKEN")
        # A batch of new kernels takes minutes to build and time: the default waits an hour.
        self.timeout = timeout
        self.retries = retries

    def _call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        last = None
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as reply:
                    return json.loads(reply.read().decode())
            except urllib.error.HTTPError as e:
                detail = e.read().decode(errors="replace")
                try:
                    detail = json.loads(detail).get("error", detail)
                except ValueError:
                    pass
                # The request itself is wrong: asking again changes nothing.
                raise ServeError(f"cudal1 serve answered {e.code} to {method} {path}: {detail}") from None
            except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
                # The server repeats the answer of an identical request, so a retry never
                # counts rewards twice.
                last = e
                time.sleep(min(30, 2 ** attempt))
        raise ServeError(f"cannot reach cudal1 serve at {self.url}: {last}")

    def rewards(self, items, step=None, request_id=None):
        """POST /v1/rewards: one result dict per item, in order."""
        body = {"items": list(items)}
        if step is not None:
            body["step"] = int(step)
        if request_id is not None:
            body["request_id"] = request_id
        return self._call("POST", "/v1/rewards", body)["results"]

    def prompts(self, task, n=1, seed=None):
        """GET /v1/prompts: n contrastive prompts ({"messages", "exemplars"}) for a task."""
        query = {"task": task, "n": n}
        if seed is not None:
            query["seed"] = seed
        return self._call("GET", "/v1/prompts?" + urllib.parse.urlencode(query))["prompts"]

    def tasks(self):
        """GET /v1/tasks: the task keys the server answers for."""
        return [t["key"] for t in self._call("GET", "/v1/tasks")["tasks"]]


def completion_text(completion):
    """A completion as trainers pass it: a string, or a conversation (a list of {"role",
    "content"} messages, the last assistant message being the reply)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    if isinstance(completion, (list, tuple)):
        for message in reversed(completion):
            if isinstance(message, dict) and message.get("role", "assistant") == "assistant":
                return str(message.get("content", ""))
        return ""
    raise TypeError(f"a completion must be a string or a list of messages, not {type(completion).__name__}")
