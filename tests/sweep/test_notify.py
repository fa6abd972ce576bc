"""Sweep notifications: a local webhook server sees start, each trial's end (with its reason), failure and
the sweep's end, in order, through a real Tune run; a failing webhook never fails anything nor leaks its URL."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from sweep.watch.notify import WEBHOOK_ENV, SweepNotifier, notifiers, post, results_location
from tests.support.webhook import Webhook


@contextmanager
def local_ray() -> Iterator[None]:
    import ray

    tmp = tempfile.mkdtemp(prefix="rn", dir="/tmp")  # Ray's socket paths must stay short
    old = {k: os.environ.get(k) for k in ("RAY_TMPDIR", "RAY_AUTH_MODE")}
    os.environ.update(RAY_TMPDIR=tmp, RAY_AUTH_MODE="disabled")
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield
    finally:
        ray.shutdown()
        for key, value in old.items():
            os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)
        shutil.rmtree(tmp, ignore_errors=True)


def trainable(config):
    """Reports like a GRPO trial: 'flat' has no signal, 'crash' raises at step 2, 'good' learns."""
    from ray import tune

    for step in range(1, 5):
        if config["kind"] == "crash" and step == 2:
            raise RuntimeError("CUDA out of memory (simulated)")
        variance = 0.0 if config["kind"] == "flat" else 0.2
        tune.report({"reward/avg_pass_at_1": 0.1 * step, "reward/variance_per_prompt": variance, "step": step})


@pytest.mark.slow
def test_webhook_sees_the_sweep_in_order(tmp_path, monkeypatch):
    from ray import tune
    from ray.tune.stopper import CombinedStopper, MaximumIterationStopper, Stopper

    from sweep.trials.stoppers import ZeroSignalStopper

    class ZeroSignal(ZeroSignalStopper, Stopper):
        pass

    results = results_location(str(tmp_path), "notify")
    with Webhook() as hook, local_ray():
        monkeypatch.setenv("GRPO_TEST_NOTIFY_WEBHOOK", hook.url)
        notifier = SweepNotifier("notify", results, "reward/avg_pass_at_1", "max", total_steps=4, zero_signal=(1e-3, 2),
                                 webhook_env="GRPO_TEST_NOTIFY_WEBHOOK")
        tuner = tune.Tuner(
            trainable,
            param_space={"kind": tune.grid_search(["good", "flat", "crash"])},
            tune_config=tune.TuneConfig(metric="reward/avg_pass_at_1", mode="max", max_concurrent_trials=1),
            run_config=tune.RunConfig(name="notify", storage_path=str(tmp_path), callbacks=[notifier], verbose=0,
                                      stop=CombinedStopper(MaximumIterationStopper(4), ZeroSignal(1e-3, 2))),
        )
        tuner.fit()
    texts = hook.texts
    assert len(texts) == 5, texts
    assert texts[0].startswith("sweep notify started: 3 trials of up to 4 steps") and results in texts[0]
    assert "finished (reward/avg_pass_at_1=0.4; kind=good)" in texts[1]
    assert "stopped at step 2: zero signal (reward/avg_pass_at_1=0.2; kind=flat)" in texts[2]
    assert "failed (reward/avg_pass_at_1=0.1; kind=crash)" in texts[3] and "CUDA out of memory (simulated)" in texts[3]
    assert texts[4].startswith("sweep notify ended: 3 trials, 1 failed; best ") and "reward/avg_pass_at_1=0.4" in texts[4]
    assert texts[4].endswith(f"results: {results}")
    assert set(hook.paths) == {"/services/T000/B000/s3cr3t-webhook-token"}


def test_a_trial_without_a_trained_eval_has_no_score_in_a_message():
    from ray.tune.experiment import Trial

    notifier = SweepNotifier("s", "/r", "eval/score", "max", total_steps=8)
    early, late, bare = (Trial("run_trial", config=c, trial_id=i, stub=True) for i, c in
                         (("early", {"optim.lr": 1e-3}), ("late", {"optim.lr": 3e-4}), ("bare", {})))
    early.update_last_result({"eval/score": 0.0, "eval/global_step": 0.0, "training_iteration": 2})  # only the base's eval
    late.update_last_result({"eval/score": -0.05, "eval/global_step": 4.0, "training_iteration": 5})
    bare.update_last_result({"training_iteration": 1})
    assert notifier.summary(early) == " (optim.lr=1.00e-03)"
    assert notifier.summary(late) == " (eval/score=-0.05; optim.lr=3.00e-04)"
    assert notifier.summary(bare) == ""
    assert notifier.best([early, late, bare]) is late  # a placeholder 0 does not beat a real -0.05


def test_a_failing_webhook_is_a_warning_without_the_url(caplog):
    caplog.set_level(logging.WARNING, logger="sweep.watch.notify")
    with Webhook(status=500) as hook:
        assert post(hook.url, "hello", timeout_s=5) is False
    assert hook.texts == ["hello"]
    with Webhook(delay_s=1.0) as slow:
        started = time.perf_counter()
        assert post(slow.url, "slow", timeout_s=0.2) is False
        assert time.perf_counter() - started < 1.0
    refused = "http://127.0.0.1:9/services/s3cr3t-webhook-token"  # discard port: nothing listens
    assert post(refused, "nobody", timeout_s=1) is False
    assert post("hooks.slack.com/services/T0/B0/s3cr3t-webhook-token", "no scheme", timeout_s=1) is False  # not even a request
    assert post("https://hooks.slack.com/services/T0/B0/s3cr3t webhook", "a blank", timeout_s=1) is False
    assert len(caplog.records) == 5
    assert all("s3cr3t" not in r.getMessage() and "127.0.0.1" not in r.getMessage() for r in caplog.records)
    assert "HTTP 500" in caplog.records[0].getMessage() and "ConnectionRefusedError" in caplog.records[2].getMessage()


def test_notifier_goes_quiet_after_repeated_failures(caplog, monkeypatch):
    caplog.set_level(logging.WARNING, logger="sweep.watch.notify")
    monkeypatch.setenv(WEBHOOK_ENV, "http://127.0.0.1:9/hook")
    notifier = SweepNotifier("s", "/r", "m", "max", total_steps=3)
    started = time.perf_counter()
    for _ in range(10):
        notifier.sweep_failed(RuntimeError("driver died"))  # never raises
    assert time.perf_counter() - started < 5
    assert len(caplog.records) == 3 + 1  # three failures, then one "notifications off"


def test_an_interrupted_sweep_says_so_and_how_to_continue_it(monkeypatch):
    with Webhook() as hook:
        monkeypatch.setenv(WEBHOOK_ENV, hook.url)
        notifier = SweepNotifier("s", "s3://bucket/sweeps/s", "m", "max", total_steps=3)
        notifier.sweep_interrupted("SIGTERM")
        notifier.sweep_interrupted(None)  # its beat found another driver's claim: that one goes on
    assert hook.texts == ["sweep s interrupted (SIGTERM) before it ended; its trials stopped where their checkpoints left them: "
                          "continue it with `python -m sweep resume s3://bucket/sweeps/s`",
                          "sweep s: another driver took it over; this driver stopped its trials and leaves the sweep to it; "
                          "results: s3://bucket/sweeps/s"]


def test_notifiers_only_with_the_env_var(monkeypatch, tmp_path):
    from sweep.spec.config import SweepConfig

    cfg = SweepConfig.model_validate({"name": "n", "storage": str(tmp_path), "space": {"optim.lr": {"type": "loguniform", "low": 1e-4, "high": 1e-2}}})
    monkeypatch.delenv(WEBHOOK_ENV, raising=False)
    assert notifiers(cfg) == []
    monkeypatch.setenv(WEBHOOK_ENV, "http://127.0.0.1:9/hook")
    (notifier,) = notifiers(cfg)
    assert "127.0.0.1:9" not in repr(vars(notifier))  # Tune pickles callbacks into the experiment's state
    assert notifier.results == str(tmp_path / "n") and notifier.total_steps == cfg.trainer.total_steps
    assert results_location("s3://bucket/prefix/", "n") == "s3://bucket/prefix/n"
    assert results_location("s3://bucket/prefix?endpoint_override=127.0.0.1:9000&scheme=http", "n") == "s3://bucket/prefix/n"
