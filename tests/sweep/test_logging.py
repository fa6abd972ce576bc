"""Logging: the live table (rich in a terminal, plain lines in a log), W&B offline and TensorBoard files from a real sweep."""

from __future__ import annotations

import io
import os
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from sweep.spec.config import SweepConfig
from sweep.watch.live import LiveProgress
from tests.sweep.tiny_sweep import fit, load_space, ray_session, tiny_trainer  # noqa: F401 (ray_session is a fixture)

METRIC = "reward/avg_pass_at_1"


def wandb_records(path: Path) -> Iterator:
    """The protobuf records of an offline W&B run file (a LevelDB-style log of 32 KiB blocks; wandb 0.31 has no Python reader)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, block, pending = 7, 32768, b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if length == 0 and kind == 0:
            break
        pending += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a full record, or the last piece of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            pending = b""
            yield record


def _trial(trial_id: str, lr: float):
    from ray.tune.experiment import Trial

    return Trial("run_trial", config={"optim.lr": lr}, trial_id=trial_id, stub=True)


def _play(console: Console) -> LiveProgress:
    live = LiveProgress(METRIC, total_steps=3, keys=["optim.lr"], zero_signal=(1e-3, 2), console=console)
    live.setup()
    a, b = _trial("aaaa1111", 1e-3), _trial("bbbb2222", 3e-4)
    for trial in (a, b):
        live.on_trial_start(0, [a, b], trial)
    for step in (1, 2, 3):
        live.on_trial_result(0, [a, b], a, {"training_iteration": step, METRIC: 0.25 * step, "reward/variance_per_prompt": 0.1})
    live.on_trial_complete(0, [a, b], a)
    for step in (1, 2):
        live.on_trial_result(0, [a, b], b, {"training_iteration": step, METRIC: 0.0, "reward/variance_per_prompt": 0.0})
    live.on_trial_complete(0, [a, b], b)
    live.on_experiment_end([a, b])
    return live


def test_plain_lines_when_not_a_terminal():
    out = io.StringIO()
    _play(Console(file=out, force_terminal=False, width=200))
    lines = out.getvalue().splitlines()
    assert "trial aaaa1111 running step 2/3 avg_pass_at_1 0.500 variance_per_prompt 0.100" in lines
    assert "trial aaaa1111 finished step 3/3 avg_pass_at_1 0.750 variance_per_prompt 0.100" in lines
    assert lines[-1] == "trial bbbb2222 stopped (zero signal) step 2/3 avg_pass_at_1 0.000 variance_per_prompt 0.000"
    assert not any("\x1b[" in line for line in lines)  # no escape codes in a log file


def test_the_score_reads_as_none_until_a_trained_eval():
    out = io.StringIO()
    live = LiveProgress("eval/score", total_steps=4, keys=["optim.lr"], console=Console(file=out, force_terminal=False, width=200))
    live.setup()
    a = _trial("aaaa1111", 1e-3)
    live.on_trial_start(0, [a], a)
    base = {"eval/score": 0.0, "eval/global_step": 0.0, "reward/variance_per_prompt": 0.1}
    live.on_trial_result(0, [a], a, {**base, "training_iteration": 1})
    live.on_trial_result(0, [a], a, {**base, "training_iteration": 2, "eval/score": 0.125, "eval/global_step": 2.0})
    live.on_trial_result(0, [a], a, {**base, "training_iteration": 3, "eval/score": 0.125, "eval/global_step": 2.0})
    lines = out.getvalue().splitlines()
    assert lines[1] == "trial aaaa1111 running step 1/4 score - variance_per_prompt 0.100"  # not "score 0.000"
    assert lines[2:] == [f"trial aaaa1111 running step {step}/4 score 0.125 variance_per_prompt 0.100" for step in (2, 3)]


def test_charts_leave_out_the_scores_placeholder():
    from sweep.watch.loggers import charted

    base_only = {"training_iteration": 1, "eval/score": 0.0, "eval/global_step": 0.0, METRIC: 0.5}
    assert charted(base_only) == {"training_iteration": 1, "eval/global_step": 0.0, METRIC: 0.5}
    trained = {**base_only, "eval/global_step": 2.0}
    assert charted(trained) is trained and charted({METRIC: 0.5}) == {METRIC: 0.5}


def test_live_table_in_a_terminal():
    out = io.StringIO()
    live = _play(Console(file=out, force_terminal=True, width=200))
    text = out.getvalue()
    assert "\x1b[" in text  # redrawn in place
    for fragment in ("aaaa1111", "bbbb2222", "FINISHED", "STOPPED (zero signal)", "3/3", "0.750", "variance_per_prompt", "3.00e-04"):
        assert fragment in text, fragment
    assert live._live is None  # stopped at the end of the sweep


def test_callbacks_follow_the_logging_block():
    from sweep.watch.loggers import NoTensorBoard, SweepTensorBoard, SweepWandb, logging_callbacks

    cfg = SweepConfig.model_validate({"space": {"optim.lr": {"loguniform": [1e-4, 1e-2]}}})
    kinds = [type(c) for c in logging_callbacks(cfg)]
    assert kinds == [SweepTensorBoard, LiveProgress]
    quiet = cfg.model_copy(update={"logging": cfg.logging.model_copy(update={"tensorboard": False, "progress": False})})
    assert [type(c) for c in logging_callbacks(quiet)] == [NoTensorBoard]
    wandb_on = SweepConfig.model_validate({"logging": {"wandb": {"enabled": True, "project": "p"}, "progress": False}})
    (tb, wandb) = logging_callbacks(wandb_on)
    assert isinstance(wandb, SweepWandb) and wandb.group == "sweep" and wandb.kwargs["mode"] == "offline"


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.usefixtures("ray_session")
def test_wandb_offline_and_tensorboard_from_a_real_sweep(tmp_path, monkeypatch):
    """No W&B key anywhere: offline runs, one per trial, grouped by sweep, hold the metrics; no secret reaches any file."""
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("FLEET_API_KEY", "fleet-s3cret-value")  # a secret in the driver's environment must not be logged
    cfg = load_space(tmp_path, {
        "name": "logged",
        "trainer": tiny_trainer(total_steps=2),
        "space": {"optim.lr": {"choice": [1e-3, 2e-3]}},
        "search": {"searcher": "grid", "num_samples": 1},
        "scheduler": {"type": "fifo"},
        "logging": {"wandb": {"enabled": True, "project": "grpo-sweep-test", "mode": "offline"}, "tensorboard": True},
    })
    results = fit(cfg)
    os.environ.pop("WANDB_MODE", None)
    experiment = Path(cfg.storage) / cfg.name
    runs = sorted((experiment / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(runs) == len(results) == 2
    trial_ids = {r.metrics["trial_id"] for r in results}
    for run in runs:
        records = list(wandb_records(run))
        (start,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
        assert start.run_group == "logged" and start.project == "grpo-sweep-test" and start.run_id in trial_ids
        assert {item.key for item in start.config.update} == {"optim.lr", "_wandb"}  # the trial's swept keys, nothing else
        history = [{item.key or "/".join(item.nested_key): item.value_json for item in r.history.item} for r in records if r.WhichOneof("record_type") == "history"]
        assert [int(h["training_iteration"]) for h in history] == [1, 2]
        assert all(0.0 <= float(h[METRIC]) <= 1.0 and "reward/variance_per_prompt" in h for h in history)
    for path in experiment.rglob("*"):
        if path.is_file() and path.stat().st_size < 20_000_000:
            assert b"fleet-s3cret-value" not in path.read_bytes(), path
    for r in results:  # TensorBoard event files beside each trial's results, with the dashboard metrics
        events = list(Path(r.path).glob("events.out.tfevents.*"))
        assert events and b"reward/avg_pass_at_1" in events[0].read_bytes()
