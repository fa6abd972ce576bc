"""Rollouts on the RL workload: multi-turn episodes against the hotel MCP server, turn by turn, three ways in one run.

Every arm runs the same episodes (``--tasks`` hotel tasks, as many whose reference takes 2 turns as 3, ``--samples``
each) through ``grpo.episodes.run_episodes``, the trainer's own loop, against a real hotel server, once per
``--tool-latency-ms`` L: each tool call answered after a delay uniform in [0, L] ms (fixed per task, episode and
call, the same in every arm), as a hosted environment's calls take their time; L = 0 is the local server alone:
- ``hf_batched``: ``HFGenerator``, one static batch per turn (``rollout.turns: batched``; the fallback's best case);
- ``vllm_batched``: ``VLLMGenerator``, one batch per turn, each request retiring at its own length;
- ``vllm_streamed``: ``VLLMStreamingGenerator`` (``rollout.turns: per_episode``): each episode's next turn goes to
  the one engine as soon as its tool result is back.
On CPU (``--cpu``, the harness's own check) the arms are ``hf_batched`` and ``hf_streamed`` (HF one request at a
time: the per-episode loop's reference, not its speed) on the shipped tiny base.

A random-weight model (the 0.5B shape on a GPU) writes no tool calls, so a planted script answers each turn with
the task's reference turn (the server sees real tool calls; every episode runs its reference's turns), while the
model really decodes the turn's drawn length: uniform in [``--new-tokens``/8, ``--new-tokens``], fixed per task
and turn (the same in every arm; a group's samples share it), its stop id one the model cannot emit. A static
batch decodes to its longest request; vLLM retires each at its own. Tokens/s counts the drawn lengths over the
wall time of all episodes (after one warm-up run of the same episodes). Targets (issue 36): ``vllm_streamed`` at
least 5x ``hf_batched`` and 2x ``vllm_batched``.

    python bench/rollout_episodes.py                 # GPU: 16 tasks x 8 samples, turns of up to 128 tokens, L = 0 and 400
    python bench/rollout_episodes.py --cpu --tasks 4 --samples 2 --new-tokens 16   # the harness on CPU

Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import sys
import tempfile
import time
import zlib
from collections import Counter
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grpo.episodes import EpisodeLimits, run_episodes  # noqa: E402
from grpo.rollout import Completion, SamplingParams  # noqa: E402
from grpo.shapes import VOCAB_SIZE  # noqa: E402
from grpo.warmstart import reference_conversation  # noqa: E402

NEVER = VOCAB_SIZE  # an id past the vocabulary: the model never stops before its drawn length
LEARNING = ROOT / "sweep" / "search_spaces" / "learning_cpu.yaml"  # its hotel base ships (grpo/bases): the chat format comes from it


class Planted:
    """The generator seam around a real generator: the model decodes each turn's drawn length, the episode gets
    the task's reference turn (the script is keyed by the prompt's first ids, the turn by the ids' end markers)."""

    def __init__(self, inner, chat, scripts: dict[tuple[int, ...], list[str]], new_tokens: int):
        self.inner, self.chat, self.scripts, self.new_tokens = inner, chat, scripts, new_tokens
        self.streams, self.needs_weight_sync = inner.streams, inner.needs_weight_sync
        self.drawn = self.decoded = 0

    def _plan(self, prompt: list[int]) -> tuple[list[int], int]:
        key = next(k for k in self.scripts if tuple(prompt[: len(k)]) == k)
        turn = (sum(1 for t in prompt if t == self.chat.end_id) - 2) // 2
        length = random.Random(zlib.crc32(repr((key, turn)).encode())).randint(max(1, self.new_tokens // 8), self.new_tokens)
        return self.chat.assistant_ids(self.scripts[key][turn]), length

    def _answer(self, ids: list[int], length: int, decoded: Completion) -> Completion:
        self.drawn += length
        self.decoded += len(decoded.token_ids)
        return Completion(ids, [0.0] * len(ids), "stop")

    def generate(self, prompts, sampling: SamplingParams) -> list[Completion]:
        plans = [self._plan(p) for p in prompts]
        per_request = getattr(self.inner, "llm", None)
        if per_request is not None:  # vLLM: one call, each request with its own length (as stops make them in RL)
            from vllm.inputs import TokensPrompt

            from grpo.rollout.vllm import completion_of, vllm_sampling

            params = [vllm_sampling(replace(sampling, max_new_tokens=n), self.inner.stop_id) for _, n in plans]
            outs = [completion_of(o.outputs[0]) for o in per_request.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)]
        else:  # a static batch decodes to its longest request
            outs = self.inner.generate(prompts, replace(sampling, max_new_tokens=max(n for _, n in plans)))
        return [self._answer(ids, n, out) for (ids, n), out in zip(plans, outs)]

    async def agenerate(self, prompt: list[int], sampling: SamplingParams) -> Completion:
        ids, n = self._plan(prompt)
        return self._answer(ids, n, await self.inner.agenerate(prompt, replace(sampling, max_new_tokens=n)))

    def rollout_seed(self) -> int:
        return self.inner.rollout_seed()


class Delayed:
    """An env client whose tool calls are answered after a delay uniform in [0, ``max_ms``] ms, drawn from the task,
    the episode's number among that task's episodes and the call's number (so every arm waits the same delays)."""

    def __init__(self, client, max_ms: float):
        self.client, self.max_ms, self.opened = client, max_ms, Counter()

    @asynccontextmanager
    async def episode(self, task, queued=None):
        nth = self.opened[task.task_key]
        self.opened[task.task_key] += 1
        async with self.client.episode(task, queued) as session:
            yield _DelayedSession(session, self.max_ms, f"{task.task_key}/{nth}")


class _DelayedSession:
    def __init__(self, session, max_ms: float, key: str):
        self.session, self.max_ms, self.key, self.calls, self.tools = session, max_ms, key, 0, session.tools

    async def call_tool(self, name, arguments):
        self.calls += 1
        if self.max_ms > 0:
            await asyncio.sleep(random.Random(zlib.crc32(f"{self.key}/{self.calls}".encode())).uniform(0, self.max_ms) / 1000)
        return await self.session.call_tool(name, arguments)

    async def score(self, **kwargs):
        return await self.session.score(**kwargs)


def timed_arms(name: str, inner, chat, tasks, scripts, args, clients) -> list[dict]:
    """One warm-up run, then one timed run at each tool latency; a row each."""
    return [timed_arm(name, inner, chat, tasks, scripts, args, clients, ms, warm_up=i == 0) for i, ms in enumerate(args.tool_latency_ms)]


def timed_arm(name: str, inner, chat, tasks, scripts, args, clients, latency_ms: float, warm_up: bool) -> dict:
    limits = EpisodeLimits(max_turns=4, max_generate_length=args.new_tokens, max_sequence_length=4096, temperature=1.0)
    gen = Planted(inner, chat, scripts, args.new_tokens)

    def run(ms: float):
        return asyncio.run(run_episodes(tasks, args.samples, {k: Delayed(c, ms) for k, c in clients().items()}, gen, chat, limits))

    if warm_up:
        run(0)  # compiles, fills caches
    gen.drawn = gen.decoded = 0
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    started = time.perf_counter()
    trajs = run(latency_ms)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    ended = sum(t.stop_reason == "done" and t.reward == 1.0 for t in trajs)
    if ended != len(trajs):
        raise SystemExit(f"{name}: {len(trajs) - ended} of {len(trajs)} planted episodes did not end solved: the harness is broken")
    row = {"arm": name, "tool_latency_ms": latency_ms, "seconds": round(seconds, 2), "episodes": len(trajs), "turns": sum(t.num_turns for t in trajs),
           "tokens": gen.drawn, "decoded": gen.decoded, "tokens_per_s": round(gen.drawn / seconds, 1)}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cpu", action="store_true", help="the harness on CPU: HF batched vs HF one request at a time, the tiny base")
    parser.add_argument("--shape", default="qwen2.5-0.5b")
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--eager", action="store_true", help="vLLM without CUDA graphs (starts faster, samples slower)")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.3)
    parser.add_argument("--tool-latency-ms", type=float, nargs="+", default=[0.0, 400.0],
                        help="runs at each: tool calls answered after a delay uniform in [0, L] ms")
    args = parser.parse_args()

    from transformers import AutoModelForCausalLM

    from grpo.chat import ChatFormat
    from grpo.data import trial_tasks
    from grpo.rollout.hf import HFGenerator
    from grpo.tiny import load_tiny_tokenizer
    from grpo.warmstart import shipped_base
    from sweep.spec.loader import load_trainer
    from toolenvs.client import EnvClient
    from toolenvs.local.launch import LocalEnvServer

    cfg, _ = load_trainer(LEARNING)
    every, _ = trial_tasks(cfg)
    base = shipped_base(cfg.model, every)
    if base is None:
        raise SystemExit("the learning space's shipped base is missing (grpo/bases): this bench reads its tokenizer")
    chat = ChatFormat(load_tiny_tokenizer(str(base)))
    by_turns = [[t for t in every if len(reference_conversation(t).turns) == n] for n in (2, 3)]
    tasks = [t for pair in zip(*by_turns) for t in pair][: args.tasks]  # as many 2-turn references as 3-turn ones
    scripts = {tuple(chat.prompt_ids(reference_conversation(t).messages)): [text for text, _ in reference_conversation(t).turns] for t in tasks}

    rows = []
    with LocalEnvServer("hotel") as server:
        def clients():
            return {"hotel": EnvClient(server.base_url)}

        if args.cpu:
            model = AutoModelForCausalLM.from_pretrained(str(base)).eval()
            rows.extend(timed_arms("hf_batched", HFGenerator(model, stop_id=NEVER, pad_id=chat.pad_id), chat, tasks, scripts, args, clients))
            rows.extend(timed_arms("hf_streamed", HFGenerator(model, stop_id=NEVER, pad_id=chat.pad_id, streams=True), chat, tasks, scripts, args, clients))
            device = "cpu"
        else:
            from grpo.rollout.vllm import EngineSettings, VLLMGenerator
            from grpo.rollout.vllm_stream import VLLMStreamingGenerator
            from grpo.shapes import write_random_model

            model_dir = str(write_random_model(args.shape, Path(tempfile.mkdtemp(prefix="bench-episodes-")) / args.shape))
            settings = EngineSettings(model_dir, max_model_len=4096, gpu_memory_utilization=args.gpu_memory_utilization,
                                      enforce_eager=args.eager, max_num_seqs=min(1024, args.tasks * args.samples))
            streamed = VLLMStreamingGenerator(settings, stop_id=NEVER)
            rows.extend(timed_arms("vllm_streamed", streamed, chat, tasks, scripts, args, clients))
            streamed.close()
            batched = VLLMGenerator(settings, stop_id=NEVER)
            rows.extend(timed_arms("vllm_batched", batched, chat, tasks, scripts, args, clients))
            del batched
            gc.collect()
            model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).cuda().eval()
            rows.extend(timed_arms("hf_batched", HFGenerator(model, stop_id=NEVER, pad_id=0), chat, tasks, scripts, args, clients))
            device = torch.cuda.get_device_name()

    figures = {"bench": "rollout_episodes", "device": device, "shape": "tiny" if args.cpu else args.shape, "tasks": len(tasks),
               "samples": args.samples, "new_tokens": args.new_tokens, "tool_latency_ms": args.tool_latency_ms}
    streamed_arm = "hf_streamed" if args.cpu else "vllm_streamed"
    for ms in args.tool_latency_ms:
        at = "" if ms == 0 else f"_at_{ms:g}ms"  # L = 0 keeps the names of the first GPU run's line
        by = {r["arm"]: r["tokens_per_s"] for r in rows if r["tool_latency_ms"] == ms}
        figures.update({f"{arm}_tokens_per_s{at}": value for arm, value in by.items()})
        figures[f"streamed_over_hf_batched{at}"] = round(by[streamed_arm] / by["hf_batched"], 2)
        if "vllm_batched" in by:
            figures[f"streamed_over_vllm_batched{at}"] = round(by["vllm_streamed"] / by["vllm_batched"], 2)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
