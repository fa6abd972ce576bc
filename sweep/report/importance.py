"""Hyperparameter importance from the sweep's persisted Optuna study (``optuna.db``), with PED-ANOVA.

Optuna's evaluators use finished (COMPLETE) trials only; trials that ASHA or the zero-signal rule
stopped are PRUNED in our study, so a sweep that stopped most of its trials may have too few. Then, and
when every finished trial scored the same, the result carries the reason instead of numbers.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

MIN_COMPLETE = 3


@dataclass
class Importance:
    importances: dict[str, float] = field(default_factory=dict)
    reason: str = ""  # why there are no importances
    complete: int = 0
    pruned: int = 0
    evaluator: str = "PED-ANOVA"


def _study(db: Path, name: str):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = f"sqlite:///{db}"
    names = [s.study_name for s in optuna.get_all_study_summaries(storage)]
    if not names:
        return None
    return optuna.load_study(study_name=name if name in names else names[0], storage=storage)


def param_importance(db: Path | None, study_name: str, min_complete: int = MIN_COMPLETE) -> Importance:
    """PED-ANOVA importances of the swept keys, or the reason there are none."""
    if db is None:
        return Importance(reason="no optuna.db in the sweep (the searcher was not Optuna)")
    import optuna
    from optuna.trial import TrialState

    try:
        study = _study(db, study_name)
    except Exception as exc:  # not an SQLite database, or not Optuna's (SQLAlchemy's errors): the rest of the report stands
        said = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        return Importance(reason=f"{db.name} could not be read as an Optuna study ({type(exc).__name__}{': ' + said if said else ''})")
    if study is None:
        return Importance(reason=f"{db.name} holds no study")
    trials = study.get_trials(deepcopy=False)
    complete = [t for t in trials if t.state == TrialState.COMPLETE and t.value is not None]
    result = Importance(complete=len(complete), pruned=sum(t.state == TrialState.PRUNED for t in trials))
    if len(complete) < min_complete:
        result.reason = (f"{len(complete)} finished trial(s), {result.pruned} stopped early (PRUNED); importance needs at "
                         f"least {min_complete} finished trials")
    elif len({t.value for t in complete}) == 1:
        result.reason = f"every finished trial scored {complete[0].value:g}: nothing to attribute"
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            evaluator = optuna.importance.PedAnovaImportanceEvaluator()
            result.importances = dict(optuna.importance.get_param_importances(study, evaluator=evaluator))
    return result
