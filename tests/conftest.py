"""Shared fixtures: Ray's dashboard off in every sweep a test runs (but the one that checks it), a private cache for built base policies, a live hotel MCP server, the task set."""

from __future__ import annotations

import os

import pytest

from configkit import environ
from grpo.config import DEFAULT_TASKS
from toolenvs.local.launch import LocalEnvServer
from toolenvs.task import load_tasks

# Small enough to build in seconds; the tests check mechanics, not how well the policy does.
TEST_MODEL = {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "intermediate_size": 64, "warmstart_steps": 20, "warmstart_batch_size": 8}


def pytest_collection_modifyitems(config, items):
    """``gpu`` tests skip, with the reason, where there is no CUDA device (CI, laptops)."""
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU: run on the GPU machine (README, 'What is verified where')")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI (``CI=true``) a skip is a failure unless it is a GPU test's (by its marker): a test that cannot run
    there is a gap to close, not a pass. A Fleet contract test that finds no OpenEnv (``tests/support/fleet_stack``)
    skips where a user runs it and fails in CI."""
    outcome = yield
    report = outcome.get_result()
    allowed = item.get_closest_marker("gpu") is not None  # the marker, not a folder named gpu
    if os.environ.get("CI") == "true" and report.skipped and not hasattr(report, "wasxfail") and not allowed:
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, where only GPU tests may skip: {report.longrepr}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """The same for a test module that skips as a whole."""
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") == "true" and report.skipped:
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, where only GPU tests may skip: {report.longrepr}"


@pytest.fixture(scope="session", autouse=True)
def no_dashboard():
    """Sweeps the tests run (in process or as ``python -m sweep``, which inherits this) start no Ray dashboard:
    each costs seconds to start, and its agents can outlive a killed driver (FIELD_NOTES)."""
    with environ.GRPO_SWEEP_DASHBOARD.temporarily("0"):
        yield


@pytest.fixture(scope="session", autouse=True)
def quick_driver_beat():
    """Sweep drivers the tests start beat every second (default 15 s): a start's settling wait after its claim is a
    quarter beat, seconds a sweep otherwise; tests that watch a beat set their own."""
    with environ.GRPO_SWEEP_DRIVER_BEAT_S.temporarily("1"):
        yield


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory):
    """Base policies built by tests go to a temporary directory (Ray workers inherit the variable)."""
    path = tmp_path_factory.mktemp("grpo-cache")
    old = os.environ.get("GRPO_SWEEP_CACHE")
    os.environ["GRPO_SWEEP_CACHE"] = str(path)
    yield path
    if old is None:
        os.environ.pop("GRPO_SWEEP_CACHE", None)
    else:
        os.environ["GRPO_SWEEP_CACHE"] = old


@pytest.fixture(scope="session")
def tasks():
    return load_tasks(DEFAULT_TASKS)


@pytest.fixture(scope="session")
def hotel_server():
    with LocalEnvServer("hotel") as server:
        yield server


@pytest.fixture(scope="session")
def tiny_base(tasks, private_cache):
    """A small warm-started base policy directory (model + tokenizer), built once per session."""
    from grpo.config import ModelConfig
    from grpo.warmstart import base_policy_path

    return str(base_policy_path(ModelConfig(**TEST_MODEL), tasks))


@pytest.fixture(scope="session")
def chat(tiny_base):
    from grpo.chat import ChatFormat
    from grpo.tiny import load_tiny_tokenizer

    return ChatFormat(load_tiny_tokenizer(tiny_base))
