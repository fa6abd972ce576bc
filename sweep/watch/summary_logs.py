"""The finished sweep, once, where people look besides the report: TensorBoard's HParams tab and one W&B run.

TensorBoard: ``{sweep}/tensorboard_hparams/{trial}``, one run per trial holding its swept keys (and its verdict's
label) as hparams, and as metrics the report's score (``score/gain``: held-out gain over the base) and the
ranking metric's best and last values. W&B (``logging.wandb`` on): a run in the sweep's group holding the
leaderboard and every trial's per-env rows as tables, and the verdict in words (the run's notes and ``summary.verdict``). Both read the report
(``sweep.report.build.Report``), so every number matches it. Leaves out per-step curves: the trials' own
TensorBoard files and W&B runs have those.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from sweep.report.build import Report
from sweep.spec.config import SweepConfig
from sweep.store.storage import Storage

HPARAMS_DIR = "tensorboard_hparams"
GAIN = "score/gain"


def logged_keys(rep: Report) -> list[str]:
    """The swept keys, less any that looks like a secret (``sweep.watch.loggers``' rule for the trials' W&B runs)."""
    from sweep.watch.loggers import SECRET

    return [k for k in rep.swept_keys if not SECRET.search(k)]


def leaderboard_table(rep: Report) -> tuple[list[str], list[list[Any]]]:
    """The report's ranking, best first: columns and rows (swept keys by their full dotted name)."""
    keys = logged_keys(rep)
    columns = ["rank", "trial", *keys, "base", f"best {rep.metric}", f"last {rep.metric}", "gain", "gain low", "gain high",
               "verdict", "why", "lr advice", "steps", "stop"]
    rows = []
    for rank, (j, t) in enumerate(zip(rep.judged, rep.trials), start=1):
        base = j.evidence.base.pass_at_1 if j.evidence.base else None
        rows.append([rank, j.trial_id, *[_plain(t.config.get(k)) for k in keys], base, t.best, t.last, j.score.gain, j.score.low,
                     j.score.high, j.verdict.label, j.verdict.why, j.verdict.lr, t.steps, t.stop])
    return columns, rows


def env_tables(rep: Report) -> tuple[list[str], list[list[Any]]]:
    """Every trial's per-env rows (the report's ``Environments, trial by trial``), in the ranking's order."""
    from sweep.report.envs import describe

    rows = [[rank, j.trial_id, *describe(row).values()] for rank, j in enumerate(rep.judged, start=1) for row in rep.env_tables.get(j.trial_id, [])]
    first = next((row for table in rep.env_tables.values() for row in table), None)
    return (["rank", "trial", *describe(first)] if first else []), rows


def _plain(value: Any) -> Any:
    """A value TensorBoard's hparams and W&B's table both take: a number, a string or a bool (None stays None)."""
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def trial_metrics(rep: Report) -> dict[str, dict[str, float]]:
    """Per trial, the numbers the HParams tab compares: the report's score and the ranking metric (None left out)."""
    out = {}
    for j, t in zip(rep.judged, rep.trials):
        values = {GAIN: j.score.gain, f"best/{rep.metric}": t.best, f"last/{rep.metric}": t.last}
        out[j.trial_id] = {name: float(v) for name, v in values.items() if v is not None}
    return out


def write_hparams(rep: Report, store: Storage, name: str) -> str:
    """Write ``{sweep}/tensorboard_hparams`` afresh (local or S3); returns where."""
    with tempfile.TemporaryDirectory() as tmp:
        _write_hparams_local(rep, Path(tmp))
        store.delete_dir(name, HPARAMS_DIR)
        store.upload(tmp, name, HPARAMS_DIR)
    return store.display(name, HPARAMS_DIR)


def _write_hparams_local(rep: Report, root: Path) -> None:
    from tensorboardX import SummaryWriter
    from tensorboardX.summary import hparams

    metrics = trial_metrics(rep)
    names = sorted({m for values in metrics.values() for m in values})
    keys = logged_keys(rep)
    for j, t in zip(rep.judged, rep.trials):
        params = {k: _plain(t.config.get(k)) for k in keys if t.config.get(k) is not None}
        params["verdict"] = j.verdict.label
        # every trial declares every metric, so TensorBoard shows one table; a missing value stays blank
        experiment, start, end = hparams(params, dict.fromkeys(names, 0.0))
        with SummaryWriter(logdir=str(root / j.trial_id)) as writer:
            for summary in (experiment, start, end):
                writer.file_writer.add_summary(summary)
            for metric, value in metrics[j.trial_id].items():
                writer.add_scalar(metric, value, global_step=t.steps)


def write_wandb(rep: Report, cfg: SweepConfig) -> str:
    """One W&B run for the whole sweep (its group the sweep's name): the leaderboard table and the verdict.
    Returns the run's local directory (``wandb sync`` it when offline)."""
    import wandb

    from sweep.watch.loggers import wandb_dir

    w = cfg.logging.wandb
    columns, rows = leaderboard_table(rep)
    run = wandb.init(
        project=w.project, entity=w.entity, group=cfg.name, job_type="sweep", name=f"{cfg.name} (sweep)", notes=rep.verdict,
        mode=w.mode, dir=str(wandb_dir(cfg)), config={"swept_keys": logged_keys(rep), "metric": rep.metric},
        settings=wandb.Settings(silent=True),
    )
    try:
        run.log({"leaderboard": wandb.Table(columns=columns, data=rows, allow_mixed_types=True)})
        env_columns, env_rows = env_tables(rep)
        if env_rows:
            run.log({"envs": wandb.Table(columns=env_columns, data=env_rows, allow_mixed_types=True)})
        run.summary["verdict"] = rep.verdict
        if rep.judged and rep.judged[0].score.gain is not None:
            run.summary["winner"] = rep.judged[0].trial_id
        where = run.dir
    finally:
        run.finish()
        wandb.teardown()  # finish() returns before wandb-core has flushed the run file (see sweep.watch.loggers)
    return str(Path(where).parent)


def log_sweep_end(rep: Report, cfg: SweepConfig, store: Storage) -> None:
    """Write what the ``logging`` block asks for; the sweep's results stand whatever happens here, so a failure
    is said, not raised."""
    writers = {"TensorBoard hparams": lambda: write_hparams(rep, store, cfg.name)} if cfg.logging.tensorboard else {}
    if cfg.logging.wandb.enabled and cfg.logging.wandb.mode != "disabled":
        writers["W&B sweep run"] = lambda: write_wandb(rep, cfg)
    for what, write in writers.items():
        try:
            print(f"{what}: {write()}")
        except Exception as exc:  # noqa: BLE001 - the results are stored; say what failed
            print(f"warning: the {what} could not be written ({type(exc).__name__}: {exc})")
