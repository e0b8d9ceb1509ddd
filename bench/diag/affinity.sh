# Fresh-process spread of the gelu example under CPU affinity (taskset) and without; run from the
# repository root on a GPU machine after bench/gpu_session.sh build. Results:
# bench/results/2026-11-22-h100-affinity.json.
export PYTHONUNBUFFERED=1
lscpu | grep -iE "model name|numa|socket|core|mhz" ; nvidia-smi topo -m 2>&1 | head -8; cat /sys/class/drm/*/device/numa_node 2>/dev/null | head -3
export CUDAL1_CACHE_DIR=$PWD/build-gpu/cache
T=examples/l1_gelu_tanh/task.py; C=examples/l1_gelu_tanh/fast.py
for mode in free pin2 pin89 free; do for i in 1 2 3; do
  case $mode in free) pre="";; pin2) pre="taskset -c 2,3";; pin89) pre="taskset -c 8,9";; esac
  $pre build-gpu/cudal1 eval --task $T --candidate $C --device cuda --time-budget 4 -q --max-noise 0.003 > $OUT/$mode-$i.json 2>/dev/null
  python3 -c "
import json,sys;v=json.load(open('$OUT/$mode-$i.json'));t=v['timing'];k=t['kernel_ms']
print('$mode', round(v['speedup'],4), 'ref', round(v['reference_ms']*1e3,2), 'gapR', round((v['reference_ms']-k['reference'])*1e3,2), 'cand', round(v['candidate_ms']*1e3,2), 'gapC', round((v['candidate_ms']-k['candidate'])*1e3,2), v['samples'])"
done; done
