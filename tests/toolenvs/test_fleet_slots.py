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


def test_an_abandoned_request_loses_no_slot_whichever_comes_first():
    """A caller that stops waiting abandons its named request: a wait under way ends without a lease, and a lease
    already granted (the grant won the race with the abandon) goes back."""

    async def go():
        slots = Slots(size=1, lease_s=60)
        held = await slots.acquire()
        waiting = asyncio.create_task(slots.acquire("r1"))
        await asyncio.sleep(0.05)
        await slots.abandon("r1")
        await slots.release(held)
        assert await asyncio.wait_for(waiting, 2.0) is None and slots.stats()["open"] == 0
        granted = await slots.acquire("r2")  # granted before its caller gave up
        assert granted and slots.stats()["open"] == 1
        await slots.abandon("r2")
        assert slots.stats()["open"] == 0 and await asyncio.wait_for(slots.acquire(), 1.0)
        await slots.abandon("never-asked")  # an abandon for a request that never came ends it when it comes
        assert await asyncio.wait_for(slots.acquire("never-asked"), 2.0) is None
        assert slots._abandoned == {}

    asyncio.run(go())


def test_an_abandoned_request_whose_acquire_never_comes_is_forgotten():
    """Ray may cancel an acquire before the actor runs it: its abandon then waits for a call that never comes. Kept
    for ``lease_s`` (a late acquire still ends at once), then forgotten, so a long sweep's cancellations do not pile up."""

    async def go():
        slots = Slots(size=1, lease_s=0.2)
        await slots.abandon("cancelled-in-queue")
        assert "cancelled-in-queue" in slots._abandoned
        await asyncio.sleep(0.3)
        lease = await asyncio.wait_for(slots.acquire(), 1.0)  # any acquire reclaims what expired
        assert lease and slots._abandoned == {}

    asyncio.run(go())


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

        async def a_waiter_cancelled() -> None:  # as an episode queued for a slot is when another fails the rollout
            slots = sweep_slots()
            held = [await slots.acquire(), await slots.acquire()]
            waiter = asyncio.create_task(slots.acquire())
            await asyncio.sleep(0.3)
            waiter.cancel()
            await asyncio.gather(waiter, return_exceptions=True)
            for lease in held:  # the cancelled wait must not take the slot freed now
                await slots.release(lease)

        asyncio.run(a_waiter_cancelled())
        deadline = time.monotonic() + 10
        while ray.get(actor.stats.remote())["open"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ray.get(actor.stats.remote())["open"] == 0
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
    assert peak == 2 and held == 0 and slots._open == 0 and not slots._waiters


def test_the_process_cap_hands_slots_on_in_the_order_they_were_asked_for_across_loops():
    """Waiters on two loops in two threads, asking one after another while the one slot is held: each release hands
    the slot to the longest waiting, whichever loop it is on."""
    import threading

    from toolenvs.fleet import InstanceSlots

    slots, granted = InstanceSlots(1), []
    loops = [asyncio.new_event_loop() for _ in range(2)]
    threads = [threading.Thread(target=loop.run_forever, daemon=True) for loop in loops]
    for t in threads:
        t.start()

    async def wait_then_hold(i: int) -> None:
        await slots.acquire()
        granted.append(i)
        await asyncio.sleep(0.002)
        await slots.release(None)

    try:
        asyncio.run_coroutine_threadsafe(slots.acquire(), loops[0]).result(5)  # the holder
        done = []
        for i in range(6):  # asked in this order, alternating loops
            done.append(asyncio.run_coroutine_threadsafe(wait_then_hold(i), loops[i % 2]))
            deadline = time.monotonic() + 5
            while len(slots._waiters) < i + 1 and time.monotonic() < deadline:
                time.sleep(0.001)
            assert len(slots._waiters) == i + 1
        asyncio.run_coroutine_threadsafe(slots.release(None), loops[1]).result(5)
        for d in done:
            d.result(5)
    finally:
        for loop in loops:
            loop.call_soon_threadsafe(loop.stop)
        for t in threads:
            t.join(5)
        for loop in loops:
            loop.close()
    assert granted == list(range(6)) and slots._open == 0 and not slots._waiters


def test_a_waiter_cancelled_as_its_slot_is_handed_to_it_passes_the_slot_on():
    import pytest

    from toolenvs.fleet import InstanceSlots

    async def go():
        slots = InstanceSlots(1)
        await slots.acquire()
        first, second = asyncio.create_task(slots.acquire()), asyncio.create_task(slots.acquire())
        await asyncio.sleep(0)
        assert len(slots._waiters) == 2
        await slots.release(None)  # handed to the first, whose wake is scheduled...
        first.cancel()  # ...when it is cancelled
        with pytest.raises(asyncio.CancelledError):
            await first
        await asyncio.wait_for(second, 1.0)
        assert slots._open == 1 and not slots._waiters
        await slots.release(None)
        assert slots._open == 0

    asyncio.run(go())


def test_a_waiter_whose_loop_closed_is_skipped_and_never_hands_a_slot_on():
    """A loop closed with its waiter still queued (never cancelled): a release skips it and frees the slot; when the
    waiter's coroutine is collected later it hands nothing on, so the cap still holds."""
    import gc

    from toolenvs.fleet import InstanceSlots

    slots = InstanceSlots(1)
    main, other = asyncio.new_event_loop(), asyncio.new_event_loop()
    try:
        main.run_until_complete(slots.acquire())
        waiter = other.create_task(slots.acquire())
        other.run_until_complete(asyncio.sleep(0.01))
        assert len(slots._waiters) == 1
        other.close()
        main.run_until_complete(slots.release(None))
        assert slots._open == 0 and not slots._waiters
        del waiter
        gc.collect()  # the waiter's coroutine closes (GeneratorExit at its wait)
        assert slots._open == 0

        async def two_at_once() -> None:
            await slots.acquire()
            await asyncio.wait_for(slots.acquire(), 0.2)

        try:
            main.run_until_complete(two_at_once())
            raise AssertionError("a cap of 1 let two in")
        except TimeoutError:
            pass
    finally:
        main.close()
