"""The sweep-wide cap on open Fleet instances: the slot body by hand, then shared by Ray tasks of one driver."""

from __future__ import annotations

import asyncio
import time

from toolenvs.fleet_slots import Slots


def test_at_most_size_leases_and_a_release_wakes_a_waiter():
    async def go():
        slots = Slots(size=2, lease_s=60)
        first, second = await slots.acquire(), await slots.acquire()
        waiter = asyncio.create_task(slots.acquire())
        await asyncio.sleep(0.05)
        assert not waiter.done() and slots.stats() == {"size": 2, "open": 2, "peak": 2}
        await slots.release(first)
        third = await asyncio.wait_for(waiter, 1.0)
        assert third not in (first, second) and slots.stats()["open"] == 2
        await slots.release("never-leased")  # a second release (or a stale one) changes nothing
        assert slots.stats()["open"] == 2

    asyncio.run(go())


def test_a_lease_never_returned_expires():
    """A trial killed while it held an instance: its slot frees once the instance's TTL has passed."""

    async def go():
        slots = Slots(size=1, lease_s=0.2)
        await slots.acquire()
        start = time.monotonic()
        await asyncio.wait_for(slots.acquire(), 3.0)
        return time.monotonic() - start

    waited = asyncio.run(go())
    assert 0.2 <= waited < 2.5


def test_trials_of_one_sweep_share_its_cap_through_ray(tmp_path):
    """The driver starts the actor; tasks in its namespace find it and never hold more than the cap."""
    import ray

    from toolenvs.fleet_slots import start, sweep_slots

    assert sweep_slots() is None  # no Ray: `sweep train` uses its own semaphore
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        actor = start(size=2, lease_s=600)

        @ray.remote(num_cpus=0)
        def hold(seconds: float) -> bool:
            slots = sweep_slots()

            async def go():
                async with slots.slot():
                    await asyncio.sleep(seconds)

            asyncio.run(go())
            return slots is not None

        assert all(ray.get([hold.remote(0.3) for _ in range(5)]))
        assert ray.get(actor.stats.remote()) == {"size": 2, "open": 0, "peak": 2}
    finally:
        ray.shutdown()


def test_the_process_cap_holds_across_loops_running_at_once():
    """``sweep train``'s cap (``toolenvs.fleet.InstanceSlots``) counts for the process: episodes on two event loops in
    two threads at once (a pack's members rolling out together) never hold more than ``size`` instances, every
    waiter is woken by a release on the other loop, and a waiter cancelled while it waits takes no slot."""
    import threading

    from toolenvs.fleet import InstanceSlots

    slots = InstanceSlots(2)
    held = peak = 0
    lock = threading.Lock()

    async def episode():
        nonlocal held, peak
        await slots.acquire()
        with lock:
            held += 1
            peak = max(peak, held)
        await asyncio.sleep(0.01)
        with lock:
            held -= 1
        await slots.release(None)

    async def impatient():  # asks while the episodes hold every slot, gives up before its turn
        await asyncio.sleep(0.005)
        waiting = asyncio.create_task(slots.acquire())
        await asyncio.sleep(0.005)
        assert not waiting.done()
        waiting.cancel()

    async def member():
        await asyncio.gather(impatient(), *(episode() for _ in range(12)))

    threads = [threading.Thread(target=asyncio.run, args=(member(),)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
    assert peak == 2 and held == 0 and slots._open == 0 and slots._waiters == []
