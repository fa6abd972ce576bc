#!/usr/bin/env bash
# The one GPU check, run ON the lent GPU machine once vLLM was carried there (../shared/gpu/README.md). Strict:
# it fails, never skips, when CUDA, the carried vLLM or any step is missing or fails, and each step has a
# watchdog. It runs the GPU tests file by file (one vLLM engine per process; a skipped test is a failure
# here), then the GPU benches, each with its baseline in the same run, one JSON line each. Everything goes to
# $OUT/gpu/{date}_{gpu}_{commit}/ (device.txt, tests.log: every test file's whole output, {bench}.log, the GPU
# tests' trial_metrics*.json, lines.jsonl: each bench's line with the GPU's name, the date and the commit added,
# summary.txt), packed at the end into $OUT/gpu/{date}_{gpu}_{commit}.tgz with device.txt, lines.jsonl and
# summary.txt left beside it (the device tool brings back 8 files at most); unpack it into bench/data/gpu/.
#   COMMIT=$(git rev-parse --short HEAD) bash scripts/gpu_check.sh [tests|benches|all]
# (the machine gets no .git: the command line carries the commit). Exit 0 only when every step passed.
# GPU_CHECK_DEADLINE_S: seconds the whole check may take (the device call's timeout less a margin): each step's
# watchdog is cut to what is left, a step with under 30 s left is not started (a failure), and the results are
# packed in time. A watchdog sends SIGINT first (pytest and Python print where they were), then SIGKILL 15 s later.
set -uo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
case "$what" in tests|benches|all) ;; *) echo "gpu_check: unknown part '$what' (tests, benches or all)" >&2; exit 2 ;; esac
vllm_env=${VLLM_ENV:-/tmp/vllm_env.sh}
# GPU_TESTS / GPU_BENCHES (space-separated) run a subset, in their order, when a lent machine's minutes are few
read -r -a TESTS <<< "${GPU_TESTS:-tests/gpu/test_fsdp_cuda.py tests/gpu/test_vllm_generator.py tests/gpu/test_grpo_vllm_trial.py tests/gpu/test_vllm_lora.py tests/gpu/test_pack_gpu.py}"
# bench/packed_lora_gpu.py (K=4 packed LoRA trials against the same four one after another, 20 steps each: about 10
# minutes) is not in the default list; give it a lent machine's minutes of its own:
#   GPU_BENCHES=packed_lora_gpu BENCH_WATCHDOG_S=900 bash scripts/gpu_check.sh benches
read -r -a BENCHES <<< "${GPU_BENCHES:-train_step_gpu rollout_vllm_vs_hf rollout_episodes weight_sync_gpu}"
TEST_WATCHDOG_S=${TEST_WATCHDOG_S:-420}
BENCH_WATCHDOG_S=${BENCH_WATCHDOG_S:-400}

refuse() { echo "gpu_check: FAILED before any step: $*" >&2; exit 2; }
# vLLM installed (pip install -e ".[gpu]"), or carried to a machine without a network: its environment file
# (this workspace's recipe writes /tmp/vllm_env.sh) is sourced when present
# shellcheck disable=SC1090
[ -f "$vllm_env" ] && source "$vllm_env"
if [ -d .whl ]; then  # pure-Python wheels the machine lacks (opentelemetry-api for mcp)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/whl-site .whl/*.whl
  export PYTHONPATH=/tmp/whl-site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 GRPO_SWEEP_CACHE=${GRPO_SWEEP_CACHE:-/tmp/grpo-cache}
start_s=$SECONDS
deadline_s=${GPU_CHECK_DEADLINE_S:-}
vllm_error=$(python3 -c "import vllm" 2>&1) || refuse "vLLM does not import (pip install -e '.[gpu]'; or carry it and source its environment: $vllm_env was $([ -f "$vllm_env" ] || echo "not ")found): $(echo "$vllm_error" | tail -1)"
python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" || refuse "no CUDA device seen by torch"

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr -c 'A-Za-z0-9.\n-' '-' | tr -s '-')
date=$(date -u +%Y-%m-%dT%H%MZ)
commit=${COMMIT:-unknown}
dir=${OUT:-/tmp/gpu-out}/gpu/${date}_${gpu}_${commit}
mkdir -p "$dir"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c "import torch, transformers, vllm; print('torch', torch.__version__, 'transformers', transformers.__version__, 'vllm', vllm.__version__)"
  echo "commit $commit, date $date"; } | tee "$dir/device.txt"

status=0
failed() { echo "gpu_check: FAILED: $*" | tee -a "$dir/summary.txt"; status=1; }
pack() {  # the folder as one file, with what a reader wants first beside it (the device tool brings back 8 files at most)
  local name; name=$(basename "$dir")
  if tar czf "$dir.tgz" -C "$(dirname "$dir")" "$name"; then
    find "$dir" -mindepth 1 ! -name device.txt ! -name lines.jsonl ! -name summary.txt -delete
  fi
  echo "gpu_check: results in $dir.tgz (and $dir/summary.txt)"
}
trap pack EXIT
watchdog() {  # this step's watchdog: $1 seconds, cut to what the deadline leaves (0: no time left for the step)
  local want=$1
  if [ -n "$deadline_s" ]; then
    local left=$((deadline_s - (SECONDS - start_s) - 20))
    [ $left -lt 30 ] && { echo 0; return; }
    [ $left -lt "$want" ] && want=$left
  fi
  echo "$want"
}
stopped() { [ "$1" -eq 124 ] || [ "$1" -eq 137 ]; }
if [ "$what" != benches ]; then
  for t in "${TESTS[@]}"; do
    log="$dir/tests.log"
    limit=$(watchdog "$TEST_WATCHDOG_S")
    if [ "$limit" -eq 0 ]; then failed "$t: not started, the deadline (${deadline_s} s) is too near"; continue; fi
    echo "== $t (watchdog ${limit} s)" >> "$log"
    GRPO_GPU_METRICS="$dir/trial_metrics.json" timeout -s INT -k 15 "$limit" python3 -m pytest -m "slow or not slow" -x -q -rfEs \
      -p no:cacheprovider --basetemp="/tmp/pt-$(basename "$t" .py)" "$t" > /tmp/gpu_check_test.log 2>&1
    code=$?
    cat /tmp/gpu_check_test.log >> "$log"
    tail -40 /tmp/gpu_check_test.log
    if stopped $code; then failed "$t: the watchdog stopped it after ${limit} s"
    elif [ $code -ne 0 ]; then failed "$t: pytest exit $code"
    elif grep -qE '[0-9]+ skipped' /tmp/gpu_check_test.log; then failed "$t: a test skipped (on the GPU machine nothing may)"
    fi
  done
fi
if [ "$what" != tests ]; then
  for b in "${BENCHES[@]}"; do
    limit=$(watchdog "$BENCH_WATCHDOG_S")
    if [ "$limit" -eq 0 ]; then failed "bench/$b.py: not started, the deadline (${deadline_s} s) is too near"; continue; fi
    timeout -s INT -k 15 "$limit" python3 "bench/$b.py" > "$dir/$b.log" 2>&1
    code=$?
    line=$(grep -E '^\{"bench"' "$dir/$b.log" | tail -1)
    if [ $code -ne 0 ] || [ -z "$line" ]; then
      tail -20 "$dir/$b.log"
      failed "bench/$b.py: exit $code$(stopped $code && echo " (watchdog, ${limit} s)")$([ -z "$line" ] && echo ", no JSON line")"
    fi
    [ -z "$line" ] && continue
    GPU="$gpu" DATE="$date" COMMIT_AT="$commit" LINE="$line" EXIT="$code" python3 -c \
      "import json, os; d = json.loads(os.environ['LINE']); d.update(gpu=os.environ['GPU'], date=os.environ['DATE'], commit=os.environ['COMMIT_AT'], exit=int(os.environ['EXIT'])); print(json.dumps(d))" \
      | tee -a "$dir/lines.jsonl"
  done
fi
[ $status -eq 0 ] && echo "gpu_check: every step passed" | tee -a "$dir/summary.txt"
exit $status
