"""Every environment variable grpo-sweep sets or reads, each with why; code elsewhere asks this module.

Process-wide switches are easy to lose track of: a variable set in the driver reaches every Ray worker and
child process. Each one is named here once, as a ``Variable``; ``os.environ`` is touched nowhere else in
``configkit``, ``toolenvs``, ``grpo`` or ``sweep`` (a test checks). Secrets (``WANDB_API_KEY``,
``FLEET_API_KEY``, ``GRPO_SWEEP_SLACK_WEBHOOK``, AWS credentials) are only ever read from the environment
and never written to a config, a log or a result.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Variable:
    name: str
    why: str
    secret: bool = False

    def get(self, default: str | None = None) -> str | None:
        return os.environ.get(self.name, default)

    def is_set(self) -> bool:
        """Set to something other than blanks."""
        return bool(os.environ.get(self.name, "").strip())

    def set(self, value: str) -> None:
        os.environ[self.name] = value

    def set_default(self, value: str) -> str:
        """Set unless the user already did; returns the value in force."""
        return os.environ.setdefault(self.name, value)

    def pop(self) -> str | None:
        return os.environ.pop(self.name, None)

    @contextlib.contextmanager
    def temporarily(self, value: str | None) -> Iterator[None]:
        """Set (None: unset) for the block, then restore what was there."""
        old = os.environ.get(self.name)
        if value is None:
            os.environ.pop(self.name, None)
        else:
            os.environ[self.name] = value
        try:
            yield
        finally:
            if old is None:
                os.environ.pop(self.name, None)
            else:
                os.environ[self.name] = old


# --- ours
GRPO_SWEEP_CACHE = Variable("GRPO_SWEEP_CACHE", "where built base policies are kept (default ~/.cache/grpo-sweep); made absolute "
                            "by sweep run, since trials run in their own directories and inherit it")
GRPO_ENV_TRACING = Variable("GRPO_ENV_TRACING", "1 keeps the MCP SDK's OpenTelemetry span per tool call in local env servers (off: it costs CPU and nothing exports it)")
GRPO_SWEEP_SLACK_WEBHOOK = Variable("GRPO_SWEEP_SLACK_WEBHOOK", "the sweep notifier's webhook URL: a secret, so never in a space file", secret=True)
GRPO_SWEEP_DASHBOARD = Variable("GRPO_SWEEP_DASHBOARD", "0 keeps Ray's dashboard off in sweep run/resume/confirm, as --no-dashboard "
                                "does: the tests set it (each dashboard costs seconds to start, and its agents can outlive a killed driver)")
GRPO_SWEEP_DRIVER_BEAT_S = Variable("GRPO_SWEEP_DRIVER_BEAT_S", "seconds between a sweep driver's heartbeats in its driver.lock (default 15): "
                                    "another host's marker unchanged for 4 of its beats counts as its driver gone (sweep.store.driver)")
GRPO_SWEEP_LIVE_TOKEN = Variable("GRPO_SWEEP_LIVE_TOKEN", "the live sweep page's access token, needed to bind it to an address other "
                                 "than loopback; clients from elsewhere must present it (a secret: never in a space file)", secret=True)
FLEET_API_KEY = Variable("FLEET_API_KEY", "hosted Fleet environments; passed to OpenEnv's FleetTaskEnv and nowhere else", secret=True)
FLEET_BASE_URL = Variable("FLEET_BASE_URL", "Fleet's API address, read by the fleet-python SDK (default Fleet's own; the tests' fake service on 127.0.0.1)")
OPENENV_PATH = Variable("OPENENV_PATH", "OpenEnv's src folder (holding envs/fleet_env) for the fleet backend, when OpenEnv is not installed")

# --- set for the libraries we drive
TOKENIZERS_PARALLELISM = Variable("TOKENIZERS_PARALLELISM", "false in trials: HF tokenizers' threads beside forked Ray workers warn and can deadlock")
HF_HUB_OFFLINE = Variable("HF_HUB_OFFLINE", "1 in trials unless the user set it: a tiny local model must not wait on the hub")
TUNE_GLOBAL_CHECKPOINT_S = Variable("TUNE_GLOBAL_CHECKPOINT_S", "Tune's experiment snapshot period; 1 s, so a resumed sweep restarts "
                                    "each trial from the checkpoint its last step saved (Tune's default is at least 10 s)")
TUNE_DISABLE_SIGINT_HANDLER = Variable("TUNE_DISABLE_SIGINT_HANDLER", "1: Ctrl-C stops a sweep's driver as a crash does (resume "
                                       "continues it); Tune's own handler ends the run as if it had finished, and its leaderboard and confirm stage followed")
TUNE_FUNCTION_THREAD_TIMEOUT_S = Variable("TUNE_FUNCTION_THREAD_TIMEOUT_S", "how long a reused trial process waits for a stopped "
                                          "trial's step to end; 120 s, where Tune's 2 s would fail the next trial")
RAY_API_SERVER_ADDRESS = Variable("RAY_API_SERVER_ADDRESS", "Ray's state API (its dashboard's URL) while a Ray started here runs "
                                  "multi-worker trials that can be stopped early, set before it starts so every worker has it: Ray Train's "
                                  "placement-group cleaner asks there, where it would guess among the Rays on this machine and fail with two")
WANDB_MODE = Variable("WANDB_MODE", "offline/disabled before ray.init, or Ray asks the driver for an API key")
WANDB_API_KEY = Variable("WANDB_API_KEY", "W&B online mode; kept out of offline runs' processes (popped while they start)", secret=True)
VLLM_ALLOW_INSECURE_SERIALIZATION = Variable("VLLM_ALLOW_INSECURE_SERIALIZATION", "1: vLLM's collective_rpc may carry our weight-load function")
CUDA_VISIBLE_DEVICES = Variable("CUDA_VISIBLE_DEVICES", "the one GPU a rank's vLLM engine process may see, set while it starts")
PYTHONPATH = Variable("PYTHONPATH", "env server processes find this checkout's packages first")

# --- read from launchers and the user's shell
WORLD_SIZE = Variable("WORLD_SIZE", "torchrun's (and Ray Train's) number of ranks")
LOCAL_RANK = Variable("LOCAL_RANK", "this rank's GPU on its node (torchrun, Ray Train)")
RANK = Variable("RANK", "this process's rank among all of a run's (torchrun)")
RAY_ADDRESS = Variable("RAY_ADDRESS", "sweep validate checks resources against the running Ray cluster there")
RAY_OVERRIDE_RESOURCES = Variable("RAY_OVERRIDE_RESOURCES", "Ray's own override of a node's resources: sweep run then leaves its early resource check to the Ray it starts")
NETRC = Variable("NETRC", "where `wandb login` keeps its key (default ~/.netrc): online W&B without WANDB_API_KEY")
AWS_ENDPOINT_URL = Variable("AWS_ENDPOINT_URL", "an S3-compatible endpoint for s3:// storage without endpoint_override in the URI")
AWS_REGION = Variable("AWS_REGION", "the S3 region for s3:// storage")
AWS_DEFAULT_REGION = Variable("AWS_DEFAULT_REGION", "the S3 region when AWS_REGION is unset")

ALL = tuple(value for value in globals().values() if isinstance(value, Variable))


def child_environment(**extra: str) -> dict[str, str]:
    """This process's environment with ``extra`` on top: what a child process we start gets."""
    return {**os.environ, **extra}
