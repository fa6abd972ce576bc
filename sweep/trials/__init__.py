"""The Tune side: what runs a trial and decides about it while the sweep runs.

``trial`` (the function trainable) and its three paths: one process, ``multiworker`` (Ray Train workers),
``packing`` (a pack host shared by LoRA trials), each handed one typed ``TrainerConfig``; ``checkpoints``,
``attempts`` and ``scratch`` (restarts, resumes and a trial's local files); ``base_evals`` (the sweep's shared
base evals, made before the trials); ``stoppers``, ``schedulers`` and ``samplers`` (the rules Tune and Optuna
apply). The wiring of these into a ``Tuner`` is ``sweep.tuner``.
"""
