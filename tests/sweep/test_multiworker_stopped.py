"""Multi-worker trials that Tune stops before their last step, on a Ray with its dashboard (as ``sweep run`` starts it).

Tune ends such a trial under Ray Train; the trial's workers' placement group is then removed by Ray Train's
cleaner, which finds the ended trial through Ray's state API (the dashboard serves it). Without that API the group
stays reserved and the next trial waits for its workers for good, so ``sweep run`` refuses such a sweep there
(``sweep.spec.resource_checks.state_api_need``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sweep.tiny_sweep import fit, local_ray, two_worker_trials_in_turn

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


@pytest.fixture(scope="module")
def ray_with_dashboard(tiny_base: str) -> Iterator[None]:
    with local_ray(num_cpus=2, dashboard=True):
        yield


@pytest.mark.timeout(300)  # the bug this guards against is a hang
def test_trials_stopped_early_leave_room_for_the_next(tmp_path, ray_with_dashboard):
    """Each trial is stopped by the zero-signal stopper at step 1 of 3 (no variance is above its threshold); on these
    2 CPUs the second trial's workers fit only once the first's placement group is gone."""
    from sweep.spec.resource_checks import state_api_problem_on_head

    assert state_api_problem_on_head() is None  # asked from the head node, as Ray Train's cleaner asks
    cfg = two_worker_trials_in_turn(tmp_path, "stopped_in_turn", total_steps=3,
                                    stopping={"zero_signal": {"enabled": True, "threshold": 10.0, "patience": 1}})
    results = list(fit(cfg))
    assert sorted(r.metrics["training_iteration"] for r in results) == [1, 1] and not any(r.error for r in results)
