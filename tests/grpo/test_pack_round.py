"""A pack's round when its members roll out together (``grpo.pack.Pack.step_round``), its bookkeeping alone: the
trainer's phases stood in by functions that record who ran what, in which thread, and raise where told, so each
phase's failure is shown on its own in a second. The real phases, packed against alone: tests/grpo/test_lora_vllm.py."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

import grpo.pack
from grpo.pack import Member, Pack, RngState
from grpo.rollout.vllm import ServedAdapter
from tests.grpo.test_lora_vllm import STREAMED


class Engine:
    streams = True

    def __init__(self, fails: Exception | None = None):
        self.wakes, self.fails = 0, fails

    def wake(self) -> None:
        self.wakes += 1
        if self.fails is not None and self.wakes > 1:  # the second wake: the evals'
            raise self.fails


@pytest.fixture
def phases(monkeypatch):
    """The trainer's phases stood in: ``ran`` lists (phase, member, thread); ``fail[(phase, member)]`` is raised there."""
    ran: list[tuple[str, str, str]] = []
    fail: dict[tuple[str, str], Exception] = {}

    def phase(name: str, member: str, result=None):
        ran.append((name, member, threading.current_thread().name))
        if (name, member) in fail:
            raise fail[(name, member)]
        return result

    monkeypatch.setattr(grpo.pack, "begin_step", lambda cfg, models, progress, envs, step: phase("begin", progress.name))
    monkeypatch.setattr(grpo.pack, "roll_out", lambda cfg, models, sampler, envs: phase("roll", sampler.name, sampler.name))
    monkeypatch.setattr(grpo.pack, "learn", lambda cfg, models, sampler, shuffle, rolled, s: phase("learn", rolled, {"m": rolled}))
    monkeypatch.setattr(grpo.pack, "eval_due", lambda cfg, models, progress, step: progress.due)
    monkeypatch.setattr(grpo.pack, "evaluate", lambda cfg, models, tasks, envs, step, own_seeds: phase("eval", tasks, {"e": tasks}))
    monkeypatch.setattr(grpo.pack, "end_step", lambda cfg, models, progress, envs, step, metrics, evaluated=None:
                        phase("end", progress.name, ({**metrics, **(evaluated or {})}, None)))
    return SimpleNamespace(ran=ran, fail=fail)


def _pack(engine: Engine) -> Pack:
    pack = Pack.__new__(Pack)
    pack.cfg, pack.envs, pack.engine = STREAMED[0], object(), engine
    pack.policy = SimpleNamespace(set_adapter=lambda name: None)
    return pack


def _member(engine: Engine, name: str, due: bool) -> Member:
    models = SimpleNamespace(generator=ServedAdapter(engine, name), optimizer=SimpleNamespace(zero_grad=lambda set_to_none: None))
    progress = SimpleNamespace(name=name, due=due, sampler=SimpleNamespace(name=name), shuffle=None, eval_tasks=name)
    return Member(name, STREAMED[0], models, progress, RngState.now(), 1)


def test_a_failure_in_any_phase_is_its_members_alone_and_it_runs_nothing_after(phases):
    engine = Engine()
    members = [_member(engine, name, due=name in "def") for name in "abcdef"]
    for phase, name in [("begin", "a"), ("roll", "b"), ("learn", "c"), ("eval", "d"), ("end", "e")]:
        phases.fail[(phase, name)] = ValueError(f"{name} in {phase}")
    out = _pack(engine).step_round(members)

    assert [str(o) if isinstance(o, Exception) else o for o in out[:5]] == [f"{n} in {p}" for p, n in phases.fail]
    assert out[5] == (1, {"m": "f", "e": "f"}, None)  # the one that got through: its update's metrics and its eval's
    assert [m.next_step for m in members] == [1, 1, 1, 1, 1, 2]
    ran = {n: [p for p, m, _ in phases.ran if m == n] for n in "abcdef"}
    assert ran == {"a": ["begin"], "b": ["begin", "roll"], "c": ["begin", "roll", "learn"], "d": ["begin", "roll", "learn", "eval"],
                   "e": ["begin", "roll", "learn", "eval", "end"], "f": ["begin", "roll", "learn", "eval", "end"]}
    threads = {p: {t.split("_")[0] for q, _, t in phases.ran if q == p} for p in ("roll", "eval", "learn")}
    assert threads == {"roll": {"pack-rollouts"}, "eval": {"pack-evals"}, "learn": {threading.current_thread().name.split("_")[0]}}
    assert engine.wakes == 2 and all(m.models.generator.seeds is None for m in members)


def test_no_eval_due_wakes_nothing_more_and_a_failed_wake_is_each_waiting_members(phases):
    engine = Engine()
    members = [_member(engine, name, due=False) for name in "pq"]
    assert [o[0] for o in _pack(engine).step_round(members)] == [1, 1] and engine.wakes == 1  # no eval phase

    engine = Engine(fails=RuntimeError("the engine would not wake"))
    members = [_member(engine, name, due=name == "x") for name in "xy"]
    out = _pack(engine).step_round(members)
    assert isinstance(out[0], RuntimeError) and out[1] == (1, {"m": "y"}, None)  # x waited on the evals' wake; y had no eval due
    assert [m.next_step for m in members] == [1, 2]
