"""Would batching a pack's rollouts across its adapters pay on CPU? The same model turns sampled three ways.

A K=4 pack (``grpo.pack``, the packing bench's four trials over the learning space's shipped base) runs
``--steps`` steps per member; every ``generate`` call the members' episodes make (one per batched model
turn, eval's included) is recorded with its prompts. Those calls are then replayed, turn by turn, with the
members' trained adapters:
- ``separate``: each member's call alone with its adapter active (what a pack does today);
- ``mixed``: the K members' calls of the same turn as one batch, each row with its own adapter (peft's
  ``adapter_names`` mixed-adapter batches: the batched rollouts issue 24 asks for on CPU);
- ``one_adapter``: that same batch with one adapter for every row (no per-row routing: the best a batched
  forward could do on this CPU, whatever the LoRA kernel).
``torch_threads`` 1, the best of ``--repeats`` passes; sampling stops as each call's rows stop, so a mixed
batch pays for its longest member's turn (as batched rollouts would). Also measured: the share of a
packed step's time spent in rollouts (``timing/rollout_s`` over ``timing/step_s``), from which the
throughput batching would give a pack follows: ``1 / (1 - share * (1 - mixed/separate))``.
Ends with one JSON line; ``ratio`` is mixed over separate (below 1: batching is faster). Not a CI test.

    .venv/bin/python bench/mixed_adapters.py [--steps 2] [--repeats 3]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.record import record  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

from grpo.rollout import SamplingParams  # noqa: E402
from grpo.rollout.hf import HFGenerator  # noqa: E402


class Recording:
    """A generator that samples with the member's own and keeps every call's prompts, in order."""

    def __init__(self, inner: HFGenerator):
        self.inner = inner
        self.steps: list[list[tuple[list[list[int]], SamplingParams]]] = []  # per step, its calls in order

    def generate(self, prompts, sampling):
        self.steps[-1].append((prompts, sampling))
        return self.inner.generate(prompts, sampling)

    def __getattr__(self, name):  # the rest of the generator seam is the member's own
        return getattr(self.inner, name)


class Routed:
    """The pack's policy with ``adapter_names`` given to every ``generate`` (peft's mixed-adapter batch)."""

    def __init__(self, policy, names: list[str]):
        self.policy, self.names = policy, names

    def generate(self, **kwargs):
        return self.policy.generate(adapter_names=self.names, **kwargs)

    def __getattr__(self, name):
        return getattr(self.policy, name)


def turns(members) -> list[list[tuple]]:
    """The recorded calls side by side: for each step and turn, (member, prompts, sampling) of the members that made one."""
    out = []
    for s in range(len(members[0].models.generator.steps)):
        calls = [m.models.generator.steps[s] for m in members]
        out += [[(m, *c[t]) for m, c in zip(members, calls) if t < len(c)] for t in range(max(len(c) for c in calls))]
    return out


def replay(pack, side_by_side: list[list[tuple]], how: str) -> float:
    """Seconds to sample every recorded turn ``how`` (separate, mixed or one_adapter)."""
    chat, policy = pack.chat, pack.policy
    started = time.perf_counter()
    for calls in side_by_side:
        if len({sampling for _, _, sampling in calls}) > 1:
            raise SystemExit("members' calls of one turn differ in sampling settings: they cannot share a batch")
        if how == "separate":
            for m, prompts, sampling in calls:
                policy.set_adapter(m.name)
                HFGenerator(policy, chat.end_id, chat.pad_id).generate(prompts, sampling)
            continue
        prompts = [p for _, ps, _ in calls for p in ps]
        names = [m.name for m, ps, _ in calls for _ in ps]
        model = Routed(policy, names) if how == "mixed" else policy
        policy.set_adapter(calls[0][0].name)
        HFGenerator(model, chat.end_id, chat.pad_id).generate(prompts, calls[0][2])
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2, help="packed steps per member whose model turns are replayed")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from packing import trial_config

    from grpo.config import TrainerConfig
    from grpo.pack import Pack

    cfgs = [TrainerConfig.model_validate(trial_config(i, args.steps)) for i in range(4)]  # its eval split: the shipped base's
    shares = []
    with Pack(cfgs[0]) as pack:
        members = [pack.join(cfg) for cfg in cfgs]
        for m in members:
            m.models.generator = Recording(m.models.generator)
        for _ in range(args.steps):
            for m in members:
                m.models.generator.steps.append([])
                _, metrics, _ = pack.step(m)
                shares.append(metrics["timing/rollout_s"] / metrics["timing/step_s"])
        side_by_side = turns(members)
        rows = [len(p) for calls in side_by_side for _, p, _ in calls]
        width = [max(len(x) for x in p) for calls in side_by_side for _, p, _ in calls]
        pack.policy.eval()
        torch.manual_seed(0)
        times = {how: [] for how in ("separate", "mixed", "one_adapter")}
        with torch.no_grad():
            replay(pack, side_by_side[:1], "mixed")  # warm-up
            for _ in range(args.repeats):
                for how in times:
                    times[how].append(replay(pack, side_by_side, how))
    best = {how: min(ts) for how, ts in times.items()}
    ratio = best["mixed"] / best["separate"]
    share = statistics.mean(shares)
    print(f"{len(side_by_side)} turns side by side of 4 members over {args.steps} steps ({statistics.mean(rows):.1f} rows a call, prompts up to {statistics.mean(width):.0f} tokens on average)")
    for how, s in best.items():
        print(f"{how:<12}{s:>8.2f} s  ({s / best['separate']:.3f}x separate)")
    print(f"rollouts are {share:.0%} of a packed step: batching them would make a pack {1 / (1 - share * (1 - ratio)):.3f}x as fast "
          f"(at one_adapter's speed: {1 / (1 - share * (1 - best['one_adapter'] / best['separate'])):.3f}x)")
    runs = [{"repeat": i, **{f"{how}_s": round(times[how][i], 3) for how in times}} for i in range(args.repeats)]
    runs += [{"step_rollout_share": round(x, 3)} for x in shares]
    record("mixed_adapters", runs, {
        "turns": len(side_by_side), "rows_per_call": round(statistics.mean(rows), 1), "prompt_tokens": round(statistics.mean(width)),
        "steps": args.steps, "repeats": args.repeats, "separate_s": round(best["separate"], 3), "mixed_s": round(best["mixed"], 3),
        "one_adapter_s": round(best["one_adapter"], 3), "rollout_share": round(share, 3),
        "step_speedup_mixed": round(1 / (1 - share * (1 - ratio)), 3),
        "step_speedup_one_adapter": round(1 / (1 - share * (1 - best["one_adapter"] / best["separate"])), 3),
        "ratio": round(ratio, 3),
    })

if __name__ == "__main__":
    main()
