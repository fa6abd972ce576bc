"""Old module paths of ``sweep/`` that moved into its rooms, still importable under the old name.

Tune's restore unpickles what a sweep saved (``tuner.pkl``: its callbacks and stoppers; the searcher's state: its
space) by module path, so a sweep saved before ``sweep/`` was split into rooms names ``sweep.checkpoints``,
``sweep.live_page``, ``sweep.space`` and so on. ``install`` (run by ``sweep/__init__``) adds a finder that answers
such a name with the module's new home, the very same module object, so ``sweep resume`` and ``sweep report``
work on old sweeps. The moves that kept a module whole are listed, and ``sweep.storage``, split by job, answers
with the part holding its classes (``Storage``, ``DirMirror``); ``sweep.checks`` and ``sweep.bases``, split too,
held no class a sweep pickles and are not listed.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from types import ModuleType

MOVED = {
    "sweep.attempts": "sweep.trials.attempts",
    "sweep.checkpoints": "sweep.trials.checkpoints",
    "sweep.config": "sweep.spec.config",
    "sweep.distributions": "sweep.spec.distributions",
    "sweep.live": "sweep.watch.live",
    "sweep.live_page": "sweep.watch.live_page",
    "sweep.live_server": "sweep.watch.live_server",
    "sweep.loader": "sweep.spec.loader",
    "sweep.loggers": "sweep.watch.loggers",
    "sweep.multiworker": "sweep.trials.multiworker",
    "sweep.notify": "sweep.watch.notify",
    "sweep.packing": "sweep.trials.packing",
    "sweep.results": "sweep.store.results",
    "sweep.samplers": "sweep.trials.samplers",
    "sweep.schedulers": "sweep.trials.schedulers",
    "sweep.scratch": "sweep.trials.scratch",
    "sweep.space": "sweep.spec.space",
    "sweep.stoppers": "sweep.trials.stoppers",
    "sweep.storage": "sweep.store.storage",
    "sweep.summary_logs": "sweep.watch.summary_logs",
    "sweep.trial": "sweep.trials.trial",
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old name last (after every real module) and loads it as its new home."""

    def find_spec(self, fullname: str, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec) -> ModuleType | None:
        return None  # a placeholder, replaced in exec_module

    def exec_module(self, module: ModuleType) -> None:
        # the import system reads sys.modules back after this: the old name then holds the new module itself
        sys.modules[module.__name__] = importlib.import_module(MOVED[module.__name__])


def install() -> None:
    if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
        sys.meta_path.append(_Alias())
