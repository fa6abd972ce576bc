"""The end of ``sweep run`` on a hand-made finished sweep (no Ray): the report, TensorBoard's HParams data and
the sweep's W&B run, each read back from the files written."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from sweep.run import write_report
from sweep.spec.config import SweepConfig
from sweep.store.storage import open_storage
from sweep.watch.summary_logs import GAIN, HPARAMS_DIR, log_sweep_end
from tests.sweep.report_fixture import make_sweep_dir
from tests.sweep.test_logging import wandb_records

NAME = "fixture_sweep"
SWEPT = {"optim.lr", "algorithm.kl_coef"}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """The fixture sweep in a storage folder, its report written as ``sweep run`` ends; (storage, report, stdout)."""
    results = tmp_path_factory.mktemp("results")
    make_sweep_dir(results / NAME)
    store = open_storage(str(results))
    return store, write_report(store, NAME)


def tb_events(path: Path) -> Iterator:
    """The ``Event`` records of a TensorBoard event file (TFRecord framing: length, its CRC, data, its CRC)."""
    from tensorboardX.proto import event_pb2

    data, pos = path.read_bytes(), 0
    while pos < len(data):
        (length,) = struct.unpack("<Q", data[pos:pos + 8])
        event = event_pb2.Event()
        event.ParseFromString(data[pos + 12:pos + 12 + length])
        pos += 12 + length + 4
        yield event


def hparams_of(folder: Path) -> tuple[dict, dict, dict[str, float]]:
    """(experiment: hparam and metric names, this run's hparam values, its scalars) from a run's event files."""
    from tensorboardX.proto.plugin_hparams_pb2 import HParamsPluginData

    experiment, values, scalars = {}, {}, {}
    for path in folder.glob("events.out.tfevents.*"):
        for event in tb_events(path):
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name != "hparams":
                    scalars[value.tag] = value.simple_value
                    continue
                data = HParamsPluginData()
                data.ParseFromString(value.metadata.plugin_data.content)
                if data.HasField("experiment"):
                    experiment = {"hparams": {h.name for h in data.experiment.hparam_infos},
                                  "metrics": {m.name.tag for m in data.experiment.metric_infos}}
                if data.HasField("session_start_info"):
                    values = {k: v.WhichOneof("kind") and getattr(v, v.WhichOneof("kind")) for k, v in data.session_start_info.hparams.items()}
    return experiment, values, scalars


def test_run_ends_with_the_report_and_says_where(finished, capsys, monkeypatch):
    store, report = finished
    assert report is not None and [j.trial_id for j in report.judged][0] == "aaaa0001"
    page = Path(store.path(NAME, "report", "index.html"))
    assert page.is_file() and "fixture_sweep" in page.read_text()

    def broken(uri, out, *settings):
        raise OSError("disk full")

    monkeypatch.setattr("sweep.report.build.build_report", broken)
    assert write_report(store, NAME) is None  # said, not raised: the sweep's results stand
    out = capsys.readouterr().out
    assert out == f"warning: the report could not be written (OSError: disk full); retry with `python -m sweep report {store.path(NAME)}`\n"


def test_tensorboard_hparams_hold_the_swept_keys_and_each_trials_score(finished, capsys):
    store, report = finished
    cfg = SweepConfig.model_validate({"name": NAME, "storage": store.uri, "space": {"optim.lr": {"loguniform": [1e-6, 1e-1]}}})
    log_sweep_end(report, cfg, store)  # W&B off: TensorBoard only
    root = Path(store.path(NAME, HPARAMS_DIR))
    assert capsys.readouterr().out.strip() == f"TensorBoard hparams: {root}"
    runs = {p.name: hparams_of(p) for p in root.iterdir()}
    assert set(runs) == {"aaaa0001", "bbbb0002", "cccc0003", "dddd0004"}
    experiment, values, scalars = runs["aaaa0001"]
    assert experiment["hparams"] == SWEPT | {"verdict"}
    assert experiment["metrics"] == {GAIN, "best/eval/avg_pass_at_1", "last/eval/avg_pass_at_1"}
    assert values == {"optim.lr": pytest.approx(1e-3), "algorithm.kl_coef": pytest.approx(0.01), "verdict": "learns"}
    assert scalars[GAIN] == pytest.approx(0.0825) and scalars["last/eval/avg_pass_at_1"] == pytest.approx(0.4375)
    assert runs["cccc0003"][1]["verdict"] == "too high"
    log_sweep_end(report, cfg, store)  # written afresh, not added to
    assert len(list((root / "aaaa0001").glob("events.out.tfevents.*"))) == 1


def test_a_wandb_run_for_the_sweep_holds_the_leaderboard_and_the_verdict(finished, monkeypatch, capsys):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)  # offline needs no key
    store, report = finished
    cfg = SweepConfig.model_validate({
        "name": NAME, "storage": store.uri,
        "logging": {"tensorboard": False, "wandb": {"enabled": True, "project": "grpo-sweep-test", "mode": "offline"}},
    })
    log_sweep_end(report, cfg, store)
    out = capsys.readouterr().out
    assert out.startswith("W&B sweep run: ") and "warning" not in out
    (run_file,) = Path(store.path(NAME, "wandb")).glob("offline-run-*/run-*.wandb")
    records = list(wandb_records(run_file))
    (start,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert start.run_group == NAME and start.job_type == "sweep" and start.notes == report.verdict
    assert report.verdict.startswith("#1 is trial aaaa0001")
    summary = {item.key: item.value_json for r in records if r.WhichOneof("record_type") == "summary" for item in r.summary.update}
    assert json.loads(summary["verdict"]) == report.verdict
    (table_file,) = run_file.parent.glob("files/media/table/leaderboard_*.table.json")
    table = json.loads(table_file.read_text())
    rows = [dict(zip(table["columns"], row)) for row in table["data"]]
    assert [r["trial"] for r in rows] == ["aaaa0001", "bbbb0002", "dddd0004", "cccc0003"]
    assert SWEPT <= set(table["columns"]) and rows[0]["optim.lr"] == pytest.approx(1e-3)
    assert rows[0]["gain"] == pytest.approx(0.0825) and rows[0]["verdict"] == "learns" and rows[3]["verdict"] == "too high"
    assert (rows[0]["lr advice"], rows[3]["lr advice"]) == ("", "lower")  # the way to move the LR, as the leaderboard's rows carry it
    (env_file,) = run_file.parent.glob("files/media/table/envs_*.table.json")
    envs = json.loads(env_file.read_text())
    env_rows = [dict(zip(envs["columns"], row)) for row in envs["data"]]
    assert len(env_rows) == 16 and [r["trial"] for r in env_rows[:4]] == ["aaaa0001"] * 4  # 4 trials x 4 envs, ranked
    hotel = next(r for r in env_rows if r["trial"] == "aaaa0001" and r["env"] == "hotel")
    assert (hotel["base"], hotel["status"]) == (0.2, "IMPROVED") and hotel["last"] == pytest.approx(0.475)
