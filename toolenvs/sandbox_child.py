"""The sandboxed process that runs one untrusted ``verifier_code`` (started by ``toolenvs.sandbox``; stdlib only).

Run as ``python -I -S sandbox_child.py INPUT.json``. Trusted phase: read the input, pre-import the
modules a verifier may use, leave the network (a new network namespace when the kernel lets us), set
resource limits, drop root, compile the code. Then an audit hook denies every audited action not on a
short allowlist (opening files, new imports, processes, sockets, ctypes, signals, ...), and the code's
``verify(final_state)`` runs. The last stdout line is ``{"reward": x}`` or ``{"error": "..."}``.
Audit hooks are not a security boundary on their own (PEP 578): the process, its rlimits, the namespace
and the parent's timeout are; the hook is the layer that turns most attempts into a clear error.
"""

import io
import json
import math
import os
import resource
import sys

PRELOADED = ("json", "math", "re", "datetime", "_strptime", "collections", "itertools", "functools", "statistics", "string")
ALLOWED_EVENTS = {"compile", "exec", "object.__getattr__", "object.__setattr__", "object.__delattr__", "sys._getframe", "builtins.id"}
CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
NOBODY = 65534


def leave_network() -> str:
    """A fresh network namespace (only a down loopback): as root directly, else inside a user namespace."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for flags in (CLONE_NEWNET, CLONE_NEWUSER | CLONE_NEWNET):
        if libc.unshare(flags) == 0:
            return "namespace"
    return "audit-hook-only"


def limit_resources(memory_mb: int, cpu_s: int) -> None:
    memory = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))  # caps what reaches the stdout file
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))  # no fork; root ignores it, hence drop_root


def drop_root() -> str:
    """Run the untrusted code as ``nobody`` (and so under RLIMIT_NPROC) when started as root."""
    if os.getuid() != 0:
        return "unprivileged"
    try:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    except PermissionError:  # root without CAP_SETUID (some containers): the hook still denies processes
        return "root"
    return "nobody"


def audit(event: str, args: tuple) -> None:
    if event in ALLOWED_EVENTS:
        return
    if event == "import":
        if args[0] in sys.modules:
            return
        raise PermissionError(f"sandbox: import {args[0]!r} is not allowed in verifier_code (stdlib: {', '.join(PRELOADED)})")
    raise PermissionError(f"sandbox: {event} is not allowed in verifier_code")


def reward_of(value: object) -> float:
    if not isinstance(value, (int, float)):
        raise TypeError(f"verify() returned {type(value).__name__}, not a number")
    reward = float(value)
    if not (math.isfinite(reward) and 0.0 <= reward <= 1.0):
        raise ValueError(f"verify() returned {reward}, not in [0, 1]")
    return reward


def main() -> None:
    out = sys.stdout
    with open(sys.argv[1]) as f:
        job = json.load(f)
    os.chdir("/")
    for name in PRELOADED:  # before dropping root: the interpreter may live where nobody cannot read
        __import__(name)
    isolation = leave_network()
    sys.modules.pop("ctypes", None)  # re-importing it is an audited (denied) import
    sys.modules.pop("_ctypes", None)
    limit_resources(job["memory_mb"], job["cpu_s"])
    isolation += "," + drop_root()
    code = compile(job["code"], "<verifier_code>", "exec")
    namespace: dict = {"__name__": "verifier_code"}
    sys.stdout = io.StringIO()  # a verifier's prints must not look like the result line
    sys.addaudithook(audit)
    try:
        exec(code, namespace)
        result = {"reward": reward_of(namespace["verify"](job["final_state"])), "isolation": isolation}
    except BaseException as exc:  # everything the untrusted code raises is the verifier's error
        result = {"error": f"{type(exc).__name__}: {exc}"[:500]}
    out.write("\n" + json.dumps(result) + "\n")
    out.flush()


if __name__ == "__main__":
    main()
