# ruff: noqa: F811  (the S3 fixtures are imported by name and requested by name)
"""Storage URIs, the mirror of trial outputs to S3, and trial histories read back one row per step.

Against moto's real S3 server on 127.0.0.1 (no mocks) and local directories.
"""

from __future__ import annotations

import json

import pytest

from configkit.base import ConfigError
from sweep.resume import experiment_uri
from sweep.store.results import keep_before_resume, trial_history
from sweep.store.storage import DirMirror, open_storage, split_experiment
from sweep.store.study import optuna_db_path, pull_study, push_study
from tests.support.s3 import moto_server, s3_bucket  # noqa: F401


def test_local_storage_is_an_absolute_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = open_storage("results")
    assert store.is_local and store.root == str(tmp_path / "results")
    store.write_text("{}", "demo", "leaderboard.json")
    assert (tmp_path / "results" / "demo" / "leaderboard.json").read_text() == "{}"
    assert optuna_db_path(store, "demo") == tmp_path / "results" / "demo" / "optuna.db"


@pytest.mark.parametrize(
    "uri, words",
    [
        ("s3://bucket/p?access_key=AKIA", ["access_key", "environment"]),
        ("s3://bucket/p?secret_key=x&region=us-east-1", ["secret_key"]),
        ("s3://bucket/p?colour=blue", ["unknown option colour", "endpoint_override"]),
        ("gs://bucket/p", ["gs://", "s3://bucket/prefix"]),
        ("s3:///p", ["no bucket"]),
    ],
)
def test_bad_storage_uris_say_what_is_allowed(uri, words):
    with pytest.raises(ConfigError) as err:
        open_storage(uri)
    assert "storage" in str(err.value) and all(w in str(err.value) for w in words)


def test_experiment_uris_split_and_join_keeping_the_endpoint():
    uri = "s3://bucket/prefix/demo?endpoint_override=127.0.0.1:9000&scheme=http"
    storage, name = split_experiment(uri)
    assert (storage, name) == ("s3://bucket/prefix?endpoint_override=127.0.0.1:9000&scheme=http", "demo")
    assert experiment_uri(storage, name) == uri


def test_a_bare_uri_drops_the_query_and_a_trailing_slash_only():
    from sweep.store.uris import bare_uri

    assert bare_uri("s3://b/p/sweep/?endpoint_override=127.0.0.1:9000&scheme=http") == "s3://b/p/sweep"
    assert bare_uri("/runs/sweep") == "/runs/sweep" and bare_uri("s3://b/a?b/c") == "s3://b/a"


def test_s3_storage_from_the_uri_query_or_the_environment(s3_bucket, monkeypatch):
    with_query = open_storage(f"s3://{s3_bucket.name}/sweeps?endpoint_override={s3_bucket.server.host_port}&scheme=http")
    with_query.write_text("hello", "demo", "a.txt")
    assert s3_bucket.read("sweeps/demo/a.txt") == b"hello"
    from_env = open_storage(f"s3://{s3_bucket.name}/sweeps")  # AWS_ENDPOINT_URL set by the fixture
    assert from_env.read_text("demo", "a.txt") == "hello" and from_env.display("demo") == f"s3://{s3_bucket.name}/sweeps/demo"
    assert not from_env.is_local and from_env.exists("demo") and not from_env.exists("other")


def test_mirror_uploads_new_and_changed_files_and_resumes_from_the_bucket(s3_bucket, tmp_path):
    store = open_storage(s3_bucket.uri("sweeps"))
    first = DirMirror(tmp_path / "a", store, "demo", "trajectories", "t1")
    first.pull()  # nothing there yet
    (tmp_path / "a" / "global_step_0").mkdir(parents=True)
    (tmp_path / "a" / "global_step_0" / "hotel.jsonl").write_text('{"score": 1}\n')
    (tmp_path / "a" / "aggregated_results.jsonl").write_text('{"global_step": 0}\n')
    first.push()
    prefix = "sweeps/demo/trajectories/t1/"
    assert sorted(k for k in s3_bucket.keys(prefix) if not k.endswith("/")) == [prefix + "aggregated_results.jsonl", prefix + "global_step_0/hotel.jsonl"]

    second = DirMirror(tmp_path / "b", store, "demo", "trajectories", "t1")  # another machine resumes the trial
    second.pull()
    with open(tmp_path / "b" / "aggregated_results.jsonl", "a") as f:
        f.write('{"global_step": 2}\n')
    second.push()
    lines = s3_bucket.read(prefix + "aggregated_results.jsonl").decode().splitlines()
    assert [json.loads(line)["global_step"] for line in lines] == [0, 2]


def test_study_goes_up_and_comes_down_by_experiment(s3_bucket):
    store = open_storage(s3_bucket.uri("sweeps"))
    local = optuna_db_path(store, "demo")
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_bytes(b"SQLite format 3\0study")
    push_study(store, "demo")
    assert s3_bucket.read("sweeps/demo/optuna.db") == b"SQLite format 3\0study"
    local.unlink()
    assert pull_study(store, "demo").read_bytes() == b"SQLite format 3\0study"


def _rows(path, steps, tag):
    path.write_text("".join(json.dumps({"training_iteration": s, "step": s, "tag": tag}) + "\n" for s in steps))


def test_history_has_each_step_once_with_redone_steps_replacing_the_first_run(tmp_path):
    trial = tmp_path / "exp" / "run_trial_0"
    trial.mkdir(parents=True)
    _rows(trial / "result.json", [1, 2, 3], "first")
    assert keep_before_resume(open_storage(str(tmp_path)).fs, str(tmp_path / "exp")) == 1
    _rows(trial / "result.json", [3, 4], "resumed")  # Tune's restore starts result.json afresh
    with open(trial / "result.json", "a") as f:
        f.write('{"training_iteration": 5, "st')  # the driver died mid-write
    (trial / "steps").mkdir()
    (trial / "steps" / "step_000005.json").write_text(json.dumps({"step": 5, "training_iteration": 5, "tag": "recorded"}))
    history = trial_history(trial)
    assert [(r["step"], r["tag"]) for r in history] == [(1, "first"), (2, "first"), (3, "resumed"), (4, "resumed"), (5, "recorded")]


def test_run_refuses_an_existing_sweep_unless_fresh(tmp_path):
    from sweep.resume import start_fresh

    store = open_storage(str(tmp_path / "results"))
    store.write_text("state", "demo", "tuner.pkl")
    with pytest.raises(ConfigError) as err:
        start_fresh(store, "demo", fresh=False, space="space.yaml")
    message = str(err.value)
    assert "already exists" in message and f"python -m sweep resume {tmp_path / 'results' / 'demo'}" in message and "space.yaml --fresh" in message
    start_fresh(store, "demo", fresh=True, space="space.yaml")
    assert not store.exists("demo")
    start_fresh(store, "other", fresh=False, space="space.yaml")  # nothing there: nothing to refuse


def test_run_never_deletes_a_folder_of_the_sweeps_name_that_is_not_a_sweep(tmp_path):
    """A folder at {storage}/{name} holding the user's own files is refused, with --fresh too, and left as it was;
    one holding only what a start writes before its config (a start killed there) is started over."""
    from sweep.resume import start_fresh

    store = open_storage(str(tmp_path / "results"))
    store.write_text("my thesis data", "demo", "important.txt")
    store.write_text("{}", "demo", "notes", "a.json")
    for fresh in (False, True):
        with pytest.raises(ConfigError) as err:
            start_fresh(store, "demo", fresh=fresh, space="space.yaml")
        assert f"{tmp_path / 'results' / 'demo'} exists and is not a sweep's folder (it holds important.txt, notes)" in str(err.value)
        assert "key 'name'" in str(err.value) and store.read_text("demo", "important.txt") == "my thesis data"
    store.write_text("{}", "killed", "base_evals", "hotel.json")
    store.write_text("{", "killed", "sweep_config.json.partial-12-34")  # killed while its config was written
    start_fresh(store, "killed", fresh=False, space="space.yaml")
    assert not store.exists("killed")


def test_resume_names_what_is_missing(tmp_path):
    from sweep.run import resume_sweep

    with pytest.raises(ConfigError, match="no sweep to resume here"):
        resume_sweep(str(tmp_path / "results" / "demo"))


@pytest.mark.parametrize("saved", [b"{bad", b"[]", b"null", b'"x"', b"\xff\xfe", b"[" * 100000 + b"]" * 100000])
def test_a_damaged_saved_config_is_named_with_the_fix(saved, tmp_path):
    """resume and confirm read the sweep's saved config first: damaged, it is named, never a traceback."""
    from sweep.resume import load_config

    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "tuner.pkl").write_bytes(b"x")
    (tmp_path / "demo" / "sweep_config.json").write_bytes(saved)
    with pytest.raises(ConfigError, match=r"demo/sweep_config.json: (not a JSON object|unreadable).*the sweep's saved config is damaged"):
        load_config(open_storage(str(tmp_path)), "demo")


def test_a_record_rewritten_while_read_is_always_read_whole_and_a_cut_one_is_skipped(tmp_path):
    import threading

    import pyarrow.fs as pafs

    from sweep.store.results import recorded_steps
    from sweep.store.storage import write_whole

    fs, steps = pafs.LocalFileSystem(), tmp_path / "trial" / "steps"
    steps.mkdir(parents=True)
    big = {"step": 1, "padding": "x" * 2_000_000}  # long enough that a plain write is seen half-done
    write_whole(fs, str(steps / "step_000001.json"), json.dumps(big).encode())
    stop, seen = threading.Event(), []

    def rewrite():
        while not stop.is_set():
            write_whole(fs, str(steps / "step_000001.json"), json.dumps(big).encode())

    writer = threading.Thread(target=rewrite)
    writer.start()
    try:
        for _ in range(200):
            seen.append(sorted(recorded_steps(tmp_path / "trial")))
    finally:
        stop.set()
        writer.join()
    assert seen == [[1]] * 200  # never empty, never a JSON error; the temporaries are not records
    (steps / "step_000002.json").write_text('{"step": 2, "reward')  # a record cut by a kill (older sweeps)
    assert sorted(recorded_steps(tmp_path / "trial")) == [1]


def test_resume_refuses_a_sweep_without_a_readable_snapshot(tmp_path):
    """Tune, finding no snapshot of the sweep or a damaged newest one, starts the whole sweep over in its folder: the
    resume is refused first, naming the file, with the way on; a sweep with a whole newest snapshot passes."""
    from sweep.resume import check_snapshot

    store = open_storage(str(tmp_path / "results"))
    store.write_text("state", "demo", "tuner.pkl")
    with pytest.raises(ConfigError, match=r"Tune saved no snapshot of this sweep \(no experiment_state-\*\.json\).*--fresh"):
        check_snapshot(store, "demo")
    store.write_text('{"trials": []}', "demo", "experiment_state-2026-12-02_10-00-00.json")
    check_snapshot(store, "demo")
    store.write_text('{"trials": [', "demo", "experiment_state-2026-12-02_10-00-09.json")  # cut by a kill mid-upload
    with pytest.raises(ConfigError) as err:
        check_snapshot(store, "demo")
    assert "experiment_state-2026-12-02_10-00-09.json: Tune's newest snapshot of the sweep is damaged (not valid JSON: Expecting value at line 1 column 13)" in str(err.value)
    assert "(experiment_state-2026-12-02_10-00-00.json)" in str(err.value)


def test_a_sweep_whose_tune_state_is_lost_is_never_taken_for_a_failed_start(tmp_path, monkeypatch, capsys):
    """A finished sweep whose tuner.pkl was lost read as "a start that failed before its first trial": `sweep run` deleted
    its trials, leaderboard and report without `--fresh`, and `resume` pointed there. Now both refuse, naming `report`;
    a lost snapshot beside trials is not "stopped before the first trial" (whose way on, `--fresh`, deletes them)."""
    from sweep.resume import check_snapshot, failed_start, forget_failed_start, load_config
    from tests.sweep.test_bad_inputs import BASE, run_main, write_files

    monkeypatch.chdir(tmp_path)
    trial = "results/t/run_trial_aaaa0001_1_lr=0.001"
    write_files(tmp_path, {"space.yaml": BASE, "results/t/sweep_config.json": "{}", f"{trial}/params.json": '{"lr": 0.001}',
                           f"{trial}/result.json": '{"training_iteration": 1}\n', "results/t/leaderboard.json": "[]"})
    store = open_storage(str(tmp_path / "results"))
    assert not failed_start(store, "t")
    forget_failed_start(store, "t")
    assert (tmp_path / trial / "result.json").exists()
    code, out, err = run_main(["run", "space.yaml"], capsys)
    assert code == 2 and "holds a sweep's 1 trial folder(s) but not Tune's state (tuner.pkl, lost or removed)" in err, (code, err)
    assert "python -m sweep report " in err and "--fresh` (deletes it)" in err and (tmp_path / trial / "result.json").exists()
    with pytest.raises(ConfigError, match=r"but not Tune's state .* `python -m sweep report .*/results/t` reads it as it is$"):
        load_config(store, "t")
    store.write_text("state", "t", "tuner.pkl")
    with pytest.raises(ConfigError, match=r"Tune's snapshot of this sweep \(an experiment_state-\*\.json\) is missing beside its 1 trial"):
        check_snapshot(store, "t")


def test_confirm_names_a_damaged_ranking_and_how_to_write_it_anew(tmp_path, monkeypatch, capsys):
    """leaderboard.json emptied, or not the list of ranked rows: `confirm` failed with a JSONDecodeError or an
    AttributeError traceback (`report` named the same file)."""
    from sweep.resume import save_config
    from sweep.spec.loader import load_space
    from tests.sweep.test_bad_inputs import BASE, run_main, write_files

    monkeypatch.chdir(tmp_path)
    write_files(tmp_path, {"space.yaml": BASE})
    store = open_storage(str(tmp_path / "results"))
    save_config(store, load_space(tmp_path / "space.yaml"))
    store.write_text("state", "t", "tuner.pkl")
    for board, why in [("", "empty"), ("[{", "not valid JSON: Expecting property name enclosed in double quotes at line 1 column 3"), ("{}", "an object, not the list of ranked trials"),
                       ('[{"trial": "a", "config": null}]', "row 1 (trial a): 'config' is null, not the trial's settings")]:
        store.write_text(board, "t", "leaderboard.json")
        code, out, err = run_main(["confirm", "results/t"], capsys)
        assert code == 2 and f"leaderboard.json: the sweep's ranking is damaged ({why})" in err, (code, err)
        assert "`python -m sweep resume " in err and "Traceback" not in out + err


def test_a_sweep_whose_saved_config_is_lost_is_not_called_another_tools(tmp_path):
    from sweep.resume import load_config

    store = open_storage(str(tmp_path))
    store.write_text("state", "t", "tuner.pkl")
    with pytest.raises(ConfigError, match=r"no sweep_config.json \(the sweep was started by another tool\)"):
        load_config(store, "t")
    store.write_text("[]", "t", "leaderboard.json")
    with pytest.raises(ConfigError, match=r"its sweep_config.json \(the sweep's saved config\) is lost, .* `python -m sweep report .*/t` reads it"):
        load_config(store, "t", "confirm")
