"""The worker's batched `sample` request, driven over its pipes (CPU): a batch returns one sample
per input set, with the time its steps took; the spot check's outputs are those of the sample the
request names, the same as a single sample of that set returns; malformed batches are refused.

Unseen input sets (prepare_timing's "unseen") are used once each, have the values of their own
seeds, and are not listed by Python's garbage collector while the worker keeps them.

Usage: batch_samples.py WORKER TASK PROBE_TASK
"""
import json
import os
import struct
import subprocess
import sys


class Worker:
    def __init__(self, binary):
        to_child, self._request = os.pipe()
        self._reply, from_child = os.pipe()
        os.set_inheritable(to_child, True)
        os.set_inheritable(from_child, True)
        self._process = subprocess.Popen(
            ["bash", "-c", "exec %s serve 3<&%d 4>&%d" % (binary, to_child, from_child)],
            close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        os.close(to_child)
        os.close(from_child)
        self._out = os.fdopen(self._request, "wb")
        self._in = os.fdopen(self._reply, "rb")

    def call(self, request):
        self._out.write((json.dumps(request) + "\n").encode())
        self._out.flush()
        line = self._in.readline()
        if not line:
            raise SystemExit("the worker closed its pipe: %s" % self._process.stderr.read().decode())
        header = json.loads(line)
        payload = self._in.read(header.get("payload_bytes", 0)) if header.get("payload_bytes") else b""
        return header, payload

    def close(self):
        self._out.write(b'{"op": "exit"}\n')
        self._out.flush()
        self._process.wait(timeout=60)


def expect(condition, what):
    if not condition:
        raise SystemExit("FAIL: " + what)
    print("ok:", what)


def main():
    binary, task, probe = sys.argv[1], sys.argv[2], sys.argv[3]
    worker = Worker(binary)
    header, _ = worker.call({"op": "load", "role": "reference", "task": task, "device": "cpu",
                             "init_seed": 3})
    expect(header["ok"], "the reference loads")
    header, _ = worker.call({"op": "prepare_timing", "seed": 11, "pool_size": 4, "streams": 65})
    expect(not header["ok"] and "1 to 64" in header.get("error", ""), "refused: 65 streams")
    header, _ = worker.call({"op": "prepare_timing", "seed": 11, "pool_size": 4, "streams": 4})
    expect(header["ok"] and header["streams"] == 1 and header["streams_unavailable"] == "not a GPU",
           "streams in turn: none on the CPU, and why")
    header, _ = worker.call({"op": "prepare_timing", "seed": 11, "pool_size": 4})
    expect(header["ok"] and header["pool"] == 4 and header["streams"] == 1
           and "streams_unavailable" not in header, "a pool of 4 input sets, on the current stream")

    header, payload = worker.call({"op": "sample", "sets": [0, 1, 2, 3, 4, 5],
                                   "traced": [True, False, True, False, True, False],
                                   "check": {"index": 4, "seed": 99, "elements": 0}})
    expect(header["ok"], "a batch of 6 samples is taken")
    samples = header["samples"]
    expect(len(samples) == 6 and all(s["ms"] > 0 and s["mode"] == "window" for s in samples),
           "one timed sample per input set, on the window clock")
    expect(set(header["steps_s"]) == {"copy", "timed", "outputs", "trace"}
           and all(v >= 0 for v in header["steps_s"].values()),
           "the batch says where its time went")
    expect(header["worker_s"] >= header["steps_s"]["timed"], "the worker's own time covers the calls")
    expect(len(header["outputs"]) == 1 and len(payload) > 0, "the checked sample's outputs come back")

    # Set 4 of a pool of 4 is set 0 again: a single sample of set 0 returns the same outputs.
    single, single_payload = worker.call({"op": "sample", "set": 0, "return_outputs": True,
                                          "check_seed": 99, "check_elements": 0})
    expect(single["ok"] and "samples" not in single, "a single sample replies as before")
    expect(single_payload == payload and single["outputs"] == header["outputs"],
           "the checked sample's outputs are its own input set's")

    refused = [
        ({"op": "sample", "sets": [0, 1], "check": {"index": 2}}, "outside the batch"),
        ({"op": "sample", "sets": [0, 1], "traced": [True]}, "one flag per input set"),
        ({"op": "sample", "sets": []}, "1 to 4096"),
        ({"op": "sample", "sets": [0, 1], "return_outputs": True}, "single samples only"),
    ]
    for request, reason in refused:
        header, _ = worker.call(request)
        expect(not header["ok"] and reason in header.get("error", ""),
               "refused: %s (%s)" % (json.dumps(request), reason))

    # Unseen input sets: made from seeds of their own, each for one call.
    header, _ = worker.call({"op": "prepare_timing", "seed": 12, "pool_size": 4, "unseen": 2})
    expect(header["ok"] and header["unseen"] == 2 and header["unseen_hidden"]
           and len(header["unseen_inputs"]) == 2, "2 unseen input sets, kept as bytes")
    digests = {header["inputs"][0]["digest"], header["last_inputs"][0]["digest"]}
    digests |= {d[0]["digest"] for d in header["unseen_inputs"]}
    expect(len(digests) == 4, "the unseen sets' values are neither the pool's nor each other's")
    header, payload = worker.call({"op": "sample", "sets": [1, {"unseen": 0}],
                                   "check": {"index": 1, "seed": 5, "elements": 0}})
    expect(header["ok"] and len(header["samples"]) == 2, "a batch takes an unseen set beside the pool's")
    import torch  # the task's answer for the unseen set's seed, computed here
    torch.manual_seed(12 + (1 << 20))
    x = torch.randn(1 << 18)
    expected = (torch.relu(x * 0.5 + 1.0) * 2.0).numpy().tobytes()
    expect(payload == expected, "the unseen set's call had the inputs of its seed, bytes intact")
    header, _ = worker.call({"op": "sample", "sets": [{"unseen": 0}]})
    expect(not header["ok"] and "used already" in header.get("error", ""),
           "refused: an unseen set a second time")
    header, _ = worker.call({"op": "sample", "sets": [{"unseen": 7}]})
    expect(not header["ok"] and "does not exist" in header.get("error", ""),
           "refused: an unseen set that was not made")
    header, _ = worker.call({"op": "prepare_timing", "seed": 12, "pool_size": 4, "unseen": 2})
    expect(header["ok"] and header["unseen"] == 1, "asked again, the pool says 1 unseen set is left")
    more, _ = worker.call({"op": "more_unseen", "count": 2})
    expect(more["ok"] and more["first"] == 2 and len(more["unseen_inputs"]) == 2
           and more["unseen_inputs"][0][0]["digest"] not in digests,
           "2 more unseen sets on request, numbered on, with values of their own")
    header, _ = worker.call({"op": "sample", "sets": [{"unseen": 3}, {"unseen": 1}]})
    expect(header["ok"] and len(header["samples"]) == 2, "the new sets and the one left are used")
    # Half the pool's memory bound is theirs: one 1 MiB set in 3 MiB (one at least).
    header, _ = worker.call({"op": "prepare_timing", "seed": 13, "pool_size": 4, "unseen": 4,
                             "max_pool_bytes": 3 << 20})
    expect(header["ok"] and header["pool"] == 3 and header["unseen"] == 1,
           "unseen sets take half the pool's memory bound at most: %s" % header.get("unseen"))
    worker.close()

    # While a call runs, the garbage collector lists the pool's tensors, not the unseen sets.
    worker = Worker(binary)
    header, _ = worker.call({"op": "load", "role": "reference", "task": probe, "device": "cpu",
                             "init_seed": 3})
    expect(header["ok"], "the probe task loads")
    header, _ = worker.call({"op": "prepare_timing", "seed": 3, "pool_size": 2, "unseen": 3})
    expect(header["ok"] and header["unseen_hidden"], "the probe's unseen sets are kept as bytes")
    listed = []
    for entry in (0, {"unseen": 0}):
        header, payload = worker.call({"op": "sample", "sets": [entry],
                                       "check": {"index": 0, "seed": 1, "elements": 0}})
        expect(header["ok"], "the probe is called on %s" % json.dumps(entry))
        listed.append(struct.unpack("<f", payload)[0])
    expect(listed == [2.0, 2.0], "tensors of the input's shape listed during a pool call and an "
           "unseen one: %s (the pool's 2 sets)" % listed)
    worker.close()


if __name__ == "__main__":
    main()
