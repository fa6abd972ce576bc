"""The house's shape, read from the code's imports (every import, function-level ones included):
packages only import downward (configkit < toolenvs < grpo < sweep) and no modules import each other in a circle.

A guard, not the design: docs/decisions.md says why the floors are what they are.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLOORS = ("configkit", "toolenvs", "grpo", "sweep")  # each may import those before it, never those after


def _modules() -> dict[str, Path]:
    found = {}
    for package in FLOORS:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project's modules ``name`` imports anywhere in its code (``from pkg import sub`` names the submodule)."""
    targets: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            wanted = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            wanted = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        for target in wanted:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                targets.add(target)
    return targets


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_packages_only_import_downward():
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in _graph().items()
        for target in targets
        if FLOORS.index(target.split(".")[0]) > FLOORS.index(module.split(".")[0])
    )
    assert not upward, upward


SWEEP_ROOMS = ("sweep.store", "sweep.spec", "sweep.verdict", "sweep.trials", "sweep.report", "sweep.watch")  # each may import those before it


def _sweep_room(module: str) -> int:
    """A sweep module's room, by its place in ``SWEEP_ROOMS``; the entry points on top (``run``, ``tuner``, the CLI...) come after all."""
    return next((i for i, room in enumerate(SWEEP_ROOMS) if module == room or module.startswith(room + ".")), len(SWEEP_ROOMS))


def test_sweep_rooms_only_import_downward():
    """Inside ``sweep/``: results and storage at the bottom, then the config door, the verdict's rules, the Tune
    side, the report, the watchers; the entry points may use them all, and no room uses an entry point."""
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in _graph().items()
        if module.startswith("sweep")
        for target in targets
        if target.startswith("sweep") and _sweep_room(target) > _sweep_room(module)
    )
    assert not upward, upward
    assert all((ROOT / room.replace(".", "/") / "__init__.py").is_file() for room in SWEEP_ROOMS)


def test_no_import_circles():
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            members = []
            while True:
                member = stack.pop()
                members.append(member)
                if member == node:
                    break
            if len(members) > 1:
                circles.append(sorted(members))

    for node in graph:
        if node not in index:
            visit(node)
    assert not circles, circles


def test_the_guard_sees_function_level_imports(tmp_path):
    """The reader follows imports inside functions, where circles hide."""
    path = tmp_path / "m.py"
    path.write_text("def f():\n    from sweep.spec.checks import meaning_problems\n    import grpo.config\n")
    modules = _modules()
    assert _imports("sweep.spec.config", path, modules) == {"sweep.spec.checks", "grpo.config"}


def test_environment_variables_are_named_in_one_module():
    """``configkit.environ`` names every variable the project sets or reads; nothing else touches ``os.environ``."""
    from configkit import environ

    touching = sorted(
        str(path.relative_to(ROOT))
        for package in FLOORS
        for path in (ROOT / package).rglob("*.py")
        if path != ROOT / "configkit" / "environ.py" and any(word in path.read_text() for word in ("os.environ", "os.getenv", "putenv"))
    )
    assert not touching, touching
    names = [variable.name for variable in environ.ALL]
    assert len(names) == len(set(names)) and all(variable.why for variable in environ.ALL)
    assert {"GRPO_SWEEP_CACHE", "HF_HUB_OFFLINE", "TUNE_FUNCTION_THREAD_TIMEOUT_S", "TUNE_GLOBAL_CHECKPOINT_S", "GRPO_ENV_TRACING",
            "LOCAL_RANK", "WANDB_API_KEY"} <= set(names)


BACKEND_MODULES = {"toolenvs/backend.py", "toolenvs/seam.py", "toolenvs/local/backend.py", "toolenvs/fleet_backend.py"}


def _backend_branches(tree: ast.AST) -> list[int]:
    """Lines that ask which environment backend a config chose: ``x.type == "fleet"`` (or ``!=``, ``in``) against a
    backend's name, or ``isinstance(x, ...BackendConfig)``."""
    names = {"local", "fleet"}
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            typed = any(isinstance(s, ast.Attribute) and s.attr == "type" for s in sides)
            named = any(isinstance(s, ast.Constant) and s.value in names for s in sides)
            if typed and named:
                lines.append(node.lineno)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
            if any(isinstance(n, ast.Name) and n.id.endswith("BackendConfig") for n in ast.walk(node.args[1])):
                lines.append(node.lineno)
    return lines


def test_nothing_but_a_backend_asks_which_backend_it_is():
    """A backend's config owns its checks, its sweep-wide parts and how it opens environments
    (``toolenvs.seam.BackendSettings``): the sweep and the trainer call those and never branch on the backend's type."""
    branching = sorted(
        f"{path.relative_to(ROOT)}:{line}"
        for package in FLOORS
        for path in (ROOT / package).rglob("*.py")
        if str(path.relative_to(ROOT)) not in BACKEND_MODULES
        for line in _backend_branches(ast.parse(path.read_text()))
    )
    assert not branching, branching


def test_the_backend_guard_sees_a_branch():
    assert _backend_branches(ast.parse("if cfg.env.backend.type == 'fleet':\n    pass\n")) == [1]
    assert _backend_branches(ast.parse("ok = isinstance(b, FleetBackendConfig)\n")) == [1]
    assert _backend_branches(ast.parse("if split.method == 'fleet':\n    pass\n")) == []  # a split's method is not a backend
