"""A trial's attempts (``sweep.trials.attempts``): restarts counted, a trial that raised not retried within its run,
replaced history dropped; and what a restarted trial forgets, how stop rules count its redone steps, the key."""

from __future__ import annotations

import json
from contextlib import nullcontext

import pytest
from pyarrow.fs import LocalFileSystem

from configkit.base import ConfigError
from sweep.trials import attempts
from sweep.trials.attempts import Attempt, RaisedBefore, Recorder


@pytest.fixture
def trial_folder(tmp_path, monkeypatch):
    """Recorder.start writes into this folder, as into the trial's folder in Tune's storage."""
    monkeypatch.setattr(attempts, "_trial_folder", lambda: (LocalFileSystem(), str(tmp_path)))
    return tmp_path


def _attempt(run: str = "run-1", resumed_from: int = 0, raises: BaseException | None = None, dies: bool = False) -> Recorder:
    record = Recorder.start(run)
    record.resumes_from(resumed_from)
    if dies:  # killed: nothing more is written
        return record
    with pytest.raises(type(raises)) if raises else nullcontext(), record.running():
        if raises:
            raise raises
    return record


def test_a_restart_is_an_attempt_after_one_whose_process_died(trial_folder):
    _attempt(dies=True)
    _attempt(resumed_from=2, dies=True)
    _attempt(resumed_from=4)
    tried = attempts.read(LocalFileSystem(), str(trial_folder))
    assert [(a.number, a.resumed_from, a.ended is None, a.raised) for a in tried] == [(0, 0, True, None), (1, 2, True, None), (2, 4, False, None)]
    assert attempts.restarts(tried) == 2


def test_a_record_cut_short_is_skipped_and_a_new_one_is_written_whole(trial_folder):
    """A stop landing mid-write left an empty attempt_000.json, which crashed the sweep's leaderboard."""
    _attempt(dies=True)
    (trial_folder / attempts.ATTEMPTS_DIR / "attempt_000.json").write_text("")  # as an older version could leave it
    _attempt(resumed_from=2)
    tried = attempts.read(LocalFileSystem(), str(trial_folder))
    assert [(a.number, a.resumed_from) for a in tried] == [(0, 2)]  # the broken record said nothing: replaced
    assert [p.name for p in (trial_folder / attempts.ATTEMPTS_DIR).iterdir()] == ["attempt_000.json"]  # no partial file left


def test_a_lost_process_is_recorded_as_died_and_restarted_within_the_run(trial_folder):
    """A pack host that died took the member's steps with it: a restart, not an exception to refuse."""
    _attempt(raises=attempts.ProcessLost("pack host of trial t died"))
    again = _attempt(resumed_from=2)  # Tune's retry in the same run is not refused
    tried = attempts.read(LocalFileSystem(), str(trial_folder))
    assert [(a.ended is None, a.raised) for a in tried] == [(True, None), (False, None)]
    assert attempts.restarts(tried) == 1 and again.attempt.number == 1


def test_a_stop_or_pause_is_no_restart(trial_folder):
    _attempt(raises=SystemExit(0))  # how Tune stops or pauses a function trial (ASHA, PBT)
    _attempt(resumed_from=3)
    tried = attempts.read(LocalFileSystem(), str(trial_folder))
    assert tried[0].ended is not None and tried[0].raised is None
    assert attempts.restarts(tried) == 0


def test_the_attempt_is_marked_ended_before_the_last_step_is_handed_to_tune(trial_folder, monkeypatch):
    """Inside Tune, ``tune.report`` blocks until Tune asks for the next step, which it never does after the
    last: it stops the trial and may end its process. So the end is on record before that report is made;
    here ``tune.report`` (outside Tune it returns at once) only notes what the record said when it was called."""
    from ray import tune

    from sweep.trials.trial import TuneReporter

    seen = []
    monkeypatch.setattr(tune, "report", lambda result, checkpoint=None: seen.append(
        (result["step"], [a.ended is not None for a in attempts.read(LocalFileSystem(), str(trial_folder))])))
    record = Recorder.start("run-1")
    reporter = TuneReporter(None, record, last_step=2)
    reporter.report(1, {"loss": 0.5})
    reporter.report(2, {"loss": 0.4})
    assert seen == [(1, [False]), (2, [True])]
    tried = attempts.read(LocalFileSystem(), str(trial_folder))
    assert tried[0].raised is None
    assert attempts.restarts([*tried, Attempt(1, "run-1", 2, 0.0)]) == 0  # a later start would be no restart


def test_a_trial_that_raised_is_not_started_again_in_the_same_run(trial_folder):
    _attempt(raises=ValueError("rollout.max_turns must be positive"))
    with pytest.raises(RaisedBefore) as info:
        Recorder.start("run-1")
    message = str(info.value)
    assert "ValueError: rollout.max_turns must be positive" in message and "sweep resume" in message
    with pytest.raises(RaisedBefore):  # every retry Tune makes within the run is refused, and none is recorded
        Recorder.start("run-1")
    assert len(attempts.read(LocalFileSystem(), str(trial_folder))) == 1
    resumed = Recorder.start("run-2")  # sweep resume: another run, which does retry it
    assert resumed.attempt.number == 1
    assert attempts.restarts(attempts.read(LocalFileSystem(), str(trial_folder))) == 0


def test_without_tune_storage_nothing_is_recorded(monkeypatch):
    monkeypatch.setattr(attempts, "_trial_folder", lambda: (None, ""))
    record = Recorder.start("run-1")
    record.resumes_from(0)
    with record.running():
        pass
    assert record.attempt.number == 0 and record.attempt.ended is not None


def _row(step: int, attempt: int | None) -> dict:
    return {"training_iteration": step, "step": step, **({attempts.ATTEMPT: attempt} if attempt is not None else {})}


def test_rows_a_later_attempt_started_before_are_replaced_even_not_yet_redone():
    tried = [Attempt(0, "r", 1, 0.0, resumed_from=0), Attempt(1, "r", 2, 1.0, resumed_from=2), Attempt(2, "r", 3, 2.0, resumed_from=None)]
    rows = [_row(s, 0) for s in (1, 2, 3, 4, 5)] + [_row(3, 1), _row(4, 1)] + [_row(9, None)]
    kept = attempts.current_rows(rows, tried)
    # attempt 0's steps after 2 went with attempt 1's start; 5 is not redone yet, and is gone all the same;
    # attempt 2 never said where it started (died first): it replaces nothing; untagged rows (older sweeps) stay
    assert [(r["step"], r.get(attempts.ATTEMPT)) for r in kept] == [(1, 0), (2, 0), (3, 1), (4, 1), (9, None)]
    from_scratch = [Attempt(0, "r", 1, 0.0, resumed_from=0), Attempt(1, "r", 2, 1.0, resumed_from=0)]
    assert attempts.current_rows([_row(1, 0), _row(2, 0), _row(1, 1)], from_scratch) == [_row(1, 1)]


def _evals_dir(tmp_path, steps: list[int]):
    out = tmp_path / "trajectories"
    out.mkdir()
    lines = [json.dumps({"global_step": s, "eval/avg_pass_at_1": s / 10}) for s in steps]
    (out / "aggregated_results.jsonl").write_text("\n".join(lines) + '\n{"global_step": 7, "eval/av')  # the last cut short
    for s in set(steps):
        (out / f"global_step_{s}").mkdir()
    return out


def _checkpoint(tmp_path, state: dict) -> str:
    path = tmp_path / "checkpoint"
    path.mkdir()
    (path / "trainer_state.json").write_text(json.dumps(state))
    return str(path)


def _eval_steps(out) -> tuple[list[int], list[str]]:
    steps = [json.loads(line)["global_step"] for line in (out / "aggregated_results.jsonl").read_text().splitlines()]
    return steps, sorted(p.name for p in out.glob("global_step_*"))


def test_a_restart_forgets_the_evals_its_checkpoint_does_not_hold(tmp_path):
    from sweep.trials.trial import forget_evals_after

    out = _evals_dir(tmp_path, [0, 3, 4, 4, 6])  # 4 twice: a former attempt evaluated where it started
    forget_evals_after(str(out), _checkpoint(tmp_path, {"step": 4, "evals": {"history": {"0": 0.1, "3": 0.2}}}), None)
    assert _eval_steps(out) == ([0, 3], ["global_step_0", "global_step_3"])  # it evaluates at 4 again, where it starts


def test_a_restart_from_step_1_forgets_every_eval(tmp_path):
    from sweep.trials.trial import forget_evals_after

    out = _evals_dir(tmp_path, [0, 3])
    forget_evals_after(str(out), None, None)
    assert _eval_steps(out) == ([], [])  # step 0's shared line is written again as the trial starts


def test_a_checkpoint_without_an_eval_history_keeps_the_evals_up_to_its_step(tmp_path):
    from sweep.trials.trial import forget_evals_after

    out = _evals_dir(tmp_path, [0, 3, 6])
    forget_evals_after(str(out), _checkpoint(tmp_path, {"step": 4, "sampler": {}}), None)
    assert _eval_steps(out) == ([0, 3], ["global_step_0", "global_step_3"])


def test_stop_rules_count_a_redone_step_once():
    from sweep.tuner import StepLimit, TuneZeroSignalStopper

    limit, zero = StepLimit(4), TuneZeroSignalStopper(1e-3, 3)
    reports = [1, 2, 1, 2, 3]  # killed after step 2 without a checkpoint: steps 1 and 2 again
    assert [limit("t", {"training_iteration": s}) for s in reports] == [False] * 5  # Tune's own counts reports: 5 >= 4
    assert limit("t", {"training_iteration": 4})
    assert [zero("t", {"training_iteration": s, "reward/variance_per_prompt": 0.0}) for s in reports[:4]] == [False] * 4
    assert zero("t", {"training_iteration": 3, "reward/variance_per_prompt": 0.0})  # three steps without signal, not five reports


def test_max_trial_restarts_reaches_tune(tmp_path):
    from sweep.spec.config import SweepConfig
    from sweep.tuner import build_tuner

    cfg = SweepConfig.model_validate({"name": "s", "storage": str(tmp_path), "space": {"optim.lr": {"loguniform": [1e-4, 1e-2]}},
                                      "search": {"searcher": "random"}, "failures": {"max_trial_restarts": 3}})
    assert build_tuner(cfg)._local_tuner._run_config.failure_config.max_failures == 3  # (Tuner keeps its RunConfig private)
    assert SweepConfig().failures.max_trial_restarts == 2


SPACE = """
name: t
trainer: {total_steps: 3}
space:
  optim.lr: {loguniform: [1.0e-4, 1.0e-2]}
"""


@pytest.mark.parametrize(("failures", "fragment"), [
    ("{max_trial_restarts: -1}", "failures.max_trial_restarts"),
    ("{max_trial_restarts: two}", "failures.max_trial_restarts"),
    ("{max_restarts: 2}", "max_restarts"),
])
def test_the_key_is_checked_at_the_door(tmp_path, failures, fragment):
    from sweep.spec.loader import load_space

    path = tmp_path / "space.yaml"
    path.write_text(SPACE + f"failures: {failures}\n")
    with pytest.raises(ConfigError) as info:
        load_space(path)
    assert "space.yaml" in str(info.value) and fragment in str(info.value), str(info.value)
    path.write_text(SPACE + "failures: {max_trial_restarts: 0}\n")
    assert load_space(path).failures.max_trial_restarts == 0
