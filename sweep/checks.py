"""What a well-formed space file must also mean: the semantic checks ``sweep.loader`` runs on every load.

Each check yields problems (one line each, naming the file, the key and what is allowed) instead of
raising, so ``sweep validate`` reports every problem at once. Imports no torch and no Ray: the cluster's
resources are this machine's unless the caller passes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from configkit import environ
from configkit.base import ConfigError, apply_overrides, describe_errors, dotted_keys
from grpo.combinations import Clash, pack_clashes, worker_clashes
from grpo.config import TrainerConfig, pack_wide
from sweep.bases import base_problems
from sweep.config import Choice, Fixed, Grid, PbtConfig, SweepConfig
from sweep.distributions import NUMERIC
from sweep.space import sampled_trial_count
from sweep.storage import storage_problems

UNSWEEPABLE = ("total_steps", "output_dir")
OPTUNA_CATEGORICAL = (type(None), bool, int, float, str)


def meaning_problems(cfg: SweepConfig, source: str, dropped: set[str], cluster: dict[str, float] | None) -> list[str]:
    """Every semantic problem of a structurally valid config; sections in ``dropped`` were invalid and are skipped
    (every check but storage's needs the base trainer: without it, none runs)."""
    storage = [] if "storage" in dropped else [f"{source}: {p}" for p in storage_problems(cfg.storage, None if "name" in dropped else cfg.name)]
    if "trainer" in dropped:
        return storage
    base = cfg.trainer
    tasks, tasks_problem = trial_tasks_or_problem(base, source)
    if tasks is None:
        return [*storage, tasks_problem]  # the metric, the scheduler and the bases all read the tasks
    problems = [*storage, *backend_problems(base, tasks, source), *curriculum_problems(base, tasks, source), *space_problems(cfg, source),
                *condition_problems(cfg, source), *base_problems(cfg, source)]
    if "search" not in dropped:
        problems += [*point_problems(cfg, source), *search_problems(cfg, base, source)]
    if "scheduler" not in dropped and "search" not in dropped:
        problems += scheduler_problems(cfg, base, source)
    if "resources" not in dropped:
        problems += placement_problems(cfg, base, source)
    if "resources" not in dropped and cfg.resources.trials_per_worker > 1:
        problems += packing_problems(cfg, base, source)
    if "resources" not in dropped and cluster is not None:
        problems += resource_problems(cfg, cluster, source)
    if "logging" not in dropped:
        problems += logging_problems(cfg, source)
    return problems


def _refused(cfg: SweepConfig, key: str, value: Any, source: str) -> str | None:
    """The trainer's complaint about ``key = value`` on the base config, or None if it accepts it."""
    try:
        TrainerConfig.model_validate(apply_overrides(cfg.trainer.model_dump(), {key: value}))
    except ValidationError as exc:
        return describe_errors(exc, TrainerConfig, source)
    return None


def distribution_problems(cfg: SweepConfig, where: str, key: str, dist: Any, source: str) -> Iterator[str]:
    """A key is a known, sweepable trainer key and the trainer accepts every extreme of its distribution."""
    if key in UNSWEEPABLE:
        yield f"{source}: key '{where}.{key}' cannot be swept (ASHA and the stop rule use trainer.{key}); set it under trainer"
        return
    if key == "env.backend" or key.startswith("env.backend."):
        yield (f"{source}: key '{where}.{key}' cannot be swept: the environment backend is the sweep's (Fleet's instance "
               "cap holds across all its trials); set it under trainer.env.backend")
        return
    if key not in dotted_keys(TrainerConfig):
        yield f"{source}: unknown trainer key '{where}.{key}' (allowed: {', '.join(dotted_keys(TrainerConfig))})"
        return
    for value in dist.extremes():
        detail = _refused(cfg, key, value, source)
        if detail:
            yield f"{source}: key '{where}.{key}' can give {value!r}, which the trainer refuses:\n{detail}"
            return


def space_problems(cfg: SweepConfig, source: str) -> Iterator[str]:
    searcher = cfg.search.searcher
    for key, dist in cfg.space.items():
        yield from distribution_problems(cfg, "space", key, dist, source)
        if isinstance(dist, Grid) and searcher == "optuna":
            yield f"{source}: key 'space.{key}' is a grid, which the optuna searcher cannot run (use choice, or searcher: grid or random)"
        if isinstance(dist, NUMERIC) and searcher == "grid":
            yield f"{source}: key 'space.{key}' is {dist.type}; the grid searcher needs grid, choice or fixed values"
        if isinstance(dist, Choice) and searcher == "optuna" and not all(isinstance(v, OPTUNA_CATEGORICAL) for v in dist.values):
            yield f"{source}: key 'space.{key}': Optuna's choices must be plain values (number, string, bool, null), got {dist.values!r}"


def condition_problems(cfg: SweepConfig, source: str) -> Iterator[str]:
    """``when`` names swept, unconditional keys, and can hold for at least one of their values."""
    for key, dist in cfg.space.items():
        for parent, condition in (dist.when or {}).items():
            where = f"{source}: key 'space.{key}.when.{parent}'"
            if parent == key:
                yield f"{where}: a key cannot depend on itself"
            elif parent not in cfg.space:
                yield f"{where} names a key the space does not sweep (swept: {', '.join(k for k in cfg.space if k != key)})"
            elif cfg.space[parent].when:
                yield f"{where}: {parent} is itself conditional; conditions may only name unconditional keys"
            elif isinstance(cfg.space[parent], Choice | Fixed) and not any(condition.holds(v) for v in cfg.space[parent].extremes()):
                yield f"{where}: '{condition.describe()}' holds for none of {parent}'s values {cfg.space[parent].extremes()!r}, so {key} is never sampled"
        if dist.when and isinstance(dist, Grid) and cfg.search.searcher == "random":
            yield f"{source}: key 'space.{key}' is a conditional grid, which the random searcher cannot expand (use choice, or searcher: grid)"


def point_problems(cfg: SweepConfig, source: str) -> Iterator[str]:
    """Each starting point names only swept keys, with values inside their distributions, and makes a valid trial."""
    for i, point in enumerate(cfg.search.points_to_evaluate):
        where = f"{source}: key 'search.points_to_evaluate[{i}]'"
        unknown = sorted(set(point) - set(cfg.space))
        if unknown:
            yield f"{where} names {', '.join(unknown)}, which the space does not sweep (swept: {', '.join(cfg.space)})"
            continue
        for key, value in point.items():
            dist = cfg.space[key]
            if not dist.contains(value):
                yield f"{where}: {key} = {value!r} is outside its distribution {dist.model_dump(exclude_none=True)}"
            elif not dist.active(point):
                yield f"{where}: {key} is set, but its condition {_describe(dist.when)} does not hold in this point"
        try:
            TrainerConfig.model_validate(apply_overrides(cfg.trainer.model_dump(), point))
        except ValidationError as exc:
            yield f"{where} makes a trial config the trainer refuses:\n{describe_errors(exc, TrainerConfig, source)}"


def _describe(when: dict[str, Any] | None) -> str:
    return ", ".join(f"{k} {c.describe()}" for k, c in (when or {}).items())


def trial_tasks_or_problem(base: TrainerConfig, source: str, section: str = "trainer") -> tuple[Any, str | None]:
    """The base trainer's (training, held-out) tasks, loaded once for every check that reads them, or None
    and why they do not load or are empty (its keys named within ``section``, the trainer's place in the file)."""
    from grpo.data import trial_tasks

    where = f"{source}: in {section}:" if section else f"{source}:"
    try:
        return trial_tasks(base), None
    except ConfigError as exc:
        return None, f"{where} {exc}"
    except ValueError as exc:
        return None, f"{where} the tasks: {exc}"


def trainer_problems(base: TrainerConfig, source: str) -> list[str]:
    """A trainer YAML's checks (``sweep train``, ``forecast``): its tasks load, and its backend can run them."""
    tasks, tasks_problem = trial_tasks_or_problem(base, source, section="")
    return [tasks_problem] if tasks is None else [*backend_problems(base, tasks, source, prefix=""), *curriculum_problems(base, tasks, source, "")]


def curriculum_problems(base: TrainerConfig, tasks: Any, source: str, section: str = "trainer") -> list[str]:
    """The curriculum's probe file (``data.curriculum.prior_path``) reads and names some training task (also
    where the base leaves the curriculum off: a space may sweep it on)."""
    if not base.data.curriculum.prior_path:
        return []
    from grpo.curriculum import curriculum_sampler

    try:
        curriculum_sampler(base, tasks[0])
    except ConfigError as exc:
        return [f"{source}: in {section}: {exc}" if section else f"{source}: {exc}"]
    return []


def backend_problems(base: TrainerConfig, tasks: Any, source: str, prefix: str = "trainer.") -> Iterator[str]:
    """The environment backend can run every task (``tasks``: the trainer's training and held-out ones), and
    has what it needs here (its own ``problems``: Fleet's key, SDK and OpenEnv)."""
    from toolenvs.local import APPS as local_apps

    backend = base.env.backend
    train, held_out = tasks
    hosted = sorted({t.env_key for t in train} - set(local_apps))
    if base.model.name_or_path is None and base.model.warmstart_steps > 0 and hosted:
        yield (f"{source}: key '{prefix}model.name_or_path' = None: the tiny model is warm-started by replaying the tasks' solutions "
               f"on our local apps, and {', '.join(hosted)} are not local apps; name a pretrained model (e.g. Qwen/Qwen3-8B) "
               "or set trainer.model.warmstart_steps: 0")
    for problem in backend.problems(train + held_out):
        yield f"{source}: key '{prefix}env.backend' = {{type: {backend.type}}}: {problem}"


def search_problems(cfg: SweepConfig, base: TrainerConfig, source: str) -> Iterator[str]:
    """The metric is one the trainer reports; the Optuna sampler fits the space."""
    from grpo.data import select_tasks
    from grpo.metrics import metric_names

    names = metric_names({t.env_key for t in select_tasks(base.env)}, base.eval.n_samples if base.eval.interval else None)
    search = cfg.search
    if search.metric not in names:
        hint = " (eval/* needs trainer.eval.interval > 0)" if search.metric.startswith("eval/") and not base.eval.interval else ""
        yield f"{source}: key 'search.metric' = {search.metric!r} is not reported{hint}; allowed: {', '.join(sorted(names))}"
    sampled = [d for d in cfg.space.values() if not isinstance(d, Fixed)]
    if search.searcher != "optuna":
        for key in ("sampler", "constant_liar", "n_startup_trials"):
            if getattr(search, key) != type(search).model_fields[key].default:
                yield f"{source}: key 'search.{key}' applies to the optuna searcher only (searcher is {search.searcher})"
        return
    if not sampled:
        yield f"{source}: key 'space' has nothing to search (no distribution); the optuna searcher needs one (or use searcher: random)"
    if not search.constant_liar and search.sampler != "tpe":
        yield f"{source}: key 'search.constant_liar' applies to the tpe sampler only (sampler is {search.sampler})"
    if search.sampler == "cmaes":
        if sampled and not any(isinstance(d, NUMERIC) for d in sampled):
            yield f"{source}: key 'search.sampler' = 'cmaes' samples numeric keys (uniform, loguniform, quniform, randint); the space has none (use tpe or gp)"
        conditional = [k for k, d in cfg.space.items() if d.when]
        if conditional:
            yield f"{source}: key 'search.sampler' = 'cmaes' needs the same keys in every trial; conditional keys {', '.join(conditional)} (use tpe or gp)"


def scheduler_problems(cfg: SweepConfig, base: TrainerConfig, source: str) -> Iterator[str]:
    """Schedulers count GRPO steps: their periods fit in the run and line up with eval and checkpoints."""
    sched = cfg.scheduler
    eval_metric = cfg.search.metric.startswith("eval/") and base.eval.interval
    period = getattr(sched, "grace_period", None) or getattr(sched, "perturbation_interval", None)
    name = "grace_period" if hasattr(sched, "grace_period") else "perturbation_interval"
    if period is not None and period > base.total_steps:
        yield f"{source}: key 'scheduler.{name}' = {period} exceeds trainer.total_steps = {base.total_steps}"
    if period is not None and eval_metric and period % base.eval.interval:
        yield (f"{source}: key 'scheduler.{name}' = {period} is not a multiple of trainer.eval.interval = {base.eval.interval}: "
               f"the {sched.type} scheduler would compare stale eval results")
    if isinstance(sched, PbtConfig):
        yield from pbt_problems(cfg, sched, base, source)


def pbt_problems(cfg: SweepConfig, sched: PbtConfig, base: TrainerConfig, source: str) -> Iterator[str]:
    if cfg.search.searcher == "optuna":
        yield f"{source}: key 'scheduler.type' = 'pbt' picks and mutates configs itself; Tune refuses a search algorithm with it (use searcher: random or grid)"
    interval = base.checkpoint.interval
    if not interval or sched.perturbation_interval % interval:
        yield (f"{source}: key 'scheduler.perturbation_interval' = {sched.perturbation_interval}: PBT exploits by checkpoint, so "
               f"trainer.checkpoint.interval (now {interval}) must be > 0 and divide it")
    if not sched.mutations:
        yield f"{source}: key 'scheduler.mutations' is empty; PBT needs at least one key to mutate, e.g. optim.lr: {{loguniform: [1.0e-5, 1.0e-3]}}"
    for key, dist in sched.mutations.items():
        yield from distribution_problems(cfg, "scheduler.mutations", key, dist, source)
        if isinstance(dist, Fixed | Grid) or dist.when:
            yield f"{source}: key 'scheduler.mutations.{key}' must be uniform, loguniform, quniform, randint or choice, without when"
    if cfg.resources.workers_per_trial > 1:  # exploit copies a Tune checkpoint; a multi-worker trial's live in Ray Train
        yield f"{source}: key 'scheduler.type' = 'pbt' works with one worker per trial; resources.workers_per_trial is {cfg.resources.workers_per_trial}"
    if cfg.max_concurrent_trials < 2 or sampled_trial_count(cfg) < 2:
        yield f"{source}: key 'scheduler.type' = 'pbt' needs a population: at least 2 trials (search.num_samples) running at once (max_concurrent_trials)"


def cluster_resources() -> tuple[dict[str, float] | None, str]:
    """What trials could get and where that was read: the running Ray cluster at ``RAY_ADDRESS``, else nothing.

    Without a cluster there is nothing to check against: a space written for a GPU cluster must validate on
    a laptop, and ``sweep run`` checks the Ray it starts anyway.
    """
    address = environ.RAY_ADDRESS.get()
    if not address:
        return None, "nothing (set RAY_ADDRESS to check against a running Ray cluster)"
    import ray

    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    try:
        return dict(ray.cluster_resources()), f"the Ray cluster at {address}"
    finally:
        ray.shutdown()


def resource_problems(cfg: SweepConfig, available: dict[str, float], source: str = "resources") -> list[str]:
    """A trial that asks for more than the cluster has would wait forever: say so instead."""
    workers = cfg.resources.workers_per_trial
    wanted = {"CPU": cfg.resources.cpus_per_trial, "GPU": cfg.resources.gpus_per_trial}
    driver = {"CPU": 0.01 if workers > 1 else 0.0, "GPU": 0.0}  # a multi-worker trial's own process (sweep.tuner)
    per = f" per worker x {workers} workers (resources.workers_per_trial), plus 0.01 CPU for the trial" if workers > 1 else ""
    return [
        f"{source}: key 'resources.{kind.lower()}s_per_trial' = {amount:g}: each trial asks for {amount * workers + driver[kind]:g} {kind}{per}, "
        f"the Ray cluster has {available.get(kind, 0.0):g}; lower it"
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


def logging_problems(cfg: SweepConfig, source: str) -> Iterator[str]:
    wandb = cfg.logging.wandb
    if wandb.enabled and wandb.mode == "online" and not environ.WANDB_API_KEY.is_set() and not _netrc_has_wandb():
        yield f"{source}: key 'logging.wandb.mode' = 'online' needs WANDB_API_KEY in the environment (or `wandb login`); or use mode: offline"


def _netrc_has_wandb() -> bool:
    netrc = Path(environ.NETRC.get("~/.netrc") or "~/.netrc").expanduser()
    return netrc.is_file() and "api.wandb.ai" in netrc.read_text(errors="ignore")
