"""What a trial asks of the machines: the cluster's resources, where its workers and engines go, packs.

The combination rules themselves (workers with CPU offload, LoRA or DAPO's sum-norm; tasks and mini-batches per
worker; what a pack can hold) are ``grpo.combinations``'; they run here on the base trainer and on every swept
extreme, as the trainer runs them again when a trial starts. Problems are lines, as in ``sweep.spec.checks``.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

from pydantic import ValidationError

from configkit import environ
from configkit.base import ConfigError, apply_overrides
from configkit.redact import redact_uri
from grpo.combinations import Clash, pack_clashes, worker_clashes
from grpo.config import TrainerConfig, pack_wide
from sweep.spec.config import PbtConfig, SweepConfig


def cluster_resources() -> tuple[dict[str, float] | None, str]:
    """What trials could get and where that was read: the running Ray cluster at ``RAY_ADDRESS``, else nothing.

    Without a cluster there is nothing to check against: a space written for a GPU cluster must validate on
    a laptop, and ``sweep run`` checks the Ray it starts anyway.
    """
    address = environ.RAY_ADDRESS.get()
    if not address:
        return None, "nothing (set RAY_ADDRESS to check against a running Ray cluster)"
    problem = ray_address_problem(address)
    if problem:
        raise ConfigError(problem)
    import ray

    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    except Exception as exc:  # noqa: BLE001 - Ray's reasons vary by version; the address and the fix are what matter
        raise ConfigError(f"{_shown_address(address)}: Ray could not join a cluster there ({type(exc).__name__}); {RAY_ADDRESS_FIX}") from None
    try:
        return dict(ray.cluster_resources()), f"the Ray cluster at {redact_uri(address)}"
    finally:
        ray.shutdown()


RAY_ADDRESS_FIX = ("give host:port of a running cluster's head (ray://host:10001 for Ray Client), auto to join one started on "
                   "this machine, or unset RAY_ADDRESS to run on a Ray started here")


def _shown_address(address: str) -> str:
    return f"{environ.RAY_ADDRESS.name} = {redact_uri(address)!r}"


def ray_address_problem(address: str, timeout_s: float = 5.0) -> str | None:
    """Why nothing can be joined at ``RAY_ADDRESS``: not host:port (ray:// before it allowed; http:// is a dashboard's), or nothing
    answering there within ``timeout_s`` (Ray itself waits minutes on an address no one answers at); None for
    ``auto``/``local`` (Ray finds or starts its own) and for an address that answers."""
    if address in ("auto", "local"):
        return None
    rest = address.split("://", 1)[1] if "://" in address else address
    try:
        parts = urlsplit(f"//{rest}")
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    scheme = address.split("://", 1)[0] if "://" in address else None
    if scheme in ("http", "https"):
        return (f"{_shown_address(address)}: an http address is the dashboard's (Ray Jobs'), not a cluster to join; "
                f"{RAY_ADDRESS_FIX}")
    if not host or port is None or scheme not in (None, "ray"):
        return f"{_shown_address(address)}: not host:port; {RAY_ADDRESS_FIX}"
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except OSError as exc:
        return f"{_shown_address(address)}: nothing answers there ({exc.strerror or type(exc).__name__}); {RAY_ADDRESS_FIX}"


def local_resources() -> dict[str, float] | None:
    """What the Ray that ``sweep run`` starts on this machine will have, read by Ray's own detection (its CPU count,
    cgroup limits included, and its visible GPUs) before Ray starts, so a trial this machine cannot hold is refused
    before the base evals' minutes; None where it cannot be read here (a cluster at ``RAY_ADDRESS``, resources
    overridden for Ray, a cluster ``ray start`` began here, which ``ray.init()`` joins, or a Ray whose detection moved):
    the check then runs once Ray has started, as before."""
    if joins_a_cluster() or environ.RAY_OVERRIDE_RESOURCES.get():
        return None
    try:  # Ray's private detection, pinned with Ray (2.60); its absence only delays the check
        from ray._private import accelerators, utils

        gpus = accelerators.get_accelerator_manager_for_resource("GPU")
        count = gpus.get_current_node_num_accelerators()
        visible = gpus.get_current_process_visible_accelerator_ids()
        return {"CPU": float(utils.get_num_cpus()), "GPU": float(count if visible is None else min(count, len(visible)))}
    except Exception:  # noqa: BLE001
        return None


def resource_problems(cfg: SweepConfig, available: dict[str, float], source: str = "resources", holder: str = "the Ray cluster has") -> list[str]:
    """A trial that asks for more than the cluster has would wait forever: say so instead."""
    workers = cfg.resources.workers_per_trial
    wanted = {"CPU": cfg.resources.cpus_per_trial, "GPU": cfg.resources.gpus_per_trial}
    driver = {"CPU": 0.01 if workers > 1 else 0.0, "GPU": 0.0}  # a multi-worker trial's own process (sweep.tuner)
    per = f" per worker x {workers} workers (resources.workers_per_trial), plus 0.01 CPU for the trial" if workers > 1 else ""
    return [
        f"{source}: key 'resources.{kind.lower()}s_per_trial' = {amount:g}: each trial asks for {amount * workers + driver[kind]:g} {kind}{per}, "
        f"{holder} {available.get(kind, 0.0):g}; lower it"
        for kind, amount in wanted.items()
        if amount * workers + driver[kind] > available.get(kind, 0.0)
    ]


def placement_problems(cfg: SweepConfig, base: TrainerConfig, source: str) -> list[str]:
    """Where a trial's parts go: each worker (FSDP2 rank) trains on one GPU and, with vLLM, runs its
    engine there too; a trial that asks for GPUs it cannot use, or vLLM without a GPU, is refused."""
    r = cfg.resources
    problems = []
    if r.gpus_per_trial > 1:
        problems.append(
            f"{source}: key 'resources.gpus_per_trial' = {r.gpus_per_trial:g}: a worker trains on one GPU, so the rest would sit idle; "
            f"for {r.gpus_per_trial:g} GPUs per trial set workers_per_trial: {r.gpus_per_trial:g} and gpus_per_trial: 1 "
            "(one FSDP2 rank, and one vLLM engine, per GPU)"
        )
    if r.workers_per_trial > 1 and 0 < r.gpus_per_trial < 1:
        problems.append(
            f"{source}: key 'resources.gpus_per_trial' = {r.gpus_per_trial:g} with workers_per_trial = {r.workers_per_trial}: Ray may put two "
            "workers of a trial on one GPU, which NCCL refuses; give each worker a whole GPU (gpus_per_trial: 1)"
        )
    problems += clash_problems(cfg, lambda trainer: worker_clashes(trainer, r.workers_per_trial), source)
    swept = cfg.space.get("rollout.backend")
    vllm = base.rollout.backend == "vllm" or (swept is not None and swept.contains("vllm"))
    if vllm and r.gpus_per_trial <= 0:
        problems.append(
            f"{source}: key 'trainer.rollout.backend' = 'vllm' needs a GPU for each worker's engine, but resources.gpus_per_trial is 0; "
            "set it to 1 (or use rollout.backend: hf on CPUs)"
        )
    elif vllm and r.gpus_per_trial < 1 and base.rollout.vllm.gpu_memory_utilization >= r.gpus_per_trial:
        problems.append(
            f"{source}: key 'trainer.rollout.vllm.gpu_memory_utilization' = {base.rollout.vllm.gpu_memory_utilization:g} is not below "
            f"resources.gpus_per_trial = {r.gpus_per_trial:g}: trials sharing a GPU would together ask for more than it has; lower it"
        )
    return problems


def trainer_variants(cfg: SweepConfig) -> Iterator[tuple[TrainerConfig, str]]:
    """The base trainer, and the base with each extreme of each swept key that the trainer accepts (each with
    the words naming it): what the combination rules (``grpo.combinations``) are checked on."""
    yield cfg.trainer, ""
    for key, dist in cfg.space.items():
        for value in dist.extremes():
            try:
                yield TrainerConfig.model_validate(apply_overrides(cfg.trainer.model_dump(), {key: value})), f" (where space.{key} = {value!r})"
            except ValidationError:  # named by the space's own check
                continue


def clash_problems(cfg: SweepConfig, clashes: Callable[[TrainerConfig], list[Clash]], source: str) -> list[str]:
    """Each clash a rule finds in the base or a swept extreme, once per key (the base's first)."""
    found: dict[str, str] = {}
    for trainer, where in trainer_variants(cfg):
        for clash in clashes(trainer):
            found.setdefault(clash.key, f"{source}: key '{clash.key}' {clash.text}{where}")
    return list(found.values())


def packing_problems(cfg: SweepConfig, base: TrainerConfig, source: str) -> list[str]:
    """``resources.trials_per_worker`` > 1 packs LoRA trials on one frozen base in one process (``grpo.pack``): only
    keys a trial owns may vary inside a pack; what makes the base, or needs a worker of its own, is refused by name."""
    r, k = cfg.resources, f"{source}: key 'resources.trials_per_worker' = {cfg.resources.trials_per_worker}"
    problems = clash_problems(cfg, lambda trainer: pack_clashes(trainer, r.workers_per_trial, r.gpus_per_trial > 0), source)
    if isinstance(cfg.scheduler, PbtConfig):
        problems.append(f"{k} with scheduler.type 'pbt': PBT's exploit restarts trials from each other's checkpoints, unverified in a pack; "
                        "use asha, median or fifo, or trials_per_worker: 1")
    mutated = cfg.scheduler.mutations if isinstance(cfg.scheduler, PbtConfig) else {}
    for where, keys in (("space", cfg.space), ("scheduler.mutations", mutated)):
        for key in keys:
            if pack_wide(key):
                problems.append(f"{source}: key '{where}.{key}' changes the base the packed trials share (resources.trials_per_worker = "
                                f"{r.trials_per_worker}); sweep it with trials_per_worker: 1, or fix it under trainer")
    return problems


def early_stoppers(cfg: SweepConfig) -> list[str]:
    """What can end a trial before its last step, as the keys that turn it on: the scheduler unless FIFO (ASHA and the
    median rule stop trials, PBT pauses them), the zero-signal stopper when enabled."""
    stoppers = [f"scheduler.type = {cfg.scheduler.type!r}"] if cfg.scheduler.type != "fifo" else []
    return stoppers + (["stopping.zero_signal.enabled = true"] if cfg.stopping.zero_signal.enabled else [])


def state_api_need(cfg: SweepConfig) -> str | None:
    """Why this sweep needs Ray's state API, or None. Tune ends a multi-worker trial it stops early under Ray Train;
    that trial's workers' placement group is then removed only by Ray Train's cleaner, which reads the state API (the
    dashboard serves it). Without it the group stays reserved and the next trial waits for its workers for good
    (measured: two 2-worker trials stopped at step 1 of 3 on 2 CPUs, the second never started; with the dashboard
    both ended in 32 s). A trial that runs to its last step returns and Ray Train removes the group itself."""
    workers, stoppers = cfg.resources.workers_per_trial, early_stoppers(cfg)
    if workers == 1 or not stoppers:
        return None
    return (f"key 'resources.workers_per_trial' = {workers} with {' and '.join(stoppers)}: a multi-worker trial stopped before its "
            "last step leaves its workers' placement group reserved unless Ray Train's cleaner can read Ray's state API, "
            "which Ray's dashboard serves; without it the next trial waits for its workers for good")


STATE_API_FIX = "or set workers_per_trial: 1, or scheduler.type: fifo with stopping.zero_signal.enabled: false"


def joins_a_cluster() -> bool:
    """Does ``ray.init()`` here join a running cluster (``RAY_ADDRESS`` other than ``local``, or one ``ray start`` began on this
    machine) rather than start a Ray of its own?"""
    address = environ.RAY_ADDRESS.get()
    if address:
        return address != "local"
    try:  # Ray's private lookup of the cluster `ray start` left here, pinned with Ray (2.60)
        from ray._private import services

        return services.find_bootstrap_address(None) is not None
    except Exception:  # noqa: BLE001
        return False


def state_api_problem() -> str | None:
    """Why Ray's state API does not answer for the Ray this process belongs to, or None. It must name this process's node:
    the API is found through ``RAY_API_SERVER_ADDRESS``, ``RAY_ADDRESS`` or a Ray found on this machine, any of which can
    be another cluster's."""
    import ray
    from ray.util.state import list_nodes

    mine = ray.get_runtime_context().get_node_id()
    try:
        found = list_nodes(filters=[("node_id", "=", mine)], timeout=10, raise_on_missing_output=False)
    except Exception as exc:  # noqa: BLE001 - Ray's state client raises its own kinds (ServerUnavailable, ConnectionError...)
        said = " ".join(str(exc).split())
        return f"Ray's state API does not answer ({type(exc).__name__}: {said[:200]}{'...' if len(said) > 200 else ''})"
    return None if found else "Ray's state API found from here answers for another Ray cluster"


def state_api_problem_on_head(timeout_s: float = 120.0) -> str | None:
    """``state_api_problem`` asked where Ray Train's cleaner asks: a process on the head node, as that detached actor runs."""
    import ray
    from ray._common.constants import HEAD_NODE_RESOURCE_NAME  # the resource Ray Train's cleaner asks for (Ray 2.60)

    probe = ray.remote(num_cpus=0, resources={HEAD_NODE_RESOURCE_NAME: 0.001})(state_api_problem)
    try:
        return ray.get(probe.remote(), timeout=timeout_s)
    except ray.exceptions.GetTimeoutError:
        return f"no process on the head node answered within {timeout_s:g} s"
