#!/usr/bin/env bash
# Run HERE, on the machine that reaches PyPI, before a lent GPU machine's first call (this workspace's device tool:
# no network there, 64 MiB of working tree a call, carried paths included; 2,000 characters a command; the machine
# goes back after ~30 s idle). It builds what travels (vLLM 0.26.0 by ../shared/gpu/build_vllm_pack.sh, once; the
# pure-Python wheels the machine lacks in .whl), cuts the payload into pieces that fit beside the working tree, and
# prints the device calls in order, each with its carry list, command and timeout, the last one running
# scripts/gpu_check.sh under a deadline that leaves its results time to be packed. Issue them back to back.
#   bash scripts/gpu_prepare.sh [tests and benches as GPU_TESTS / GPU_BENCHES take them, from the environment]
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${SHARED_GPU:-../shared/gpu}
limit_mib=64
call_s=${GPU_CALL_S:-600}  # the check's call: the device tool's most for one command

# built once per machine (about 5 minutes): the build copies device_install.sh last, so a build cut short is redone
[ -s .gpu/core.tar.xz ] && [ -f .gpu/device_install.sh ] || bash "$shared/build_vllm_pack.sh" .gpu
# mcp imports opentelemetry-api, which neither the machine nor vLLM's carry list has
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux2014_x86_64 -d .whl opentelemetry-api==1.45.2

# what travels in every call: tracked files and untracked ones git does not ignore (device tool's rule)
tree_b=$( (git ls-files -z; git ls-files -z --others --exclude-standard) | xargs -0 -r du -cb 2>/dev/null | awk '/\ttotal$/ {s += $1} END {print s + 0}')
whl_b=$(du -cb .whl/*.whl | tail -1 | cut -f1)
room_b=$(( (limit_mib - 4) * 1024 * 1024 - tree_b - whl_b - 65536 ))  # 4 MiB spare, the wheels and device_install.sh ride in the last call
[ $room_b -gt $((8 * 1024 * 1024)) ] || { echo "gpu_prepare: the working tree ($((tree_b / 1048576)) MiB) leaves no room to carry vLLM in ${limit_mib} MiB calls" >&2; exit 2; }
core_b=$(stat -c %s .gpu/core.tar.xz)
piece_mib=$(( room_b / 1048576 ))
(cd .gpu && rm -f chunk_* && split -b "${piece_mib}m" -d -a 2 core.tar.xz chunk_)
mapfile -t chunks < <(cd .gpu && ls chunk_*)
n=${#chunks[@]}

tests=${GPU_TESTS:-}
benches=${GPU_BENCHES:-}
commit=$(git rev-parse --short HEAD)
[ -z "$(git status --porcelain --untracked-files=no)" ] || commit="$commit+changes"
echo "# working tree $((tree_b / 1048576)) MiB; vLLM payload $((core_b / 1048576)) MiB in $n pieces of at most $piece_mib MiB"
echo "# issue these run calls back to back (a reply whose 'warm' was false before the last call: start again at 1)"
i=0
for c in "${chunks[@]}"; do
  i=$((i + 1))
  if [ $i -lt "$n" ]; then
    echo
    echo "## call $i: carry [\".gpu/$c\"], timeout_s 60"
    echo "mkdir -p /tmp/stash && mv .gpu/$c /tmp/stash/ && ls -l /tmp/stash"
  else
    check="COMMIT=$commit GPU_CHECK_DEADLINE_S=$((call_s - 40))"
    [ -n "$tests" ] && check="$check GPU_TESTS=\"$tests\""
    [ -n "$benches" ] && check="$check GPU_BENCHES=\"$benches\""
    echo
    echo "## call $i: carry [\".gpu/$c\", \".gpu/device_install.sh\", \".whl\"], timeout_s $call_s"
    cmd="mkdir -p /tmp/stash && mv .gpu/$c /tmp/stash/ && [ \"\$(cat /tmp/stash/chunk_* | wc -c)\" = $core_b ] || { ls -l /tmp/stash; echo 'gpu: a piece is missing, start again at call 1'; exit 9; }; bash .gpu/device_install.sh 2>&1 | tail -3; $check bash scripts/gpu_check.sh all"
    echo "$cmd"
    [ ${#cmd} -le 2000 ] || { echo "gpu_prepare: that command is ${#cmd} characters, over the device tool's 2,000" >&2; exit 2; }
  fi
done
echo
echo "# then: give_back; unpack \$OUT's gpu/*.tgz into bench/data/gpu/"
