"""Serve a local app as a real MCP server (streamable HTTP, 127.0.0.1) with per-episode state.

One process serves many episodes. Each episode is keyed by the ``x-episode-id`` HTTP header its client
sends; its state is seeded through a small admin API beside ``/mcp`` and read back for verification:

    POST   /episodes            {"episode_id", "env_variables", "initial_state"}   seed (or reset)
    GET    /episodes/{id}       the current state (for the verifier; the agent never sees it)
    DELETE /episodes/{id}       free it
    GET    /health

Run as ``python -m toolenvs.local.server --app hotel``: it prints ``READY <port>`` once listening (a free port,
or ``--port``), and exits by itself when its parent process dies.

Any MCP client can drive an app started by hand (MCP Inspector, an IDE, the SDK's own client): a call without
the header acts on the server's default episode, an empty world or, with ``--task KEY``, that task's
``initial_state`` and ``env_variables``, shared by every such client (``GET /episodes/default`` shows it,
``POST /episodes`` with ``"episode_id": "default"`` resets it). The trainer's servers run without one
(``--no-default-episode``): there each episode stays isolated by its header, and a call without it is refused.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import inspect
import json
import os
import socket
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from configkit import environ
from toolenvs.lifeline import exit_with_parent
from toolenvs.outcomes import FAILURE_META, Failure

EPISODE_HEADER = "x-episode-id"
DEFAULT_EPISODE = "default"  # what a call without the header acts on, where the server has one
KEEP_ALIVE_S = 900  # longer than any pause of a trial between two requests on one connection


def tool_signatures(app: ModuleType) -> dict[str, inspect.Signature]:
    """Each tool's signature, read once: the tool's schema and the strict check of its arguments both come from it."""
    return {name: inspect.signature(fn, eval_str=True) for name, fn in app.TOOLS.items()}


def arguments_of(signature: inspect.Signature) -> list[inspect.Parameter]:
    """A tool's arguments: its parameters after the episode state."""
    return list(signature.parameters.values())[1:]


def _episode_tool(app: ModuleType, episodes: dict[str, dict[str, Any]], fn: Any, signature: inspect.Signature, serves_default: bool) -> Any:
    """Wrap ``fn(state, **args)`` as an MCP tool ``fn(**args, ctx)`` acting on the caller's episode state (the
    default episode's, for a call without the header, where the server was started with one)."""
    from toolenvs.mcpcompat import Context, ToolError, error_result, request_headers

    params = arguments_of(signature)

    @functools.wraps(fn)
    async def tool(*args: Any, **kwargs: Any) -> Any:
        # async, so the SDK runs it on the event loop: a sync tool would cost a thread hop per call
        ctx: Context = kwargs.pop("ctx")
        episode_id = request_headers(ctx).get(EPISODE_HEADER)
        if episode_id is None and not serves_default:
            raise ToolError(f"no {EPISODE_HEADER} header, and this server has no default episode: seed one with POST /episodes "
                            f"and send its id in the header (or start the server by hand: python -m toolenvs.local.server --app {app.ENV_KEY})")
        if episode_id is None:
            episode_id = DEFAULT_EPISODE  # a client that knows nothing of our seed route (started by hand)
        if episode_id not in episodes:
            raise ToolError(f"no episode {episode_id!r} on this server: seed it with POST /episodes first")
        try:
            result = fn(episodes[episode_id], *args, **kwargs)
            if inspect.isawaitable(result):
                result = await result
        except app.AppError as exc:  # the agent sees the message; the trajectory gets its kind (in _meta)
            return error_result(str(exc), {FAILURE_META: getattr(exc, "kind", Failure.TOOL_ERROR)})
        return json.dumps(result, separators=(", ", ": "))

    described = [p.replace(annotation=_described(app, fn.__name__, p)) for p in params]
    ctx_param = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)
    tool.__signature__ = signature.replace(parameters=[*described, ctx_param], return_annotation=str)  # type: ignore[attr-defined]
    tool.__annotations__ = {p.name: p.annotation for p in described} | {"ctx": Context, "return": str}
    return tool


def _described(app: ModuleType, tool: str, param: inspect.Parameter) -> Any:
    """The parameter's type with its description from the app's ``PARAMETERS`` (in the tool's JSON schema)."""
    from typing import Annotated

    from pydantic import Field

    description = getattr(app, "PARAMETERS", {}).get(param.name)
    if description is None:
        raise ValueError(f"{app.__name__}.PARAMETERS has no description of {param.name!r} ({tool}): every tool parameter is described")
    return Annotated[param.annotation, Field(description=description)]


def argument_checks(signatures: dict[str, inspect.Signature]) -> dict[str, Any]:
    """Per tool, a strict model of its arguments: JSON types as declared (no ``"5"`` for an integer, no
    ``true`` for a number), every required one present, none unknown. The SDK's own validation coerces."""
    from pydantic import ConfigDict, create_model

    checks = {}
    for name, signature in signatures.items():
        fields: dict[str, Any] = {p.name: (p.annotation, ... if p.default is p.empty else p.default) for p in arguments_of(signature)}
        checks[name] = create_model(f"{name}_arguments", __config__=ConfigDict(strict=True, extra="forbid"), **fields)
    return checks


def argument_problem(tool: str, model: Any, arguments: dict[str, Any]) -> str | None:
    """What is wrong with a call's arguments, in words the agent can act on (None: nothing)."""
    from pydantic import ValidationError

    try:
        model.model_validate(arguments)
    except ValidationError as exc:
        allowed = ", ".join(model.model_fields)
        said = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error["loc"])
            if error["type"] == "extra_forbidden":
                said.append(f"unknown argument {where} (arguments: {allowed})")
            elif error["type"] == "missing":
                said.append(f"missing argument {where}")
            else:
                said.append(f"{where}: {error['msg'].lower()}, got {json.dumps(error['input'])}")
        return f"{tool}: {'; '.join(said)}"
    return None


def build_app(app: ModuleType, default_episode: dict[str, Any] | None = None):
    """The Starlette app: the MCP endpoint at ``/mcp`` plus the episode admin routes; ``default_episode``: the
    state calls without the header act on (None: such calls are refused)."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

    from toolenvs.local.appkit import SeedError, seeded
    from toolenvs.mcpcompat import http_app, make_server

    episodes: dict[str, dict[str, Any]] = {} if default_episode is None else {DEFAULT_EPISODE: default_episode}
    peak = [0]  # most episodes open at once since the server started (the client's cap is measured here)
    signatures = tool_signatures(app)
    server = make_server(app.ENV_KEY, app.ENV_VERSION, tracing=environ.GRPO_ENV_TRACING.get() == "1", check=_checker(signatures))
    for name, fn in app.TOOLS.items():
        server.add_tool(_episode_tool(app, episodes, fn, signatures[name], default_episode is not None), name=name, structured_output=False)

    @server.custom_route("/episodes", methods=["POST"])
    async def seed(request: Request) -> Response:
        try:
            body = json.loads(await request.body())
        except ValueError as exc:
            return _bad_seed(400, f"the body is not JSON ({exc})")
        if problem := _seed_problem(body):
            return _bad_seed(400, problem)
        try:
            state = seeded(app, body.get("env_variables") or {}, body.get("initial_state"))
        except SeedError as exc:
            return _bad_seed(422, f"initial_state does not fit the {app.ENV_KEY} app: {exc}")
        episode_id = str(body["episode_id"])
        episodes[episode_id] = state
        peak[0] = max(peak[0], len(episodes))
        return JSONResponse({"episode_id": episode_id, "state": state})

    @server.custom_route("/episodes/{episode_id}", methods=["GET", "DELETE"])
    async def episode(request: Request) -> Response:
        episode_id = request.path_params["episode_id"]
        if episode_id not in episodes:
            return JSONResponse({"error": f"no episode {episode_id}"}, status_code=404)
        state = episodes.pop(episode_id) if request.method == "DELETE" else episodes[episode_id]
        return JSONResponse(state)

    @server.custom_route("/health", methods=["GET"])
    async def health(request: Request) -> Response:
        return JSONResponse({"env_key": app.ENV_KEY, "episodes": len(episodes), "peak_episodes": peak[0]})

    return http_app(server)


SEED_FIELDS = {"episode_id": (str, int), "env_variables": (dict, type(None)), "initial_state": (dict, type(None))}


def _seed_problem(body: Any) -> str | None:
    """What is wrong with a seed request's body (None: nothing)."""
    if not isinstance(body, dict):
        return f"the body must be a JSON object with {', '.join(SEED_FIELDS)}, got {type(body).__name__}"
    if "episode_id" not in body:
        return "the body has no episode_id"
    unknown = sorted(set(body) - set(SEED_FIELDS))
    if unknown:
        return f"unknown field(s) {', '.join(unknown)}; allowed: {', '.join(SEED_FIELDS)}"
    for name, kinds in SEED_FIELDS.items():
        if name in body and not isinstance(body[name], kinds):
            return f"{name} must be {' or '.join('null' if k is type(None) else k.__name__ for k in kinds)}, got {type(body[name]).__name__}"
    return None


def _bad_seed(status: int, message: str) -> Any:
    from starlette.responses import JSONResponse

    return JSONResponse({"error": f"POST /episodes: {message}"}, status_code=status)


def _checker(signatures: dict[str, inspect.Signature]) -> Any:
    """The server's check of a call's raw arguments: an error result the agent reads (invalid_argument), or None."""
    from toolenvs.mcpcompat import error_result

    models = argument_checks(signatures)

    def check(tool: str, arguments: dict[str, Any]) -> Any:
        if tool not in models:
            return None  # the SDK answers an unknown tool
        problem = argument_problem(tool, models[tool], arguments)
        return error_result(problem, {FAILURE_META: Failure.INVALID_ARGUMENT}) if problem else None

    return check


def _listen_socket(port: int = 0) -> socket.socket:
    # IPPROTO_TCP explicitly: a plain socket() handed to uvicorn costs ~44 ms per request (Nagle).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(512)
    return sock


def default_episode(app: ModuleType, task_key: str | None, tasks_path: str | None) -> tuple[dict[str, Any], str]:
    """The default episode's state, and what it is in words: an empty world, or a task's seeded world."""
    if task_key is None:
        return app.initial_state({}, {}), "an empty world"
    from toolenvs.task import load_tasks

    path = tasks_path or str(Path(__file__).resolve().parents[1] / "data" / f"{app.ENV_KEY}.jsonl")
    tasks = {t.task_key: t for t in load_tasks(path) if t.env_key == app.ENV_KEY}
    if task_key not in tasks:
        shown = ", ".join(list(tasks)[:5])
        raise SystemExit(f"error: --task {task_key}: no {app.ENV_KEY} task of that key in {path} ({len(tasks)} there, e.g. {shown})")
    task = tasks[task_key]
    return app.initial_state(task.env_variables, task.initial_state), f"task {task_key}: {task.prompt}"


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    from toolenvs.local import get_app

    parser = argparse.ArgumentParser(description="Serve a local tool-use app over MCP on 127.0.0.1.")
    parser.add_argument("--app", required=True, help="env_key of the app to serve, or a module path (tests' fault apps)")
    parser.add_argument("--port", type=int, default=0, help="the port on 127.0.0.1 (default: any free one, printed)")
    parser.add_argument("--task", default=None, help="the default episode starts as this task's world (its task_key); default: an empty world")
    parser.add_argument("--tasks", default=None, help="the task file --task is looked up in (default: the app's shipped tasks)")
    parser.add_argument("--no-default-episode", action="store_true", help="refuse calls without the x-episode-id header (the trainer's servers)")
    parser.add_argument("--parent-pid", type=int, default=None, help="exit when this process is gone (default: the parent)")
    args = parser.parse_args(argv)
    app = importlib.import_module(args.app) if "." in args.app else get_app(args.app)
    default, described = (None, "") if args.no_default_episode else default_episode(app, args.task, args.tasks)
    exit_with_parent(args.parent_pid or os.getppid())
    try:
        sock = _listen_socket(args.port)
    except OSError as exc:
        raise SystemExit(f"error: --port {args.port}: cannot listen on 127.0.0.1:{args.port} ({exc.strerror}); choose another, or leave it out") from None
    port = sock.getsockname()[1]
    print(f"READY {port}", flush=True)
    if default is not None:
        print(f"{app.ENV_KEY}: MCP at http://127.0.0.1:{port}/mcp; a call without the {EPISODE_HEADER} header acts on the default "
              f"episode, {described} (its state: GET http://127.0.0.1:{port}/episodes/{DEFAULT_EPISODE})", file=sys.stderr, flush=True)
    # state is in memory only: on stop, waiting long for in-flight calls buys nothing. Idle connections are
    # kept long: a trial's clients idle for as long as a generation batch takes (tens of seconds), and with
    # uvicorn's default of 5 s a request sent as the server closes its connection fails (ReadError): 6 of 384
    # episodes that idled 5 s, none with this.
    config = uvicorn.Config(build_app(app, default), log_level="warning", access_log=False, timeout_graceful_shutdown=1,
                            timeout_keep_alive=KEEP_ALIVE_S)
    uvicorn.Server(config).run(sockets=[sock])
    sys.exit(0)


if __name__ == "__main__":
    main()
