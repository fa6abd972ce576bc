"""``sweep report`` on a hand-made sweep directory with known numbers (fast; no Ray)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweep.__main__ import main
from sweep.report import default_out, make_report
from sweep.report.build import build_report
from sweep.report.importance import param_importance
from sweep.report.render import write_report
from sweep.verdict.thresholds import Thresholds
from tests.support.s3 import moto_server, s3_bucket  # noqa: F401, F811
from tests.sweep.report_fixture import make_sweep_dir


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    return make_sweep_dir(tmp_path_factory.mktemp("sweeps") / "fixture_sweep")


@pytest.fixture(scope="module")
def report(sweep_dir, tmp_path_factory):
    return build_report(str(sweep_dir), tmp_path_factory.mktemp("out"))


def test_leaderboard_ranks_by_the_verdicts_score_and_says_why_each_stopped(report):
    """The winner by its gain over the base; the trial whose pass@1 fell comes after those that held."""
    assert report.metric == "eval/avg_pass_at_1" and report.use_eval
    rows = {t.trial_id: t for t in report.trials}
    assert [t.trial_id for t in report.trials] == ["aaaa0001", "bbbb0002", "dddd0004", "cccc0003"]
    winner = report.judged[0]
    # the last two evals (steps 2 and 3) over the 4 envs, minus step 0's: (0.4525 + 0.4375) / 2 - 0.3625 (no per-task results: no interval)
    assert winner.score.gain == pytest.approx(0.0825) and winner.score.low is None and winner.score.steps == (2, 3)
    # the winner: eval mean over 4 envs, step 0 = (0.2 + 0.95 + 0 + 0.3) / 4; best at step 2 = (0.5 + 1 + 0 + 0.31) / 4
    assert rows["aaaa0001"].first == pytest.approx(0.3625)
    assert rows["aaaa0001"].best == pytest.approx(0.4525) and rows["aaaa0001"].best_step == 2
    assert rows["aaaa0001"].last == pytest.approx(0.4375)
    assert {t: r.stop for t, r in rows.items()} == {"aaaa0001": "finished", "bbbb0002": "finished", "cccc0003": "ASHA", "dddd0004": "zero signal"}
    assert rows["cccc0003"].steps == 2 and rows["cccc0003"].wall_s == pytest.approx(20.0)


def test_env_table_of_every_trial(report):
    rows = {r.env: r for r in report.env_rows}
    assert {e: r.status for e, r in rows.items()} == {"hotel": "IMPROVED", "mail": "SATURATED", "github": "FAILING", "zillow": "FLAT"}
    # hotel: base 0.2, last = the mean of the last two evals (0.5 + 0.45) / 2; best 0.5 at step 2, shown, not judged on
    assert rows["hotel"].last == pytest.approx(0.475) and rows["hotel"].delta == pytest.approx(0.275) and rows["hotel"].best_step == 2
    assert rows["hotel"].last_steps == (2, 3) and rows["hotel"].low is None  # no per-task results for trained evals here
    assert rows["github"].signal_frac == 0.0 and rows["hotel"].signal_frac == 1.0
    assert rows["hotel"].variance_mean == pytest.approx(0.08)
    assert report.env_tables["aaaa0001"] == report.env_rows and list(report.env_tables) == [j.trial_id for j in report.judged]
    # the trial that was too high: mail from 0.95 to (0.7 + 0.5) / 2, REGRESSED (not SATURATED: it fell)
    fell = {r.env: r for r in report.env_tables["cccc0003"]}
    assert fell["mail"].status == "REGRESSED" and fell["mail"].last == pytest.approx(0.6) and fell["hotel"].status == "REGRESSED"
    envs = {e.env: e for e in report.envs}
    assert envs["github"].no_signal and envs["github"].statuses == {"FAILING": 4} and envs["github"].signal_frac == 0.0
    assert not envs["mail"].no_signal and envs["mail"].statuses == {"SATURATED": 2, "REGRESSED": 1, "FAILING": 1}
    assert "No trial learned from 1 of 4 environments: github (failing, base 0.00)" in report.verdict
    assert "`env.env_keys` without it" in report.verdict


def test_one_verdict_per_trial_built_for_it_and_env_diagnoses(report):
    assert {j.trial_id: j.verdict.label for j in report.judged} == {
        "aaaa0001": "learns", "bbbb0002": "too low", "cccc0003": "too high", "dddd0004": "no signal",
    }
    assert "clip fraction" in {j.trial_id: j.verdict.why for j in report.judged}["bbbb0002"]  # this old sweep has no update KL
    assert {(d.rule, d.subject) for d in report.diagnoses} == {("env_saturated", "env mail"), ("env_failing", "env github")}
    assert report.verdict.startswith("#1 is trial aaaa0001 (lr=0.001, kl_coef=0.01): held-out pass@1 +0.083 from the base's 0.362")


def test_importance_from_the_study_and_its_reasons(report, sweep_dir, tmp_path):
    assert set(report.importance.importances) == {"optim.lr", "algorithm.kl_coef"}
    assert report.importance.complete == 4 and report.importance.pruned == 2
    assert sum(report.importance.importances.values()) == pytest.approx(1.0)
    too_few = param_importance(sweep_dir / "optuna.db", sweep_dir.name, min_complete=5)
    assert not too_few.importances and "4 finished trial(s), 2 stopped early (PRUNED)" in too_few.reason
    assert "not Optuna" in param_importance(None, "x").reason


def test_where_the_sweep_looked(report, tmp_path):
    """The saved space against the trials' configs (numbers in tests/sweep/test_coverage.py, worked by hand)."""
    lr, kl = report.looked
    assert (lr.key, lr.gap_low, lr.gap_high) == ("optim.lr", 1e-6, 1e-4) and lr.share == pytest.approx(0.4)
    assert (kl.key, kl.gap_low, kl.gap_high) == ("algorithm.kl_coef", 0.01, 0.1) and kl.share == pytest.approx(0.9)
    _, _, markdown = write_report(report, tmp_path / "r")
    assert "## Where the sweep looked" in markdown
    assert "| optim.lr | 1.00e-06 to 0.1 (log) | 4 | 1.00e-06 to 1.00e-04 (2.00 decades) | 40% |" in markdown


def test_trajectory_failures_grouped_with_an_example(report):
    a = report.trajectories
    assert a.episodes == 5 * 4 and a.envs[0].pass_rate == pytest.approx(0.2)
    groups = {g.name: g for g in a.failures}
    assert {n: g.episodes for n, g in groups.items()} == {
        "false completion (<done> with score 0)": 4, "permission denied": 4, "repeated identical call": 4, "not found": 4,
        "malformed tool call": 4, "tool argument error": 4, "context overflow": 4,
    }
    assert groups["permission denied"].example.startswith("permission denied: booking B9")
    assert groups["repeated identical call"].example == '{"name": "cancel_booking", "arguments": {"booking_id": "B9"}}'
    assert groups["not found"].where == "trial aaaa0001, step 0, hotel-3"


def test_cli_writes_the_files_and_prints_the_summary(sweep_dir, tmp_path, capsys):
    assert main(["report", str(sweep_dir), "--out", str(tmp_path / "r"), "--min-delta", "0.005"]) == 0
    out = capsys.readouterr().out
    # zillow 0.3 -> (0.31 + 0.3) / 2: +0.005, IMPROVED at this min-delta (no per-task results here: no interval)
    assert "# Sweep report: fixture_sweep" in out and "| 1 | aaaa0001 | zillow | 0.3 → 0.305 | 0.32 (1) | +0.005 | IMPROVED |" in out
    assert "| github | 0 | 0 | 0 | 0 | 4 | 0 | 0% | yes |" in out  # across the sweep: FAILING in all 4 trials, no signal
    names = sorted(p.name for p in (tmp_path / "r").iterdir())
    assert names == ["importance.png", "index.html", "learning_curves.png", "score_vs_params.png", "summary.md"]
    page = (tmp_path / "r" / "index.html").read_text()
    assert page.count("data:image/png;base64,") == 3 and 'src="http' not in page and "<script" not in page


def test_default_out_and_training_metric_fallback(tmp_path):
    root = make_sweep_dir(tmp_path / "no_eval", study=False)
    for folder in root.iterdir():
        if (folder / "result.json").exists():
            rows = [json.loads(line) for line in (folder / "result.json").read_text().splitlines()]
            kept = [{k: v for k, v in r.items() if not k.startswith("eval/")} for r in rows]
            (folder / "result.json").write_text("".join(json.dumps(r) + "\n" for r in kept))
    for agg in root.glob("trajectories/*/aggregated_results.jsonl"):
        agg.unlink()
    out, markdown = make_report(str(root), thresholds=Thresholds())
    assert out == root / "report" and (out / "index.html").exists()
    # on S3 the report is written here: two sweeps of one name in two places get two folders, each its own every time
    one, other = default_out("s3://team-a/sweeps/demo?endpoint_override=x"), default_out("s3://team-b/sweeps/demo")
    assert one.parent == other.parent == Path.cwd() and one.name.startswith("report-demo-") and other.name.startswith("report-demo-")
    assert one != other and one == default_out("s3://team-a/sweeps/demo/")
    assert "`reward/avg_pass_at_1` (training reward (eval was off)" in markdown
    assert "No importance: no optuna.db" in markdown
    # every training row of the fixture is 0.5: no trial moved, and none is crowned on luck
    assert "No trial rose above the base by more than noise" in markdown


def test_a_directory_without_trials_is_a_clear_error(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "no trial folders with result.json" in capsys.readouterr().err


@pytest.mark.parametrize("damaged", ["leaderboard.json", "sweep_config.json", "trainer_config.json"])  # params.json: read from the rows
def test_a_damaged_record_is_named_not_a_traceback(damaged, tmp_path, capsys):
    """A sweep's JSON record cut short or overwritten: `report` names the file and where it breaks, exit 2."""
    root = make_sweep_dir(tmp_path / "fixture_sweep", study=False)
    target = next(root.rglob(damaged)) if damaged in ("params.json", "trainer_config.json") else root / damaged
    target.write_text('{"lr": 0.1, ')
    assert main(["report", str(root), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert f"{target}: not valid JSON: " in err and "at line 1 column" in err and "Traceback" not in err, err


def test_a_trial_whose_steps_are_all_unreadable_is_an_error_not_a_silent_blank(tmp_path, capsys):
    """A result.json overwritten with what is not JSON: the trial's error names the file (its fate stays the
    leaderboard's word), the rest report as before."""
    root = make_sweep_dir(tmp_path / "fixture_sweep", study=False)
    target = sorted(root.glob("*/result.json"))[0]
    target.write_text("garbage\n{\"step\": 1, \n")
    assert main(["report", str(root), "--out", str(tmp_path / "r")]) == 0
    rows = {t.trial_id: t for t in build_report(str(root), tmp_path / "r2").trials}
    damaged = [t for t in rows.values() if t.error]
    assert len(damaged) == 1 and "result.json: none of its 2 lines is readable JSON" in damaged[0].error, rows
    out = capsys.readouterr()
    assert "result.json: none of its 2 lines is readable JSON" in out.out and "Traceback" not in out.err
    target.write_text('garbage\n{"step": 1, "training_iteration": 1, "eval/avg_pass_at_1": 0.5}\n')  # one line readable: no damage named
    assert not [t for t in build_report(str(root), tmp_path / "r3").trials if t.error]


def test_a_trials_lost_or_copied_records_are_read_from_what_is_left_or_named(tmp_path, capsys):
    """params.json lost, emptied or not an object: #1 was shown as `lr=None` and '-' though each result.json row holds its
    config; a result.json lost: the trial vanished (7 of 8 shown, silently); Tune's last row lost: wall time 0; a
    result.json copied over another trial's: one trial's LR beside the other's gain. Now read from what is left, or named."""
    root = make_sweep_dir(tmp_path / "fixture_sweep", study=False)
    folder = {p.name.split("_")[2]: p for p in root.glob("run_trial_*")}
    (folder["aaaa0001"] / "params.json").unlink()
    (folder["bbbb0002"] / "params.json").write_text("[]")
    (folder["dddd0004"] / "params.json").write_text("")
    rows = (folder["cccc0003"] / "result.json").read_text().splitlines()
    last = {k: v for k, v in json.loads(rows[-1]).items() if k != "time_total_s"}
    (folder["cccc0003"] / "result.json").write_text("\n".join([*rows[:-1], json.dumps(last)]) + "\n")
    report = build_report(str(root), tmp_path / "r")
    shown = {t.trial_id: t for t in report.trials}
    assert {t: s.config["optim.lr"] for t, s in shown.items()} == {"aaaa0001": 1e-3, "bbbb0002": 1e-6, "cccc0003": 3e-2, "dddd0004": 1e-4}
    assert shown["cccc0003"].wall_s is None and shown["aaaa0001"].wall_s == pytest.approx(30.0)
    assert main(["report", str(root), "--out", str(tmp_path / "r2")]) == 0
    out = capsys.readouterr().out
    assert "trial wall time (1 trial(s) without it: their last step is not in Tune's result.json: lost, cut, or not synced yet)." in out
    assert "| 1 | aaaa0001 | 1.00e-03 |" in out and "| ASHA | - |" in out
    (folder["bbbb0002"] / "params.json").write_text(json.dumps({"optim.lr": 1e-6, "algorithm.kl_coef": 0.0}))
    import shutil

    moved = tmp_path / "moved"
    shutil.move(folder["dddd0004"], moved)  # a trial folder deleted or moved whole: the leaderboard still ranks it
    assert build_report(str(root), tmp_path / "r2b").absent == ["dddd0004"]
    assert main(["report", str(root), "--out", str(tmp_path / "r2c")]) == 0
    assert "leaderboard.json ranks 1 trial(s) whose folders are not here (deleted or moved): dddd0004" in capsys.readouterr().out
    shutil.move(moved, folder["dddd0004"])
    (folder["bbbb0002"] / "result.json").unlink()  # the trial stays, known by its folder, without steps
    (root / "leaderboard.json").unlink()  # (whose word on each trial's fate wins)
    assert {t.trial_id: t.stop for t in build_report(str(root), tmp_path / "r3").trials}["bbbb0002"] == "no step reported"
    (folder["cccc0003"] / "params.json").write_text('{"optim.lr": 0.0')  # cut mid-write: the rows' copy
    assert {t.trial_id: t.config for t in build_report(str(root), tmp_path / "r3b").trials}["cccc0003"]["optim.lr"] == 3e-2
    (folder["bbbb0002"] / "result.json").write_text((folder["aaaa0001"] / "result.json").read_text())
    assert main(["report", str(root), "--out", str(tmp_path / "r4")]) == 2
    err = capsys.readouterr().err
    assert f"{folder['aaaa0001']} and {folder['bbbb0002']} both hold the records of trial aaaa0001" in err, err
    (folder["bbbb0002"] / "result.json").unlink()
    (folder["aaaa0001"] / "result.json").write_text(json.dumps({"training_iteration": 1, "trial_id": "aaaa0001"}) + "\n")
    assert main(["report", str(root), "--out", str(tmp_path / "r5")]) == 0  # no settings anywhere: shown as '-'
    (folder["aaaa0001"] / "params.json").write_text('"x"')
    assert main(["report", str(root), "--out", str(tmp_path / "r6")]) == 2
    assert "params.json: text, not the trial's settings, and its result.json holds none" in capsys.readouterr().err


def test_evals_a_trials_eval_record_lacks_are_read_from_its_step_rows(tmp_path, report):
    """The winner's aggregated_results.jsonl with its last line cut (a kill mid-write) or lost: the verdict changed
    silently (a lower gain; with the file lost, #1 fell to `no eval`). Each eval's metrics are in the step rows too."""
    root = make_sweep_dir(tmp_path / "fixture_sweep", study=False)
    record = root / "trajectories" / "aaaa0001" / "aggregated_results.jsonl"
    lines = record.read_text().splitlines()
    record.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])
    mended = build_report(str(root), tmp_path / "r")
    assert [(j.trial_id, j.score.gain, j.verdict.label) for j in mended.judged] == [(j.trial_id, j.score.gain, j.verdict.label) for j in report.judged]
    said = f"the evals at step(s) 3 are not in {record} (lost, cut, or not uploaded yet): read from the trial's step rows"
    assert mended.trials[0].mended == said
    assert not any(t.mended for t in report.trials)  # whole records: nothing read from elsewhere
    assert main(["report", str(root), "--out", str(tmp_path / "written")]) == 0
    assert f"Trial aaaa0001: {said}." in (tmp_path / "written" / "summary.md").read_text()
    record.write_text(lines[0] + "\n")  # only the base's line left: every trained eval from the rows
    assert [j.score.gain for j in build_report(str(root), tmp_path / "r2").judged] == [j.score.gain for j in report.judged]
    # the whole file lost: this trial evaluated every step, so no row carries step 0's eval (the step-1 eval came first);
    # step 0 is the sweep's shared base eval its trainer config names
    from grpo.config import TrainerConfig
    from sweep.spec.bases import eval_key

    record.unlink()
    assert build_report(str(root), tmp_path / "r3").judged[0].verdict.label != "learns"  # no base: not judged as before
    key = eval_key(TrainerConfig.model_validate(json.loads((record.parent / "trainer_config.json").read_text())))
    (root / "base_evals" / key).mkdir(parents=True)
    (root / "base_evals" / key / "aggregated_results.jsonl").write_text(lines[0] + "\n")
    whole = build_report(str(root), tmp_path / "r4")
    assert [(j.trial_id, j.score.gain, j.verdict.label) for j in whole.judged] == [(j.trial_id, j.score.gain, j.verdict.label) for j in report.judged]
    assert whole.trials[0].mended.startswith("the evals at step(s) 0, 1, 2, 3 are not in ")


@pytest.mark.parametrize("record, text, named", [
    ("leaderboard.json", "{}", "an object, not the list of ranked trials"),
    ("leaderboard.json", '[{"trial": "aaaa0001"}]', "row 1 (trial aaaa0001): 'config' is null, not the trial's settings"),
    ("leaderboard.json", '[{"trial": "aaaa0001", "config": {}, "gain": "high"}]', "row 1 (trial aaaa0001): 'gain' is text, not a number"),
    ("sweep_config.json", "[]", "a list, not the sweep's config"),
    ("sweep_config.json", '{"scheduler": "asha"}', "'scheduler' is text, not a section"),
    ("sweep_config.json", '{"trainer": {"eval": {"score_window": "two"}}}', "'trainer.eval.score_window' = 'two', not a whole number"),
    ("sweep_config.json", '{"stopping": {"zero_signal": {"enabled": true, "patience": 0}}}',
     "'stopping.zero_signal.patience' = 0: Input should be greater than or equal to 1"),
    ("sweep_config.json", '{"stopping": {"zero_signal": [1]}}', "'stopping.zero_signal' = [1]: Input should be"),
    ("confirm.json", '{"holds": true}', "no list of confirmed 'settings' and 'seeds'"),
    ("confirm.json", '{"settings": [{"setting": {}}], "seeds": [1]}', "setting 1 is no confirmed setting"),
    ("trajectories/aaaa0001/trainer_config.json", '"x"', "text, not an object"),
])
def test_a_record_of_another_shape_is_named_before_anything_is_written(record, text, named, tmp_path, capsys):
    """A record overwritten or hand-edited into another shape was a traceback where a reader met it (confirm.json's after
    the new plots were written beside the old summary): now named, exit 2, nothing written."""
    root = make_sweep_dir(tmp_path / "fixture_sweep", study=False)
    (root / record).write_text(text)
    assert main(["report", str(root), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert f"{root / record}: {named}" in err and "the sweep's record is damaged" in err and "Traceback" not in err, err
    assert not (tmp_path / "r").exists()


def test_damaged_rows_and_eval_lines_are_left_out_and_the_rest_reported(tmp_path, report, capsys):
    """A step row that is no object, a step or metric that is text, per-task results of another shape, an unreadable
    Optuna study: each was a traceback. The damaged part is left out (a metric not reported, a point without its
    interval, importance with the reason), the rest reported as before."""
    root = make_sweep_dir(tmp_path / "fixture_sweep", study=False)
    folder = next(root.glob("run_trial_bbbb0002_*"))
    with open(folder / "result.json", "a") as f:
        f.write('5\n{"training_iteration": "twelve", "trial_id": "bbbb0002"}\n')
    rows = (folder / "result.json").read_text().splitlines()
    first = {**json.loads(rows[0]), "policy/entropy": "high"}
    (folder / "result.json").write_text("\n".join([json.dumps(first), *rows[1:]]) + "\n")
    record = root / "trajectories" / "cccc0003" / "aggregated_results.jsonl"
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    lines[1]["tasks"] = [1, 2]
    record.write_text("".join(json.dumps(line) + "\n" for line in lines))
    (root / "optuna.db").write_text("garbage")
    damaged = build_report(str(root), tmp_path / "r")
    assert [(j.trial_id, j.score.gain, j.verdict.label) for j in damaged.judged] == [(j.trial_id, j.score.gain, j.verdict.label) for j in report.judged]
    assert damaged.importance.reason.startswith("optuna.db could not be read as an Optuna study (DatabaseError: ")
    assert main(["report", str(root), "--out", str(tmp_path / "r2")]) == 0 and "Traceback" not in capsys.readouterr().err


def test_a_report_folder_that_cannot_be_written_is_named_before_the_work(tmp_path, capsys):
    root = make_sweep_dir(tmp_path / "fixture_sweep", study=False)
    (root / "report").write_text("a file where the report goes")
    assert main(["report", str(root)]) == 2
    assert f"the report folder (--out names another) {root / 'report'}: a file, not a directory" in capsys.readouterr().err


def test_report_from_a_sweep_in_s3(sweep_dir, report, s3_bucket, tmp_path):  # noqa: F811
    client = s3_bucket.server.client()
    for path in sweep_dir.rglob("*"):
        if path.is_file() and "report" not in path.relative_to(sweep_dir).parts:
            client.upload_file(str(path), s3_bucket.name, f"results/{sweep_dir.name}/{path.relative_to(sweep_dir)}")
    uri = f"{s3_bucket.uri('results/' + sweep_dir.name)}?endpoint_override={s3_bucket.server.host_port}&scheme=http"
    remote = build_report(uri, tmp_path / "remote")
    _, page, markdown = write_report(remote, tmp_path / "remote")
    assert page.exists() and "Sweep report: fixture_sweep" in markdown and f"Source: `{uri}`" in markdown
    assert remote.trials == report.trials and remote.env_rows == report.env_rows and remote.diagnoses == report.diagnoses
    assert remote.importance.importances == report.importance.importances and remote.trajectories == report.trajectories


def test_old_dumps_without_failure_kinds_still_load():
    """A dump written before kinds existed: counted, grouped by its stop reason, and said to be unclassified."""
    from sweep.report.trajectories import analyze, parse_episode

    old = {"input_prompt": "p", "output_response": "<done><|im_end|>", "score": 0.0, "stop_reason": "done",
           "env_extras": {"task_key": "hotel-1", "env_key": "hotel", "turns": 1, "tool_calls": 0, "env_error": ""}}
    episode = parse_episode(old, "t", 0)
    assert episode.failures is None
    a = analyze([episode])
    assert a.episodes == 1 and a.without_kinds == 1
    assert [g.name for g in a.failures] == ["false completion (<done> with score 0)"]


def test_the_signal_curves_are_drawn_where_a_trial_has_them():
    """Dynamic sampling's extra episodes, the curriculum's expected signal and truncated importance weights
    get a panel when some trial reported a non-zero value; all-zero or absent keys draw nothing."""
    from sweep.report.build import signal_panels
    from sweep.report.load import SweepData, TrialData

    plain = TrialData("plain", "f1", {}, [{"training_iteration": s, "reward/frac_mixed": 0.5, "policy/tis_truncated_frac": 0.0} for s in (1, 2)])
    dynamic = TrialData("dyn", "f2", {}, [{"training_iteration": s, "reward/frac_mixed": 0.75, "dynamic/extra_episodes": 8.0 * s} for s in (1, 2)])
    panels = signal_panels(SweepData("u", "s", [plain, dynamic], None, []))
    assert list(panels) == ["groups with mixed outcomes (signal)", "dynamic sampling: extra episodes per step"]
    assert panels["dynamic sampling: extra episodes per step"] == {"plain": [], "dyn": [(1, 8.0), (2, 16.0)]}
