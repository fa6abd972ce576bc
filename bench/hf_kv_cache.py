"""HF ``generate``'s KV cache on the CPU path: the static cache (ours) against transformers' dynamic one, side by side.

One world's held-out eval (its trainer's base policy, every held-out task times the eval's samples, the eval's
own seed) is sampled with each cache in turn, ``--repeats`` rounds after a warm-up on a few tasks, one thread as a
sweep trial has. Reports the best time of each, their ratio, how many episodes drew the same tokens as the
dynamic cache's first round, and the largest difference of a sampled token's log-prob. The dynamic cache grows by
concatenation at every token (it re-copies the whole cache each step), the static one is allocated once.

    python bench/hf_kv_cache.py --world mix --repeats 2
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.record import record  # noqa: E402
from bench.worlds import WORLDS  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--world", choices=sorted(WORLDS), default="mix")
    parser.add_argument("--repeats", type=int, default=2, help="timed rounds of each cache")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (a sweep trial on one CPU has one)")
    args = parser.parse_args()

    from grpo.build import build_models, open_environments
    from grpo.data import trial_tasks
    from grpo.evaluation import eval_summary, sample_eval
    from grpo.rollout.hf import KV_CACHES, HFGenerator
    from sweep.spec.loader import load_trainer

    torch.set_num_threads(args.threads)
    cfg, _ = load_trainer(WORLDS[args.world].trainer_space)
    train_tasks, eval_tasks = trial_tasks(cfg)
    models = build_models(cfg, train_tasks)
    base = models.generator
    generators = {kv: HFGenerator(base.model, stop_id=base.stop_id, pad_id=base.pad_id, kv_cache=kv) for kv in reversed(KV_CACHES)}
    n = cfg.eval.n_samples
    runs, tokens, logprobs = [], {}, {}
    with open_environments(cfg, eval_tasks) as envs:
        for gen in generators.values():  # warm-up: a few tasks each, untimed
            sample_eval(cfg, gen, models.chat, eval_tasks[:4], envs)
        for r in range(args.repeats):
            for kv, gen in generators.items():
                started = time.perf_counter()
                trajectories = sample_eval(cfg, gen, models.chat, eval_tasks, envs)
                seconds = time.perf_counter() - started
                ids = [t.token_ids for t in trajectories]
                lps = [t.sampler_logprobs for t in trajectories]
                tokens.setdefault(kv, ids)
                logprobs.setdefault(kv, lps)
                same = sum(a == b for a, b in zip(tokens["dynamic"], ids))
                gap = max((abs(a - b) for x, y in zip(logprobs["dynamic"], lps) for a, b in zip(x, y) if not (math.isnan(a) or math.isnan(b))), default=0.0)
                pass_at_1 = eval_summary(trajectories, n, 0)["eval/avg_pass_at_1"]
                runs.append({"round": r, "kv_cache": kv, "seconds": round(seconds, 2), "episodes": len(ids),
                             "same_tokens_as_dynamic": same, "logprob_max_diff_vs_dynamic": gap, "pass_at_1": pass_at_1})
                print(f"round {r} {kv:<8}{seconds:>8.1f} s  pass@1 {pass_at_1:.3f}  {same} of {len(ids)} episodes as the dynamic cache's, "
                      f"log-probs within {gap:.1e}", flush=True)
    best = {kv: min(run["seconds"] for run in runs if run["kv_cache"] == kv) for kv in generators}
    static = [run for run in runs if run["kv_cache"] == "static"]
    record("hf_kv_cache", runs, {
        "world": args.world, "episodes": static[0]["episodes"], "repeats": args.repeats, "threads": args.threads,
        "dynamic_s": best["dynamic"], "static_s": best["static"], "ratio": round(best["dynamic"] / best["static"], 3),
        "same_tokens": min(run["same_tokens_as_dynamic"] for run in static),
        "logprob_max_diff": max(run["logprob_max_diff_vs_dynamic"] for run in static),
    })


if __name__ == "__main__":
    main()
