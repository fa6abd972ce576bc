"""The config door: what a sweep is asked to do, read once, checked once, typed.

``config`` (the ``SweepConfig`` schema) and ``distributions`` (the space grammar); ``loader`` (the one door: a
space file, a trainer YAML or a saved sweep, plus ``--set`` overrides, parsed and checked); the checks it runs
(``checks`` for the trainer, its tasks and backend; ``space_checks`` for the space, searcher and scheduler;
``resource_checks`` for workers, GPUs and packs; ``bases`` for which keys change the shared base); ``space``
(the space as each searcher takes it). Imports no torch and no Ray at module level.
"""
