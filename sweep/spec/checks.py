"""What a well-formed space file must also mean: the semantic checks ``sweep.spec.loader`` runs on every load.

Each check yields problems (one line each, naming the file, the key and what is allowed) instead of raising, so
``sweep validate`` reports every problem at once. ``meaning_problems`` runs them all; this module holds the
trainer's own (its tasks load, its backend can run them, its curriculum's probe reads) and logging's; the space,
searcher and scheduler are ``space_checks``', workers, GPUs and packs ``resource_checks``', the shared base
``bases``'. Imports no torch and no Ray: the cluster's resources are this machine's unless the caller passes them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from configkit import environ
from configkit.base import ConfigError
from configkit.outputs import placement_problem
from grpo.config import CHECKPOINT_STATE_FILE, TrainerConfig
from sweep.spec.bases import base_problems, base_variants
from sweep.spec.config import SweepConfig
from sweep.spec.resource_checks import packing_problems, placement_problems, resource_problems
from sweep.spec.space_checks import condition_problems, point_problems, scheduler_problems, search_problems, space_problems
from sweep.spec.webhook import webhook_problem, webhook_url
from sweep.store.uris import storage_problems


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
    problems = [*storage, *backend_problems(base, tasks, source), *curriculum_problems(base, tasks, source),
                *warmstart_problems(base, tasks, source), *cache_problems(_variants(cfg), tasks, source), *path_problems(base, source), *space_problems(cfg, source),
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


def _variants(cfg: SweepConfig) -> list[TrainerConfig]:
    """The sweep's bases (``base_variants``), or the base trainer alone when a swept value is bad (named elsewhere)."""
    try:
        return base_variants(cfg)
    except ConfigError:
        return [cfg.trainer]


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
    if tasks is None:
        return [tasks_problem]
    return [*backend_problems(base, tasks, source, prefix=""), *curriculum_problems(base, tasks, source, ""), *warmstart_problems(base, tasks, source, ""),
            *cache_problems([base], tasks, source, ""), *path_problems(base, source, "")]


def path_problems(base: TrainerConfig, source: str, prefix: str = "trainer.") -> list[str]:
    """A checkpoint to resume from, or a local model folder, that is not on this machine: named here, not after
    the model has loaded (a Hugging Face id, ``owner/name``, is looked up when the trial starts)."""
    problems = []
    resume = base.resume_from
    if resume and "://" not in resume and not (Path(resume).expanduser() / CHECKPOINT_STATE_FILE).is_file():
        what = "no such directory" if not Path(resume).expanduser().exists() else f"not a grpo-sweep checkpoint (no {CHECKPOINT_STATE_FILE} in it)"
        problems.append(f"{source}: key '{prefix}resume_from' = {resume!r}: {what} on this machine; name a checkpoint folder a run saved")
    model = base.model.name_or_path
    if model and model.startswith(("/", "./", "../", "~")) and not Path(model).expanduser().is_dir():
        problems.append(f"{source}: key '{prefix}model.name_or_path' = {model!r}: no such directory on this machine (a path, not a "
                        "Hugging Face id such as Qwen/Qwen3-8B); name the model's folder")
    elif model and Path(model).expanduser().is_dir():  # a local folder, however named: transformers loads it before the hub
        from grpo.pretrained import model_folder_problem

        if problem := model_folder_problem(Path(model).expanduser()):
            problems.append(f"{source}: key '{prefix}model.name_or_path' = {model!r}: {problem}")
    return problems


def warmstart_problems(base: TrainerConfig, tasks: Any, source: str, prefix: str = "trainer.") -> list[str]:
    """The tiny model's per-env warm-start settings (``model.warmstart_envs``) name training envs, and leave one to train on."""
    if base.model.name_or_path is not None or not base.model.warmstart_envs:
        return []
    from grpo.warmstart import warmstart_env_problems

    where = "key '" + prefix
    return [f"{source}: {p.replace(chr(39).join(['key ', '']), where, 1)}" for p in warmstart_env_problems(base.model, tasks[0])]


def cache_problems(trainers: list[TrainerConfig], tasks: Any, source: str, prefix: str = "trainer.") -> list[str]:
    """Where each base without a shipped copy will be built (``trainers``: the base trainer first, then the sweep's
    other base variants): a folder this user can make and write (``model.cache_dir``, else ``GRPO_SWEEP_CACHE``,
    else ~/.cache/grpo-sweep), named before the bases' minutes. ``tasks``: the first trainer's, loaded already."""
    from grpo.data import base_tasks
    from grpo.warmstart import cache_root, shipped_base

    problems: dict[Path, str] = {}
    for i, trainer in enumerate(trainers):
        model = trainer.model
        if model.name_or_path is not None or shipped_base(model, base_tasks(trainer, tasks[0] if i == 0 else None)) is not None:
            continue
        root = cache_root(model)
        if root in problems or not (problem := placement_problem(root)):
            continue
        which = f"key '{prefix}model.cache_dir' = {model.cache_dir!r}" if model.cache_dir else (
            f"{environ.GRPO_SWEEP_CACHE.name} = {environ.GRPO_SWEEP_CACHE.get()!r}" if environ.GRPO_SWEEP_CACHE.get() else "the default cache folder")
        problems[root] = (f"{source}: {which}: the base policy is built there (no shipped one for this recipe), but {problem}; "
                          "name a folder you can write (model.cache_dir or GRPO_SWEEP_CACHE)")
    return list(problems.values())


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


def logging_problems(cfg: SweepConfig, source: str) -> Iterator[str]:
    wandb = cfg.logging.wandb
    if wandb.enabled and wandb.mode == "online" and not environ.WANDB_API_KEY.is_set() and not _netrc_has_wandb():
        yield f"{source}: key 'logging.wandb.mode' = 'online' needs WANDB_API_KEY in the environment (or `wandb login`); or use mode: offline"
    webhook = webhook_url()
    if webhook and (problem := webhook_problem(webhook)):
        yield problem


def _netrc_has_wandb() -> bool:
    netrc = Path(environ.NETRC.get("~/.netrc") or "~/.netrc").expanduser()
    return netrc.is_file() and "api.wandb.ai" in netrc.read_text(errors="ignore")
