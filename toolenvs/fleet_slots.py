"""One cap on Fleet instances open at once for a whole sweep, however many trials and nodes it runs on.

Fleet's quotas are per API key, and too many instances at once made MCP connections time out (the seeds'
fix was a semaphore of 2). A trial's own semaphore would cap each trial, not the sweep, so the sweep's
driver starts one named Ray actor holding the slots (``start``), and every trial's Fleet client finds it
in the driver's namespace (``sweep_slots``) and leases a slot from it for each instance it opens. A lease a trial never returns (its process was
killed) expires after ``lease_s``: a Fleet instance's TTL, after which Fleet has removed it anyway. Leaves
out: caps across sweeps sharing one key (each sweep has its own actor).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any


class Slots:
    """The actor's body (plain, so it is tested without Ray): ``size`` leases at most, each expiring after ``lease_s``."""

    def __init__(self, size: int, lease_s: float):
        self.size = size
        self.lease_s = lease_s
        self.leases: dict[str, float] = {}  # lease -> when it expires
        self.peak = 0
        self._changed: asyncio.Condition | None = None
        self._abandoned: dict[str, float] = {}  # named requests whose caller stopped waiting before a grant -> until when kept

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    def _reclaim(self) -> None:
        now = time.monotonic()
        for lease in [lease for lease, until in self.leases.items() if until <= now]:
            del self.leases[lease]
        for request in [request for request, until in self._abandoned.items() if until <= now]:  # its acquire never came
            del self._abandoned[request]

    async def acquire(self, request: str | None = None) -> str | None:
        """A lease; ``request``: a name for it (the lease is that name) the caller can ``abandon`` it by (then None, or
        the lease released)."""
        async with self._condition():
            while True:
                self._reclaim()
                if request is not None and self._abandoned.pop(request, None) is not None:
                    return None
                if len(self.leases) < self.size:
                    lease = request or uuid.uuid4().hex
                    self.leases[lease] = time.monotonic() + self.lease_s
                    self.peak = max(self.peak, len(self.leases))
                    return lease
                try:  # woken by a release, or after a second to reclaim an expired lease
                    await asyncio.wait_for(self._condition().wait(), timeout=1.0)
                except TimeoutError:
                    pass

    async def abandon(self, request: str) -> None:
        """The caller of ``acquire(request)`` stopped waiting (its episode was cancelled): a lease granted to it is
        released, and a wait still under way ends without one. Whatever order the two calls arrive in, no slot is lost.
        A request whose acquire never comes (Ray cancelled it before the actor ran it) is forgotten after ``lease_s``."""
        async with self._condition():
            if self.leases.pop(request, None) is None:
                self._abandoned[request] = time.monotonic() + self.lease_s
            self._condition().notify_all()

    async def release(self, lease: str) -> None:
        async with self._condition():
            self.leases.pop(lease, None)
            self._condition().notify_all()

    def stats(self) -> dict[str, int]:
        return {"size": self.size, "open": len(self.leases), "peak": self.peak}


ACTOR_NAME = "grpo-sweep-fleet-slots"  # in the sweep driver's Ray namespace, which its trials share: one per sweep


def start(size: int, lease_s: float) -> Any:
    """The sweep's slot actor, started by its driver on the running Ray; keep the handle while the sweep
    runs (the actor ends with the driver's job)."""
    import ray

    remote = ray.remote(num_cpus=0, max_concurrency=1000)(Slots)
    return remote.options(name=ACTOR_NAME, get_if_exists=True).remote(size, lease_s)


def sweep_slots() -> RaySlots | None:
    """This trial's sweep's slots, when it runs in a sweep that started them (else None: ``sweep train``)."""
    import ray

    if not ray.is_initialized():
        return None
    try:
        return RaySlots(ray.get_actor(ACTOR_NAME))
    except ValueError:  # no such actor in this namespace
        return None


class RaySlots:
    """A trial's handle on its sweep's slots: ``acquire`` a lease, ``release`` it (or ``async with slot()``)."""

    def __init__(self, actor: Any):
        self.actor = actor

    async def acquire(self) -> str:
        """A lease. Cancelled while it waits (its episode was: another failed the rollout), it abandons its request in
        the actor (Ray would let the actor's wait run on and take a slot no one returns until ``lease_s``): the wait
        ends there, or the lease granted meanwhile goes back, whichever came first."""
        request = uuid.uuid4().hex
        try:
            return await self.actor.acquire.remote(request)
        except asyncio.CancelledError:
            self.actor.abandon.remote(request)
            raise

    async def release(self, lease: str) -> None:
        await self.actor.release.remote(lease)

    def slot(self) -> Any:
        return held(self)


@asynccontextmanager
async def held(slots: Any) -> AsyncIterator[None]:
    """One of ``slots`` (``RaySlots`` or ``toolenvs.fleet.InstanceSlots``: ``acquire``, ``release``) while the block runs."""
    lease = await slots.acquire()
    try:
        yield
    finally:
        await slots.release(lease)
