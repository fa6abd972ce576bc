"""cluster.yaml passes Ray's own cluster-config checks (defaults filled in and the schema validated, as
``ray up`` does before it touches AWS), and says what the design asks of it."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

CLUSTER = Path(__file__).resolve().parents[2] / "cluster.yaml"


@pytest.fixture(scope="module")
def raw() -> dict:
    return yaml.safe_load(CLUSTER.read_text())


def prepared(config: dict) -> dict:
    """What ``ray up`` does offline (``_bootstrap_config``): merge the AWS defaults, then Ray's validator."""
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = prepare_config(copy.deepcopy(config))
    validate_config(config)
    return config


def test_ray_accepts_the_cluster_config(raw):
    config = prepared(raw)
    assert config["provider"]["type"] == "aws" and config["head_node_type"] == "head"


def test_ray_schema_catches_a_typo(raw):
    import jsonschema

    broken = {**raw, "idle_timeout_minute": 5}
    with pytest.raises(jsonschema.ValidationError):
        prepared(broken)


def test_head_is_on_demand_and_hosts_no_trials(raw):
    head = raw["available_node_types"]["head"]
    assert head["resources"] == {"CPU": 0, "GPU": 0}
    assert "InstanceMarketOptions" not in head["node_config"]
    assert not head["node_config"]["InstanceType"].startswith(("p", "g"))


def test_h100_workers_on_demand_and_optional_spot(raw):
    nodes = raw["available_node_types"]
    for name in ("h100", "h100_spot"):
        assert nodes[name]["node_config"]["InstanceType"] == "p5.48xlarge"
        assert nodes[name]["resources"] == {"CPU": 192, "GPU": 8}
    assert "InstanceMarketOptions" not in nodes["h100"]["node_config"]
    assert nodes["h100_spot"]["node_config"]["InstanceMarketOptions"]["MarketType"] == "spot"
    assert nodes["h100"]["min_workers"] >= 1  # `sweep run` checks the cluster has the GPUs a trial asks for
    assert sum(n.get("max_workers", 0) for n in nodes.values()) <= raw["max_workers"]
    assert raw["idle_timeout_minutes"] > 0


def test_project_is_mounted_and_installed_with_its_gpu_extra(raw):
    assert raw["file_mounts"]["~/grpo-sweep"] == "."
    assert any('".[gpu]"' in c for c in raw["worker_setup_commands"])
    assert not any("[gpu]" in c for c in raw["head_setup_commands"])
    assert any("snapshot_download('Qwen/Qwen3-8B')" in c for c in raw["worker_setup_commands"])  # trials run with the hub offline
    assert {".venv", ".git"} <= set(raw["rsync_exclude"])
    for commands in (raw["head_start_ray_commands"], raw["worker_start_ray_commands"]):
        assert any(". ~/.grpo-sweep.env" in c for c in commands)  # secrets reach Ray through the node environment
    assert any("--dashboard-host=127.0.0.1" in c for c in raw["head_start_ray_commands"])


def test_ray_version_on_the_cluster_matches_the_client(raw):
    import ray

    assert any(f"ray[default,tune]=={ray.__version__}" in c for c in raw["setup_commands"])
