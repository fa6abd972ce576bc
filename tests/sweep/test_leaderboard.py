"""The leaderboard's row for a trial that restarted: how many times, and only the history its last start kept."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

from pyarrow.fs import LocalFileSystem

from sweep import leaderboard
from sweep.trials import attempts

METRIC = "reward/avg_pass_at_1"


def restarted_trial(tmp_path):
    """A trial without checkpoints: attempt 0 reported steps 1-3 and was killed; attempt 1 started over and
    raised at step 3. Tune's ``result.json`` holds both attempts' rows, as it appends."""
    trial = tmp_path / "sweep" / "run_trial_abcde_00000_0_2026-11-24"
    (trial / "attempts").mkdir(parents=True)
    rows = [(1, 0, 0.1), (2, 0, 0.2), (3, 0, 0.9), (1, 1, 0.1), (2, 1, 0.3)]
    (trial / "result.json").write_text("".join(
        json.dumps({"trial_id": "abcde_00000", "training_iteration": s, "step": s, METRIC: v, attempts.ATTEMPT: a, "time_total_s": 1.0}) + "\n"
        for s, a, v in rows))
    records = [attempts.Attempt(0, "run", 11, 1.0, resumed_from=0), attempts.Attempt(1, "run", 12, 2.0, resumed_from=0, ended=3.0, raised="ValueError: x")]
    for record in records:
        (trial / "attempts" / f"attempt_{record.number:03d}.json").write_text(json.dumps(record.__dict__))
    return trial


def test_a_restarted_trial_says_how_often_and_counts_only_its_kept_steps(tmp_path):
    trial = restarted_trial(tmp_path)
    result = SimpleNamespace(path=str(trial), filesystem=LocalFileSystem(), metrics={"trial_id": "abcde_00000"},
                             config={"optim.lr": 1e-3}, error="ValueError: x", metrics_dataframe=None)
    row = leaderboard.trial_row(result, METRIC, "max", 6, ["optim.lr"])
    assert (row.restarts, row.steps, row.status, row.best_metric) == (1, 2, "error", 0.3)  # attempt 0's step 3 was replaced
    assert leaderboard._fate(row)["restarts"] == 1


def test_a_trial_without_attempt_records_had_no_restarts(tmp_path):
    trial = restarted_trial(tmp_path)
    for record in (trial / "attempts").iterdir():
        record.unlink()
    result = SimpleNamespace(path=str(trial), filesystem=LocalFileSystem(), metrics={}, config={}, error=None, metrics_dataframe=None)
    assert leaderboard.trial_row(result, METRIC, "max", 2, []).restarts == 0


def test_the_table_has_a_restarts_column(tmp_path):
    from rich.console import Console

    out = io.StringIO()
    leaderboard.render([{"trial": "abcde_00000", "config": {"optim.lr": 1e-3}, "steps": 2, "restarts": 1, "status": "error",
                         "verdict": "error", "why": "raised"}], Console(file=out, width=200))
    lines = out.getvalue().splitlines()
    header = [cell.strip() for cell in next(line for line in lines if "restarts" in line).split("┃")]
    row = [cell.strip() for cell in next(line for line in lines if "abcde_00000" in line).split("│")]
    assert row[header.index("restarts")] == "1" and row[header.index("steps")] == "2"


def test_the_report_reads_the_same_history_and_restarts(tmp_path):
    from sweep.report.load import load_sweep
    from sweep.report.store import SweepStore

    restarted_trial(tmp_path)
    (trial,) = load_sweep(SweepStore(str(tmp_path / "sweep"))).trials
    assert (trial.restarts, trial.steps, [r[METRIC] for r in trial.rows]) == (1, 2, [0.1, 0.3])


def test_a_trial_is_named_alike_from_its_reports_or_from_its_folder_alone():
    """A trial that failed before its first report has only its folder: the leaderboard and the report must
    both name it by its trial id (they named it by folder and by id, so it was listed twice)."""
    from sweep.store.results import trial_id_of

    assert trial_id_of("/s/demo/run_trial_954fe51d_1_optim_lr=0.0001_2026-11-24_03-40-56") == "954fe51d"  # a searcher's id
    assert trial_id_of("run_trial_abcde_00012_12_lr=0.1_2026-11-24") == "abcde_00012"  # random/grid's
    assert trial_id_of("run_trial_abcde_00012_12_lr=0.1", [{"trial_id": "other"}]) == "other"  # its reports say
    assert trial_id_of("not_a_tune_folder") == "not_a_tune_folder"


def test_a_trial_that_failed_before_its_first_report_is_named_by_its_id(tmp_path):
    folder = tmp_path / "run_trial_954fe51d_3_optim_lr=0.0001_2026-11-24_03-40-56"
    folder.mkdir()
    result = SimpleNamespace(path=str(folder), filesystem=LocalFileSystem(), metrics={}, config={}, error="RuntimeError: x", metrics_dataframe=None)
    row = leaderboard.trial_row(result, METRIC, "max", 2, [])
    assert (row.trial, row.status) == ("954fe51d", "error")


def test_a_leaderboard_row_carries_the_way_its_advice_moves_the_lr():
    """``leaderboard.json`` keeps the verdict's ``lr`` as ``lr_advice`` (the verdict bench counts it), and a row read
    back renders with it; a row from before it was kept reads as no way."""
    from rich.console import Console

    from sweep.report.judge import Judged, row
    from sweep.verdict.labels import TrialEvidence, Verdict
    from sweep.verdict.score import EvalPoint, Score

    base = EvalPoint(0, 0.3)
    judged = Judged("t1", Score(0.0, -0.02, 0.02, (4, 6)), Verdict("flat", "held; a higher LR, or more steps", "raise"),
                    TrialEvidence("t1", base=base, evals=[EvalPoint(4, 0.3), EvalPoint(6, 0.3)]), "b")
    stored = json.loads(json.dumps(row(judged, {"optim.lr": 1e-6})))
    assert stored["verdict"] == "flat" and stored["lr_advice"] == "raise"
    out = io.StringIO()
    leaderboard.render([stored, {k: v for k, v in stored.items() if k != "lr_advice"}], Console(file=out, width=200))
    assert "flat" in out.getvalue()


def test_base_to_last_is_the_level_the_gain_was_measured_at():
    """``last`` is the mean of the evals in the gain's window (as in the per-env tables), not the final eval: with
    the base at 0.30 and evals 0.50, 0.40, 0.60 at steps 2, 4, 6 and a window of steps 4 and 6, last is 0.50 and
    base → last reads as the gain, +0.20, where the final eval alone would say 0.60 beside a gain of +0.20."""
    from sweep.report.judge import Judged, row
    from sweep.verdict.labels import TrialEvidence, Verdict
    from sweep.verdict.score import EvalPoint, score_trials

    base, evals = EvalPoint(0, 0.3), [EvalPoint(2, 0.5), EvalPoint(4, 0.4), EvalPoint(6, 0.6)]
    score = score_trials(base, {"t1": evals}, 2)["t1"]
    assert score.steps == (4, 6)
    judged = Judged("t1", score, Verdict("learns", "rose"), TrialEvidence("t1", base=base, evals=evals), "b")
    stored = row(judged, {"optim.lr": 1e-4})
    assert stored["last"] == 0.5 and stored["gain"] == 0.5 - 0.3
    assert stored["last"] - stored["base"] == stored["gain"]
    no_evals = Judged("t2", score_trials(base, {"t2": []}, 2)["t2"], Verdict("error", "no evals"), TrialEvidence("t2", base=base), "b")
    assert row(no_evals, {})["last"] is None


def test_the_scores_placeholders_are_no_first_or_best_value(tmp_path):
    """eval/score is 0 on every report before the first trained eval: a trial that only lost has no best of 0."""
    trial = tmp_path / "sweep" / "run_trial_fghij_00000_0_2026-11-24"
    trial.mkdir(parents=True)
    rows = [(1, 0, 0.0), (2, 2, -0.1), (3, 2, -0.1), (4, 4, -0.05)]  # step, eval/global_step, eval/score
    (trial / "result.json").write_text("".join(
        json.dumps({"trial_id": "fghij_00000", "training_iteration": s, "eval/global_step": g, "eval/score": v}) + "\n" for s, g, v in rows))
    result = SimpleNamespace(path=str(trial), filesystem=LocalFileSystem(), metrics={}, config={}, error=None, metrics_dataframe=None)
    row = leaderboard.trial_row(result, "eval/score", "max", 4, [])
    assert (row.first_metric, row.best_metric, row.steps) == (-0.1, -0.05, 4)
    assert leaderboard.trial_row(result, "eval/score", "min", 4, []).best_metric == -0.1


def test_a_damaged_record_leaves_the_leaderboard_with_every_trials_fate(tmp_path, capsys):
    """A trial's params.json cut by a kill mid-write: the sweep's end still writes a row per trial (its fate from
    Tune) and says why there is no verdict, instead of leaving no leaderboard at all."""
    from sweep.store.storage import open_storage

    trial = restarted_trial(tmp_path)
    (trial / "params.json").write_text('{"optim.lr": 0.00')
    result = SimpleNamespace(path=str(trial), filesystem=LocalFileSystem(), metrics={"trial_id": "abcde_00000"},
                             config={"optim.lr": 1e-3}, error="ValueError: x", metrics_dataframe=None)
    fate = leaderboard.trial_row(result, METRIC, "max", 6, ["optim.lr"])
    rows = leaderboard.judged_rows([fate], open_storage(str(tmp_path)), "sweep")
    assert [(r["trial"], r["status"], r["restarts"]) for r in rows] == [("abcde_00000", "error", 1)]
    said = capsys.readouterr().err
    assert "leaderboard: the trials' results could not be judged" in said and "params.json" in said
