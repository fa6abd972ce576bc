"""The SkyPilot task file and the GitHub workflow that launches it, each loaded by the tool that runs it:
SkyPilot's own parser (task schema, ``--env``/``--secret`` overrides, its CLI's argument parsing of the
workflow's exact command) and a YAML parse of the workflow whose every input must reach that command.

SkyPilot pins click < 8.2 and uvicorn < 0.36, below this project's, so it lives in its own venv
(``bash sky/install.sh`` makes ``/tmp/sky-venv``; ``GRPO_SKY_PYTHON`` names another); without it the
SkyPilot tests skip and say so.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SKY_TASK = ROOT / "sky" / "sweep.yaml"
WORKFLOW = ROOT / ".github" / "workflows" / "sweep.yml"
SKY_PYTHON = Path(os.environ.get("GRPO_SKY_PYTHON", "/tmp/sky-venv/bin/python"))
INPUTS = {"space": "SPACE", "env_key": "ENV_KEYS", "max_tasks": "MAX_TASKS", "cloud": "CLOUD"}
SECRETS = ("FLEET_API_KEY", "WANDB_API_KEY", "GRPO_SWEEP_SLACK_WEBHOOK")

needs_sky = pytest.mark.skipif(not SKY_PYTHON.is_file(), reason=f"SkyPilot's venv not found at {SKY_PYTHON}: run `bash sky/install.sh`")

# Runs in SkyPilot's venv: parse the launch command with sky's own CLI, then load the task as `sky launch` does.
SKY_LOAD = """
import json, sys
import sky.client.cli.command as cli
from sky import Task
from sky.utils import yaml_utils
ctx = cli.launch.make_context("launch", json.loads(sys.argv[1]))
config = yaml_utils.read_yaml(ctx.params["entrypoint"][0])
task = Task.from_yaml_config(config, env_overrides=list(ctx.params["env"]), secrets_overrides=list(ctx.params["secret"]))
(resources,) = task.resources
print(json.dumps({
    "name": task.name, "num_nodes": task.num_nodes, "accelerators": resources.accelerators, "cloud": str(resources.cloud),
    "envs": task.envs, "secrets": sorted(task.secrets), "run": task.run, "setup": task.setup, "workdir": task.workdir,
    "infra": ctx.params["infra"], "down": ctx.params["down"], "cluster": ctx.params["cluster"],
}))
"""


def workflow() -> dict:
    data = yaml.safe_load(WORKFLOW.read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as true
    return data


def launch_step() -> dict:
    (step,) = [s for s in workflow()["jobs"]["launch"]["steps"] if "sky launch" in s.get("run", "")]
    return step


def launch_argv(env: dict[str, str]) -> list[str]:
    """The workflow's `sky launch` arguments as bash would expand them with this step environment."""
    command = launch_step()["run"].split("sky launch", 1)[1].split("\n  echo")[0].split("\necho")[0]
    command = command.replace("\\\n", " ").replace("${{ github.run_id }}", "12345")
    return [re.sub(r"\$(\w+)", lambda m: env.get(m.group(1), ""), arg) for arg in shlex.split(command)]


def test_workflow_is_a_manual_dispatch_with_the_four_inputs():
    data = workflow()
    inputs = data["on"]["workflow_dispatch"]["inputs"]
    assert set(inputs) == set(INPUTS)
    assert inputs["space"]["default"] == "sweep/search_spaces/qwen3_8b_h100.yaml"
    assert (ROOT / inputs["space"]["default"]).is_file()
    assert inputs["cloud"]["type"] == "choice" and "aws" in inputs["cloud"]["options"]
    assert data["permissions"] == {"contents": "read"}


def test_every_input_reaches_the_launch_command():
    step = launch_step()
    for name, var in INPUTS.items():
        assert step["env"][var] == f"${{{{ inputs.{name} }}}}"  # through the environment, never pasted into the script
        assert f"${{{{ inputs.{name} }}}}" not in step["run"]
    argv = launch_argv({"SPACE": "s.yaml", "ENV_KEYS": "hotel,github", "MAX_TASKS": "12", "CLOUD": "gcp", "RESULTS": "s3://b/p"})
    assert argv[0] == "sky/sweep.yaml"
    pairs = list(zip(argv, argv[1:]))
    for pair in [("--env", "SPACE=s.yaml"), ("--env", "ENV_KEYS=hotel,github"), ("--env", "MAX_TASKS=12"), ("--infra", "gcp"), ("--env", "RESULTS=s3://b/p")]:
        assert pair in pairs, pair
    for secret in SECRETS:
        assert ("--secret", secret) in pairs and step["env"][secret] == f"${{{{ secrets.{secret} }}}}"
    # the space is checked (with the same filters) before any GPU is paid for
    (check,) = [s for s in workflow()["jobs"]["launch"]["steps"] if "space_overrides.py" in s.get("run", "")]
    assert {check["env"][v] for v in ("SPACE", "ENV_KEYS", "MAX_TASKS")} == {f"${{{{ inputs.{n} }}}}" for n in ("space", "env_key", "max_tasks")}


@pytest.mark.slow
@needs_sky
def test_skypilot_loads_the_task_with_the_workflows_command():
    env = {"SPACE": "sweep/search_spaces/qwen3_8b_h100.yaml", "ENV_KEYS": "hotel", "MAX_TASKS": "16", "CLOUD": "aws", "RESULTS": "s3://bucket/sweeps"}
    fake = {name: f"fake-{name.lower()}" for name in SECRETS}
    argv = launch_argv(env)
    run = subprocess.run([str(SKY_PYTHON), "-c", SKY_LOAD, json.dumps(argv)], cwd=ROOT, env={**os.environ, **fake},
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    task = json.loads(run.stdout.strip().splitlines()[-1])
    assert task["name"] == "grpo-sweep" and task["num_nodes"] >= 1 and task["accelerators"] == {"H100": 8}
    assert task["infra"] == "aws" and task["down"] and task["cluster"] == "grpo-sweep-12345"
    assert {k: task["envs"][k] for k in ("SPACE", "ENV_KEYS", "MAX_TASKS", "RESULTS")} == {k: env[k] for k in ("SPACE", "ENV_KEYS", "MAX_TASKS", "RESULTS")}
    assert task["secrets"] == sorted(SECRETS)
    assert not any(value in json.dumps(task) for value in fake.values())  # secrets stay out of what sky shows
    assert 'python3 sky/space_overrides.py "$SPACE" --env-keys "$ENV_KEYS" --max-tasks "$MAX_TASKS"' in task["run"]
    assert 'python3 -m sweep run "$LAUNCH_SPACE" --storage "$RESULTS"' in task["run"]
    assert '-e ".[gpu]"' in task["setup"] and task["workdir"] == "."


@pytest.mark.slow
@needs_sky
def test_skypilot_refuses_a_broken_task(tmp_path):
    broken = yaml.safe_load(SKY_TASK.read_text())
    broken["resources"]["acelerators"] = broken["resources"].pop("accelerators")
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(broken))
    run = subprocess.run([str(SKY_PYTHON), "-c", SKY_LOAD, json.dumps([str(path)])], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "acelerators" in run.stderr


def test_space_overrides_apply_the_filters_and_validate(tmp_path):
    import shutil

    space = tmp_path / "space.yaml"
    shutil.copy(ROOT / "sweep" / "search_spaces" / "demo_cpu.yaml", space)
    script = ROOT / "sky" / "space_overrides.py"
    same = subprocess.run([sys.executable, str(script), str(space), "--env-keys", "", "--max-tasks", ""], cwd=ROOT, capture_output=True, text=True)
    assert same.returncode == 0 and same.stdout.strip() == str(space)
    run = subprocess.run([sys.executable, str(script), str(space), "--env-keys", "hotel", "--max-tasks", "20"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    written = Path(run.stdout.strip())
    assert written == tmp_path / "space.launch.yaml"
    env = yaml.safe_load(written.read_text())["trainer"]["env"]
    assert env == {"env_keys": ["hotel"], "max_tasks": 20}
    bad = subprocess.run([sys.executable, str(script), str(space), "--env-keys", "no_such_env"], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and "no tasks" in bad.stderr.lower()
