"""Diagnostic: where does fixed time inside the timed window come from? (GPU, torch 2.x)"""
import ctypes, importlib.util, json, os, statistics, subprocess, sys, time
import torch

root = sys.argv[1]
worker = sys.argv[2]
task_path = os.path.join(root, "examples/l1_gelu_tanh/task.py")
cand_path = os.path.join(root, "examples/l1_gelu_tanh/fast.py")

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path); m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m); return m

task = load(task_path, "t")
x = task.get_inputs()[0].cuda()
ref = task.Model().cuda()
libcuda = ctypes.CDLL("libcuda.so.1")
flush = torch.empty(120 << 20, dtype=torch.uint8, device="cuda")

def time_torch(model, mode, n=200):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for i in range(n):
        if "flush" in mode: flush.fill_(i & 255)
        if "reset" in mode: libcuda.cuCtxResetPersistingL2Cache()
        torch.cuda.synchronize()
        s.record(); y = model(x)
        if "ctxsync" in mode: torch.cuda.synchronize()
        e.record(); e.synchronize()
        out.append(s.elapsed_time(e))
    return statistics.median(out[20:])

with torch.no_grad():
    for mode in ["plain", "ctxsync", "flush+ctxsync", "flush+reset+ctxsync"]:
        print("torch ref  %-22s %.4f ms" % (mode, time_torch(ref, mode)), flush=True)

def drive(trace, role, cand=None, n=300):
    r1, w1 = os.pipe(); r2, w2 = os.pipe()
    os.set_inheritable(r1, True); os.set_inheritable(w2, True)
    p = subprocess.Popen(["bash", "-c", "exec %s serve 3<&%d 4>&%d" % (worker, r1, w2)], close_fds=False,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(r1); os.close(w2)
    rf = os.fdopen(r2, "rb"); wf = os.fdopen(w1, "wb")
    def call(req):
        wf.write((json.dumps(req) + "\n").encode()); wf.flush()
        h = json.loads(rf.readline())
        if h.get("payload_bytes"): rf.read(h["payload_bytes"])
        return h
    req = {"op": "load", "role": role, "task": task_path, "device": "cuda:0", "init_seed": 1, "trace_activity": trace}
    if cand: req["candidate"] = cand
    h = call(req); assert h["ok"], h
    call({"op": "prepare_timing", "seed": 5, "pool_size": 16})
    ms, rt = [], []
    for i in range(n):
        a = time.perf_counter(); h = call({"op": "sample", "set": i}); rt.append((time.perf_counter() - a) * 1e3)
        ms.append(h["ms"])
    wf.write(b'{"op": "exit"}\n'); wf.flush(); p.wait()
    return statistics.median(ms[20:]), statistics.median(rt[20:]), None

env_ext = os.environ.get("CUDAL1_CACHE_DIR")
for trace in (True, False):
    m, r, _ = drive(trace, "reference")
    print("worker ref trace=%s window %.4f ms roundtrip %.4f ms" % (trace, m, r), flush=True)
