#!/usr/bin/env bash
# The GPU checks, run ON the lent GPU machine (README: "What is verified where"), after vLLM was carried
# there (../shared/gpu/README.md: /tmp/vllm_env.sh exists). Runs the `gpu` tests file by file (one vLLM
# engine per process), then both GPU benches; logs and figures go to $OUT (or /tmp/gpu-out).
#   bash scripts/gpu_verify.sh [tests|benches|all] [bench names, default: train_step_gpu rollout_vllm_vs_hf]
set -uo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}; shift || true
benches=${*:-train_step_gpu rollout_vllm_vs_hf}
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
source /tmp/vllm_env.sh
if [ -d .whl ]; then  # pure-Python wheels the machine lacks (opentelemetry-api for mcp)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/whl-site .whl/*.whl
  export PYTHONPATH=/tmp/whl-site:$PYTHONPATH
fi
export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1 GRPO_SWEEP_CACHE=/tmp/grpo-cache
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
python3 -c "import torch, transformers, vllm; print('torch', torch.__version__, 'transformers', transformers.__version__, 'vllm', vllm.__version__)" | tee -a "$out/device.txt"
status=0
if [ "$what" != benches ]; then
  for t in tests/gpu/test_fsdp_cuda.py tests/gpu/test_vllm_generator.py tests/gpu/test_grpo_vllm_trial.py; do
    GRPO_GPU_METRICS="$out/trial_metrics.json" timeout 420 python3 -m pytest -m "slow or not slow" -x -q -p no:cacheprovider \
      --basetemp=/tmp/pt-$(basename "$t" .py) "$t" 2>&1 | tail -40 | tee -a "$out/tests.log" || status=1
  done
fi
if [ "$what" != tests ]; then
  for b in $benches; do
    timeout 400 python3 "bench/$b.py" > "$out/$b.log" 2>&1 || status=1
    grep -E '^\{"bench"' "$out/$b.log" || { tail -20 "$out/$b.log"; status=1; }
  done
fi
exit $status
