"""The closest allowed name to a misspelt one, said the same way in every message ("did you mean 'optim.lr'?").

Only a near miss is suggested (difflib's similarity ratio at least 0.75, one name): a wrong guess would mislead more
than no guess. The list of what is allowed stays the caller's to give.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

CUTOFF = 0.75  # 'optim.lrr' -> 'optim.lr' (0.94), 'eval/scroe' -> 'eval/score' (0.9); 'mode: maximize' -> 'max' (0.55): none


def did_you_mean(word: str, allowed: Iterable[str]) -> str:
    """``"did you mean 'x'? "`` for the allowed name closest to ``word``, or ``""`` when none is near (or ``word``
    is allowed itself: the fault is elsewhere)."""
    names = [str(name) for name in allowed]
    found = difflib.get_close_matches(word, names, n=1, cutoff=CUTOFF) if word not in names else []
    return f"did you mean {found[0]!r}? " if found else ""
