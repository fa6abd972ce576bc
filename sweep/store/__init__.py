"""Where a sweep's results live and how they are read back: one URI, a local directory or ``s3://``.

``storage`` (the opened URI, its reachability, directory mirrors), ``uris`` (a value's shape, checked before
anything starts), ``study`` (the Optuna study's SQLite file beside the results), ``results`` (a trial's results
read back, one row per step), ``driver`` (which process drives a sweep now: a second driver refused). The lowest
room of ``sweep/``: it imports nothing else of it.
"""
