"""bench/rollout_episodes.py's harness on CPU (the bench's figures are a GPU's; this checks what it measures): the
planted script ends every episode solved against the real hotel server, each arm counts the same drawn turn
lengths, a static batch decodes to its longest request and one request at a time decodes exactly its own, and
a run with delayed tool calls runs the same turns (what the delay costs each arm is the GPU's figure)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_harness_runs_the_same_turns_in_both_cpu_arms():
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "rollout_episodes.py"), "--cpu", "--tasks", "4", "--samples", "2",
                          "--new-tokens", "16", "--tool-latency-ms", "0", "50"], capture_output=True, text=True, timeout=600, check=True).stdout
    every = [json.loads(line) for line in out.splitlines() if line.startswith('{"arm"')]
    assert sorted((d["arm"], d["tool_latency_ms"]) for d in every) == [("hf_batched", 0), ("hf_batched", 50), ("hf_streamed", 0), ("hf_streamed", 50)]
    rows = {d["arm"]: d for d in every if d["tool_latency_ms"] == 0}
    slow = {d["arm"]: d for d in every if d["tool_latency_ms"] == 50}
    batched, streamed = rows["hf_batched"], rows["hf_streamed"]
    assert all(slow[arm]["tokens"] == rows[arm]["tokens"] and slow[arm]["turns"] == rows[arm]["turns"] for arm in rows)
    assert batched["episodes"] == streamed["episodes"] == 8 and batched["turns"] == streamed["turns"] >= 16
    assert batched["tokens"] == streamed["tokens"]  # the same drawn lengths, whichever order the turns came in
    assert streamed["decoded"] == streamed["tokens"] < batched["decoded"]  # alone: its own length; a batch: its longest
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["bench"] == "rollout_episodes" and summary["streamed_over_hf_batched"] > 0
    assert summary["streamed_over_hf_batched_at_50ms"] > 0 and summary["tool_latency_ms"] == [0, 50]
