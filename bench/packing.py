"""Packed LoRA trials (``grpo.pack``) against separate trial processes, on CPU: trial-steps per CPU-hour and
resident memory per trial. Not a CI test.

    .venv/bin/python bench/packing.py            # 10 steps a trial (about 10 min on 2 cores)
    .venv/bin/python bench/packing.py --small    # 2 steps a trial: a smoke run (about 3 min)

Every run is a child process of this script (``--worker``), each trial with ``torch_threads: 1``. Every
phase runs the same four trials (a trial's LR decides how long its episodes are, so phases that ran
different trials would compare different work):
- unpacked: 2 processes at once, each running two trials one after the other (what a CPU sweep with 2
  concurrent trials runs: Tune reuses a CPU trial's process);
- packed K=2: 2 processes at once, each two trials over one base, stepped in turn (``grpo.pack.train_packed``);
- packed K=4: one process, the four trials over one base.
The trials are the learning space's trainer (its shipped base: no warm-start to wait for) with LoRA rank 8,
differing in learning rate and KL; held-out eval at step 0 and the last, one sample a task.

Throughput: trial-steps over the CPU time the phase's processes used, their environment servers included
(``getrusage(RUSAGE_CHILDREN)`` around the phase: the CPUs a slot pays for, not the wall clock, which other
jobs on a shared machine move); wall-clock figures ride along. Memory per trial: the peak resident memory
of a run's process tree (trainer process and its environment servers, sampled after every step), over the
trials that tree holds at once. Startup (imports, loading the base, starting the MCP servers) is part of each run:
it is what packing shares. Prints a table, then one JSON line ``{"bench": "packing", ..., "ratio": ...}``
where ``ratio`` is K=4's trial-steps per CPU-hour over unpacked's.
Leaves out: batched rollouts across adapters (each member samples alone; ``bench/mixed_adapters.py`` measures
why), GPUs, Tune's own overhead.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from bench.record import record  # noqa: E402

LEARNING_BASE = {"warmstart_steps": 2400, "warmstart_augment": 20, "warmstart_give_up": 0.4}  # grpo/bases ships it
TRIALS = [
    {"optim": {"lr": 1e-4}, "algorithm": {"kl_coef": 0.1}},
    {"optim": {"lr": 3e-4}, "algorithm": {"kl_coef": 0.1}},
    {"optim": {"lr": 1e-3}, "algorithm": {"kl_coef": 0.0}},
    {"optim": {"lr": 3e-3}, "algorithm": {"kl_coef": 0.05}},
]


def trial_config(i: int, steps: int) -> dict[str, Any]:
    return {
        "model": {**LEARNING_BASE, "lora": {"rank": 8, "alpha": 16.0}},
        "total_steps": steps,
        "torch_threads": 1,
        "seed": i,
        "rollout": {"prompts_per_step": 4, "n_samples_per_prompt": 4, "max_turns": 4, "max_generate_length": 64},
        "eval": {"interval": 5 if steps >= 5 else steps, "n_samples": 1},
        **TRIALS[i % len(TRIALS)],
    }


class TreeMemory:
    """A reporter that counts steps and keeps the peak resident memory of this process and its children."""

    def __init__(self) -> None:
        self.steps = 0
        self.peak_gib = 0.0

    def report(self, step: int, metrics: dict[str, float], checkpoint: str | None = None) -> None:
        self.steps += 1
        self.peak_gib = max(self.peak_gib, tree_gib())


def tree_gib() -> float:
    import psutil

    me = psutil.Process()
    total = 0
    for p in [me, *me.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:  # a server that just ended
            pass
    return total / 2**30


def worker(spec: dict[str, Any]) -> None:
    """One run: ``trials`` configs, packed when ``packed`` (else one after the other); prints one JSON line."""
    from grpo.config import TrainerConfig
    from grpo.pack import train_packed
    from grpo.trainer import train

    started = time.perf_counter()
    cfgs = [TrainerConfig.model_validate(c) for c in spec["trials"]]
    reporters = [TreeMemory() for _ in cfgs]
    if spec["packed"]:
        train_packed(cfgs, reporters)
    else:
        for cfg, reporter in zip(cfgs, reporters, strict=True):
            train(cfg, reporter)
    peak = max(r.peak_gib for r in reporters)
    print(json.dumps({"steps": sum(r.steps for r in reporters), "peak_tree_gib": peak, "trials": len(cfgs),
                      "held": len(cfgs) if spec["packed"] else 1, "wall_s": time.perf_counter() - started}))


def run_phase(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Start every run at once, wait for all; trial-steps, CPU seconds (children's), wall seconds, memory per trial."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", json.dumps(run)], stdout=subprocess.PIPE, cwd=ROOT, text=True) for run in runs]
    outs = []
    for proc in procs:
        stdout, _ = proc.communicate()
        if proc.returncode:
            raise SystemExit(f"{name}: a run failed (exit {proc.returncode})")
        outs.append(json.loads(stdout.strip().splitlines()[-1]))
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    steps = sum(o["steps"] for o in outs)
    trials, held = sum(o["trials"] for o in outs), sum(o["held"] for o in outs)
    return {
        "phase": name, "trials": trials, "trial_steps": steps, "cpu_s": round(cpu_s, 1), "wall_s": round(wall, 1),
        "steps_per_cpu_hour": round(steps / (cpu_s / 3600), 1), "steps_per_wall_hour": round(steps / (wall / 3600), 1),
        "gib_per_trial": round(sum(o["peak_tree_gib"] for o in outs) / held, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10, help="GRPO steps per trial")
    parser.add_argument("--small", action="store_true", help="2 steps per trial: a quick smoke run")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(json.loads(args.worker))
    steps = 2 if args.small else args.steps
    from grpo.config import ModelConfig, TrainerConfig
    from grpo.data import trial_tasks
    from grpo.warmstart import shipped_base

    first = TrainerConfig.model_validate(trial_config(0, steps))
    if shipped_base(ModelConfig(**LEARNING_BASE), trial_tasks(first)[0]) is None:
        raise SystemExit("the learning space's base is not shipped here (grpo/bases): the runs would each build it")
    halves = [[trial_config(i, steps), trial_config(i + 2, steps)] for i in range(2)]
    phases = [
        run_phase("unpacked (2 processes)", [{"trials": half, "packed": False} for half in halves]),
        run_phase("packed K=2 (2 processes)", [{"trials": half, "packed": True} for half in halves]),
        run_phase("packed K=4", [{"trials": [trial_config(i, steps) for i in range(4)], "packed": True}]),
    ]
    print(f"{'phase':<24}{'trials':>7}{'steps':>7}{'cpu_s':>8}{'wall_s':>8}{'steps/cpu-h':>13}{'steps/wall-h':>14}{'GiB/trial':>11}")
    for p in phases:
        print(f"{p['phase']:<24}{p['trials']:>7}{p['trial_steps']:>7}{p['cpu_s']:>8}{p['wall_s']:>8}{p['steps_per_cpu_hour']:>13}"
              f"{p['steps_per_wall_hour']:>14}{p['gib_per_trial']:>11}")
    unpacked, k2, k4 = phases
    record("packing", phases, {
        "steps_per_trial": steps,
        "memory_ratio_k2": round(k2["gib_per_trial"] / unpacked["gib_per_trial"], 3),
        "memory_ratio_k4": round(k4["gib_per_trial"] / unpacked["gib_per_trial"], 3),
        "ratio_k2": round(k2["steps_per_cpu_hour"] / unpacked["steps_per_cpu_hour"], 3),
        "ratio": round(k4["steps_per_cpu_hour"] / unpacked["steps_per_cpu_hour"], 3),
    })

if __name__ == "__main__":
    main()
