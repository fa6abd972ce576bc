"""grpo-sweep's door: the CLI, sweep configs, search spaces and the Ray Tune wiring.

Rooms: ``spec`` (the config door), ``store`` (results and where they live), ``trials`` (the Tune side),
``watch`` (what a person sees while it runs), ``report`` and ``verdict`` (what won, and why); the entry points
(``__main__``, ``run``, ``tuner``, ``resume``, ``confirm``, ``forecast``, ``leaderboard``) on top.
"""

from sweep.moved import install

install()  # old module paths (sweeps saved before the rooms) still import
