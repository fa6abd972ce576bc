"""Write the task files of the local apps built on ``taskkit``: ``python -m toolenvs.local.generate``.

Leaves out hotel: its task set (``toolenvs/data/hotel.jsonl``) is frozen (the shipped base policies were built
on it), and ``python -m toolenvs.local.hotel_tasks`` still writes it on its own.
"""

from __future__ import annotations

import importlib
from collections import Counter

from toolenvs.local import GENERATORS, get_app, taskkit

FROZEN = {"hotel"}


def main() -> None:
    for env_key, module in GENERATORS.items():
        if env_key in FROZEN:
            continue
        records = importlib.import_module(module).generate()
        path = taskkit.write(get_app(env_key), records)
        by_difficulty = Counter(r["difficulty"] for r in records)
        print(f"wrote {len(records)} tasks to {path} (by difficulty: {dict(sorted(by_difficulty.items()))})")


if __name__ == "__main__":
    main()
