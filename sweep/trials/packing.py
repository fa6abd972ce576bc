"""Packed trials under Tune (``resources.trials_per_worker`` = K > 1): a pack host actor holds one base and up
to K members (``grpo.pack``); each Tune trial stays a Tune trial, a thin function trainable that joins a host
on its node, asks it for each step, reports and checkpoints as an unpacked trial does, and leaves when it
ends, is stopped (ASHA) or fails, so the next trial Tune starts takes the freed place.

Resources: a trial asks Tune for ``cpus_per_trial / K`` CPUs and ``gpus_per_trial / K`` GPUs, and the host
for none, so Tune's accounting holds: K trials' shares are the one process's CPUs and GPU. Hosts are detached
named actors per node, GPU and base (``pack-{sweep}-{base hash}-{node}-{gpu or cpu}-{i}``, made on first use
with ``get_if_exists``, ended by their last member's leaving); a trial tries them in order and joins the first
with room. A trial given a share of a GPU joins only a host of that GPU, and the host, a ``num_gpus=0`` actor,
is pinned to it (``grpo.distributed.pin_gpu``) and reports it as ``pack/gpu``. The config refuses GPU packs
until the GPU check has run one (``grpo.combinations.pack_clashes``); this side is tested with GPUs declared
to Ray on CPU. A host serves one call at a time, so
its members' steps take turns, unless its members roll out together (``grpo.combinations.pack_rolls_out_together``:
vLLM's streaming engine): then its calls run in threads, and a member's step call waits for a round, which starts
when every member of the last round (and every one joined since) has asked for its step, or ``ROUND_WAIT_S`` after
the first asked (counted from the last round's end), and steps every member that asked (``grpo.pack.Pack.step_round``:
their rollouts at once, their updates in turn, their evals at once). A member that missed a round is not waited for again until it asks,
so one slow to report, or whose trial died, holds the others up once; joins and leaves wait for the round to end.
Each report adds ``pack/members`` (trials in the host at that step) and
``pack/host_pid``. A step's checkpoint is written on the host's node, which is the trial's, and handed to
Tune as an unpacked trial's is. A member whose trial process died without leaving (a killed worker) is
evicted when a join finds the host full and the member has not asked for a step for ``STALE_S`` while the host went on
without it (``lost``: others stepped twice the host's capacity since, or no one did). A host
that dies takes no member with it: each member's attempt ends as a lost process (``sweep.trials.attempts.ProcessLost``),
Tune restarts it (``failures.max_trial_restarts``) and it joins another host from its newest checkpoint.
Leaves out: batched rollouts across members on HF (slower on CPU: ``bench/mixed_adapters.py``; with
``rollout.backend: vllm`` the host's one engine serves every member's adapter), PBT and several workers
(refused in ``sweep.spec.checks``).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grpo.config import TrainerConfig

STALE_S = 900.0  # a member silent this long, while others wait for its place and the host goes on without it, has lost its trial
ROUND_WAIT_S = 5.0  # a round of a pack whose members roll out together waits this long for members yet to ask


class PackHost:
    """The Ray actor: a ``grpo.pack.Pack`` on the sweep's base trainer config, stepped for its members' trials.
    Configs arrive typed (the base and each member's, parsed once in the trial that made or joined the host): Ray
    pickles them, as it does a multi-worker trial's config for its workers, and nothing here parses them again."""

    def __init__(self, pack_cfg: TrainerConfig, capacity: int, gpu: str | None = None):
        """``gpu``: the GPU its members' trials hold shares of (None: a CPU pack)."""
        if gpu is not None:
            from grpo.distributed import pin_gpu

            pin_gpu(gpu)  # before the pack asks where it trains
        from grpo.pack import Pack

        self.capacity = capacity
        self.gpu = gpu
        self.pack = Pack(pack_cfg, capacity).__enter__()
        self.members: dict[str, Any] = {}
        self.last_seen: dict[str, tuple[float, int]] = {}  # when each member was last seen, and the host's step count then
        self._steps = 0  # members' steps the host has run
        self._last_step_end = time.monotonic()
        self.rounds = self.pack.rolls_out_together  # then the actor's calls run in threads (``max_concurrency``)
        self._turn = threading.Condition()  # holds the members and the pack between rounds
        self._asked: dict[str, float] = {}  # trials waiting for the next round, and since when
        self._expected: set[str] = set()  # trials the next round waits for: the last round's, and those joined since
        self._stepped: dict[str, Any] = {}  # each member's outcome (by its name in the pack) until its call collects it
        self._stepping = False
        self._last_round_end = 0.0
        self._closed = False

    def join(self, trial_id: str, cfg: TrainerConfig, base_eval: dict[str, Any] | None = None, gpu: str | None = None) -> bool:
        """Take trial ``trial_id``, which holds a share of ``gpu`` (None: no GPU); False when full (or ending)."""
        with self._between_rounds():
            return self._join(trial_id, cfg, base_eval, gpu)

    def _join(self, trial_id: str, cfg: TrainerConfig, base_eval: dict[str, Any] | None, gpu: str | None) -> bool:
        if gpu != self.gpu:  # hosts are named by GPU, so only a naming slip lands here
            raise RuntimeError(f"trial {trial_id} holds a share of GPU {gpu!r}; this pack host trains on {self.gpu!r}")
        if self._closed:  # its last member left and it is exiting: the trial tries another host
            return False
        if trial_id in self.members:  # the same trial again (its process restarted): start it over from its config
            old = self.members.pop(trial_id)
            self._asked.pop(trial_id, None)
            self._stepped.pop(old.name, None)
            self.pack.leave(old)
        self._evict_stale()
        if len(self.members) >= self.capacity:
            return False
        self.members[trial_id] = self.pack.join(cfg, base_eval)
        self._seen_now(trial_id)
        self._expected.add(trial_id)
        return True

    def step(self, trial_id: str) -> tuple[int, dict[str, float], str | None] | None:
        """The member's next step: (step, metrics, checkpoint directory or None); None once it has run them all."""
        member = self.members[trial_id]
        self._seen(trial_id)
        if member.done:
            return None
        if self.rounds:
            outcome = self._in_a_round(trial_id, member)
            if isinstance(outcome, BaseException):  # its step's error, or the round's (each member in it hears of it)
                raise outcome
            step, metrics, saved = outcome
        else:
            step, metrics, saved = self.pack.step(member)
            self._count_steps(1)
        self._seen(trial_id)
        where = {"pack/members": float(len(self.members)), "pack/host_pid": float(os.getpid())}
        if self.gpu is not None and self.gpu.isdigit():
            where["pack/gpu"] = float(self.gpu)
        return step, {**metrics, **where}, saved

    def _seen(self, trial_id: str) -> None:
        with self._turn:
            if trial_id in self.members:  # a trial that left (mid-call) is not brought back
                self._seen_now(trial_id)

    def _seen_now(self, trial_id: str) -> None:
        self.last_seen[trial_id] = (time.monotonic(), self._steps)

    def _count_steps(self, members: int) -> None:
        self._steps += members
        self._last_step_end = time.monotonic()

    def _in_a_round(self, trial_id: str, member: Any) -> Any:
        """Wait for the round that steps ``member`` (running it, when this call is the one to start it): its outcome, an
        exception when its step raised. Raises when the trial left, or joined again, before its round."""
        with self._turn:
            self._asked[trial_id] = time.monotonic()
            while member.name not in self._stepped:
                if self.members.get(trial_id) is not member:
                    raise RuntimeError(f"trial {trial_id} left its pack host (or joined it again) before its step ran")
                if not self._stepping and self._round_due():
                    self._run_round()
                else:
                    self._turn.wait(timeout=0.05)
            return self._stepped.pop(member.name)

    def _run_round(self) -> None:
        """Step every member that asked (the lock let go meanwhile), hand each its outcome; the next round waits for them."""
        batch = [(t, self.members[t]) for t in self._asked if t in self.members]
        self._asked.clear()
        self._stepping = True
        self._turn.release()
        failed: BaseException | None = None
        try:
            outcomes: list[Any] = self.pack.step_round([m for _, m in batch])
        except BaseException as exc:  # not one member's step: the round itself; every member in it hears of it
            outcomes, failed = [exc] * len(batch), exc
        finally:
            self._turn.acquire()
            self._stepping = False
            self._last_round_end = time.monotonic()
            self._count_steps(len(batch))
            for t, _ in batch:  # stepped just now, though their calls have yet to collect their outcomes
                if t in self.members:
                    self._seen_now(t)
        self._stepped.update((m.name, out) for (_, m), out in zip(batch, outcomes))
        self._expected = {t for t, _ in batch}  # one that missed this round is not waited for until it asks again
        self._turn.notify_all()
        if failed is not None and not isinstance(failed, Exception):
            raise failed

    def _round_due(self) -> bool:
        """Every trial the round waits for has asked, or ``ROUND_WAIT_S`` has passed since the first ask (counted from the
        last round's end, for asks made during it)."""
        if not self._asked:
            return False
        if self._expected & set(self.members) <= set(self._asked):
            return True
        return time.monotonic() - max(min(self._asked.values()), self._last_round_end) >= ROUND_WAIT_S

    @contextmanager
    def _between_rounds(self) -> Iterator[None]:
        """The members and the pack, held while no round runs (a join or a leave must not change them mid-round)."""
        with self._turn:
            while self._stepping:
                self._turn.wait()
            try:
                yield
            finally:
                self._turn.notify_all()

    def leave(self, trial_id: str) -> None:
        """The trial ended, was stopped or failed: its place frees; the host ends with its last member."""
        with self._between_rounds():
            self._leave(trial_id)

    def _leave(self, trial_id: str) -> None:
        member = self.members.pop(trial_id, None)
        self._asked.pop(trial_id, None)
        self._expected.discard(trial_id)
        self.last_seen.pop(trial_id, None)
        if member is not None:
            self._stepped.pop(member.name, None)
            self.pack.leave(member)
        if not self.members:
            import ray

            self._closed = True  # a join waiting for the lock finds the host ending, not an empty pack to join
            self.pack.__exit__(None, None, None)
            ray.actor.exit_actor()

    def size(self) -> int:
        return len(self.members)

    def _evict_stale(self) -> None:
        """Members ``lost`` while the host is full (their trial died without leaving); never one waiting for its round
        or yet to collect its step."""
        now = time.monotonic()
        if len(self.members) < self.capacity:
            return
        waiting = set(self._asked) | {t for t, m in self.members.items() if m.name in self._stepped}
        for trial_id in [t for t, (when, steps) in self.last_seen.items() if t not in waiting and lost(
                now - when, self._steps - steps, now - self._last_step_end, self.capacity)]:
            self._expected.discard(trial_id)
            if (member := self.members.pop(trial_id, None)) is not None:
                self.pack.leave(member)
            self.last_seen.pop(trial_id, None)


def lost(silent_s: float, steps_since: int, idle_s: float, capacity: int) -> bool:
    """Whether a pack member that is not waiting for a step has lost its trial: silent for more than ``STALE_S`` while
    the host went on without it: its members took ``steps_since`` steps since it was last seen, at least twice the
    host's ``capacity`` (a live member's next call waits at most for the others' turns, however long a step takes),
    or the host stepped no one for ``idle_s`` > ``STALE_S`` (every member silent)."""
    return silent_s > STALE_S and (steps_since >= 2 * capacity or idle_s > STALE_S)


def trial_gpu() -> str | None:
    """The GPU this trial holds a share of, as ``CUDA_VISIBLE_DEVICES`` names it (Ray set it), or None."""
    from configkit import environ
    from grpo.distributed import ray_gpu_ids, visible_gpus

    if not ray_gpu_ids():
        return None
    visible = environ.CUDA_VISIBLE_DEVICES.get()
    devices = visible_gpus(visible) or []
    if len(devices) != 1:
        raise RuntimeError(f"a packed trial holds a share of one GPU; Ray gave it CUDA_VISIBLE_DEVICES={visible!r}")
    return devices[0]


def host_name(experiment: str, recipe: str, node: str, gpu: str | None, i: int) -> str:
    return f"pack-{experiment}-{recipe}-{node[:12]}-{'cpu' if gpu is None else 'gpu' + gpu}-{i}"


def hosts_per_gpu(gpus_per_trial: float) -> int:
    """How many pack hosts one GPU holds: a trial asks ``gpus_per_trial / K`` of it, so K / gpus_per_trial trials
    fit, K to a host. More would put a second base and engine on a GPU Ray counts as full."""
    return max(1, int(1 / gpus_per_trial + 1e-9))


def join_a_host(base: TrainerConfig, cfg: TrainerConfig, capacity: int, experiment: str, trial_id: str,
                base_eval: dict[str, Any] | None = None, wait_s: float = STALE_S + 120.0, gpus_per_trial: float = 0.0):
    """A host on this node and this trial's GPU with room for the trial (made if none has room); it has joined
    when this returns. Hosts are detached (a host must outlive the trial that made it, its other members still
    train) and end with their last member. On a GPU at most ``hosts_per_gpu`` hosts: a trial finding them full
    (a member leaving, or one whose trial died, not yet gone) waits for a place rather than start another."""
    import ray
    from ray.exceptions import RayActorError
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from grpo.combinations import pack_rolls_out_together

    node = ray.get_runtime_context().get_node_id()
    gpu = trial_gpu()
    recipe = hashlib.sha256(base.model_dump_json().encode()).hexdigest()[:10]  # a host outliving its run serves only its base
    calls = capacity + 2 if pack_rolls_out_together(base) else 1  # its members' step calls wait for a round together
    host_class = ray.remote(num_cpus=0, max_concurrency=calls, max_restarts=0)(PackHost)
    deadline = time.monotonic() + wait_s
    while True:
        # on CPU more hosts than a node can hold members for: trials only ever ask for a free place
        for i in range(64 if gpu is None else hosts_per_gpu(gpus_per_trial)):
            try:
                host = host_class.options(
                    name=host_name(experiment, recipe, node, gpu, i), get_if_exists=True, lifetime="detached",
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False),
                ).remote(base, capacity, gpu)
                if ray.get(host.join.remote(trial_id, cfg, base_eval, gpu)):
                    return host
            except RayActorError as exc:  # that host was ending (its last member left): try the next, or this name again
                if exc.actor_init_failed and gpu is not None:  # no base or engine fit on the GPU: each try costs a load and a start
                    raise
                continue
        if time.monotonic() > deadline:  # a stale member's place frees after STALE_S, within the wait
            where = f"node {node}" + ("" if gpu is None else f", GPU {gpu}")
            raise RuntimeError(f"no pack host on {where} had room for trial {trial_id} within {wait_s:.0f} s")
        time.sleep(2.0)


def run_packed_trial(cfg: TrainerConfig, base: TrainerConfig, capacity: int, experiment: str, reporter,
                     base_eval: dict[str, Any] | None = None, gpus_per_trial: float = 0.0) -> None:
    """The trial's side: join, then one report per step the host runs for it; leave however it ends."""
    import ray
    from ray import tune
    from ray.exceptions import RayActorError

    from sweep.trials.attempts import ProcessLost

    trial_id = tune.get_context().get_trial_id()
    host = join_a_host(base, cfg, capacity, experiment, trial_id, base_eval, gpus_per_trial=gpus_per_trial)
    try:
        while (out := ray.get(host.step.remote(trial_id))) is not None:
            reporter.report(*out)
    except RayActorError as exc:  # the host died (killed, out of memory): each member restarts from its checkpoint
        raise ProcessLost(f"pack host of trial {trial_id} died: {exc}") from exc
    finally:
        host.leave.remote(trial_id)  # also when Tune stops the trial (SystemExit in its thread) or a step raised
