"""A fake of Fleet's hosted service (fleetai.com) on 127.0.0.1, so the real ``fleet-python`` SDK and OpenEnv's
real Fleet code (``envs/fleet_env``) can provision instances, call tools over MCP and run verifiers offline.

Only Fleet's HTTP service is faked; the SDK and OpenEnv run unchanged, pointed here by ``FLEET_BASE_URL``.
An instance is an episode on one of our local apps (``toolenvs.local.server``: MCP at ``/mcp``, state keyed
by the ``x-episode-id`` header, seeded and read through ``/episodes``). What is served, each read in the
code that calls it (SDK 0.2.133 ``fleet/_async/client.py``, ``fleet/_async/verifiers/verifier.py``; OpenEnv
``envs/fleet_env/client.py``, ``mcp_tools.py``, ``core/http_env_client.py``):

    POST   /v1/env/instances                  AsyncFleet.make: seeds an episode, answers InstanceResponse
    GET    /v1/env/instances[/{id}]           AsyncFleet.instances / .instance (and make's duplicate recovery)
    DELETE /v1/env/instances/{id}             AsyncEnv.close: frees the episode
    POST   /v1/env/instances/{id}/heartbeat   AsyncEnv.heartbeat
    GET    /v1/env/{env_key}                  AsyncFleet.environment
    GET    /v1/verifiers/check?sha256=        has this verifier bundle been uploaded?
    POST   /v1/verifiers/execute              runs the bundle's verifier here, in-process (``VerifierEnv``)
    POST   /instances/{id}/api/v1/env/reset   the instance manager's reset (OpenEnv's FleetEnvClient.reset):
                                              re-seeds the episode, answers {"success", "message"}
    POST|DELETE /instances/{id}/mcp           MCP, forwarded to the app's /mcp with x-episode-id (and the
    POST|DELETE /instances/{id}/api/v1/mcp    same for the aggregator path); GET answers 405, as a server
                                              without a standalone SSE stream does

Every route wants ``Authorization: Bearer <api_key>`` (401 otherwise, recorded in ``bad_auth``); any other
path answers 404 and is recorded in ``unexpected``. Note the SDK's HTTP client retries 404, 429 and 5xx
three times at the transport, so the fake answers "not there yet" states (an unknown verifier bundle) with
200 and ``success: false`` as the SDK expects, never 404.

Leaves out: TTLs and heartbeat deadlines (recorded, never enforced), the manager's SQL/resources API (the
SDK's ``env.db()``: OpenEnv never calls it), diffs, and Fleet's verifier helpers beyond the query builder
(``diff``/``expect_only_v2`` raise AttributeError, i.e. an errored verifier).
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import copy
import hashlib
import inspect
import io
import json
import pickle
import re
import socket
import string
import threading
import time
import traceback
import uuid
import zipfile
from collections.abc import Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

EPISODE_HEADER = "x-episode-id"
MCP_ENDPOINTS = ("mcp", "api/v1/mcp")  # OpenEnv's tool_use URLs: {root}mcp and {root}api/v1/mcp
TASK_SUCCESSFUL_SCORE = 1  # fleet.verifiers.code
TASK_FAILED_SCORE = 0
START_TIMEOUT_S = 10.0
# request headers not forwarded to the app (hop-by-hop, ours, or the client's key); the rest pass through
_DROP_REQUEST = {"host", "authorization", "content-length", "connection", "keep-alive", "transfer-encoding", "te", "upgrade",
                 "accept-encoding", "proxy-authorization", "proxy-connection", EPISODE_HEADER}
_DROP_RESPONSE = {"content-length", "connection", "keep-alive", "transfer-encoding", "date", "server"}


def _now() -> str:
    return datetime.now(UTC).isoformat()


# --- the verifier runtime -------------------------------------------------------------------------------


def state_rows(state: Mapping[str, Any], table: str) -> list[dict[str, Any]]:
    """A state collection as table rows: ``{id: row}`` gives rows with ``id`` (a row's own ``id`` wins), a
    list of dicts stays rows; anything else (a scalar like ``user``) is not a table."""
    if table not in state:
        raise KeyError(f"no table {table!r} (tables: {sorted(_tables(state))})")
    value = state[table]
    if isinstance(value, Mapping) and all(isinstance(row, Mapping) for row in value.values()):
        return [{"id": key, **copy.deepcopy(dict(row))} for key, row in value.items()]
    if isinstance(value, list) and all(isinstance(row, Mapping) for row in value):
        return [copy.deepcopy(dict(row)) for row in value]
    raise KeyError(f"{table!r} is not a table (a {type(value).__name__})")


def _tables(state: Mapping[str, Any]) -> list[str]:
    names = []
    for name in state:
        try:
            state_rows(state, name)
        except KeyError:
            continue
        names.append(name)
    return names


def _like(pattern: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern), re.IGNORECASE | re.DOTALL)


class Query:
    """The part of Fleet's ``QueryBuilder`` (``fleet.verifiers.db``) verifiers use, over rows of a JSON
    state; each call returns a new query, as chaining in the exported verifiers expects."""

    def __init__(self, table: str, rows: list[dict[str, Any]]):
        self.table = table
        self._rows = rows
        self._filters: list[Any] = []
        self._columns: tuple[str, ...] | None = None
        self._limit: int | None = None
        self._sort: tuple[str, bool] | None = None

    def _with(self, **changes: Any) -> Query:
        query = copy.copy(self)
        query._filters = list(self._filters)
        for name, value in changes.items():
            setattr(query, name, value)
        return query

    def _where(self, test: Any) -> Query:
        query = self._with()
        query._filters.append(test)
        return query

    def eq(self, column: str, value: Any) -> Query:
        return self._where(lambda r: r.get(column) == value)

    def neq(self, column: str, value: Any) -> Query:
        return self._where(lambda r: r.get(column) != value)

    def gt(self, column: str, value: Any) -> Query:
        return self._where(lambda r: r.get(column) is not None and r[column] > value)

    def gte(self, column: str, value: Any) -> Query:
        return self._where(lambda r: r.get(column) is not None and r[column] >= value)

    def lt(self, column: str, value: Any) -> Query:
        return self._where(lambda r: r.get(column) is not None and r[column] < value)

    def lte(self, column: str, value: Any) -> Query:
        return self._where(lambda r: r.get(column) is not None and r[column] <= value)

    def in_(self, column: str, values: list[Any]) -> Query:
        return self._where(lambda r: r.get(column) in list(values))

    def not_in(self, column: str, values: list[Any]) -> Query:
        return self._where(lambda r: r.get(column) not in list(values))

    def is_null(self, column: str) -> Query:
        return self._where(lambda r: r.get(column) is None)

    def not_null(self, column: str) -> Query:
        return self._where(lambda r: r.get(column) is not None)

    def ilike(self, column: str, pattern: str) -> Query:
        regex = _like(pattern)
        return self._where(lambda r: r.get(column) is not None and regex.fullmatch(str(r[column])) is not None)

    def select(self, *columns: str) -> Query:
        return self._with(_columns=columns or None)

    def limit(self, n: int) -> Query:
        return self._with(_limit=int(n))

    def sort(self, column: str, desc: bool = False) -> Query:
        return self._with(_sort=(column, desc))

    def all(self) -> list[dict[str, Any]]:
        rows = [r for r in self._rows if all(test(r) for test in self._filters)]
        if self._sort is not None:
            column, desc = self._sort
            rows.sort(key=lambda r: (r.get(column) is None, r.get(column)), reverse=desc)
        if self._limit is not None:
            rows = rows[: self._limit]
        if self._columns is not None:
            rows = [{c: r.get(c) for c in self._columns} for r in rows]
        return copy.deepcopy(rows)

    def first(self) -> dict[str, Any] | None:
        rows = self.limit(1).all()
        return rows[0] if rows else None

    def count(self) -> int:
        return len(self.all())

    def assert_exists(self) -> Query:
        if not self.all():
            raise AssertionError(f"expected a row in {self.table!r}, found none")
        return self

    def assert_none(self) -> Query:
        if self.all():
            raise AssertionError(f"expected no row in {self.table!r}, found {len(self.all())}")
        return self


class Database:
    """``env.db(name)``: a snapshot of an episode's state (``seed``: as provisioned; ``current``: read live)."""

    def __init__(self, name: str, state: Mapping[str, Any]):
        self.name = name
        self._state = state

    def table(self, name: str) -> Query:
        return Query(name, state_rows(self._state, name))

    def tables(self) -> list[str]:
        return _tables(self._state)


class _Instance:
    def load(self) -> None:
        """Fleet's ``env.instance.load()`` fetches the resource list; the snapshots here are already loaded."""


class VerifierEnv:
    """The ``env`` a verifier function receives: ``env.instance.load()``, ``env.db("seed" | "current")``."""

    def __init__(self, instance_id: str, env_key: str, seed: Mapping[str, Any], current: Mapping[str, Any]):
        self.instance_id = instance_id
        self.env_key = env_key
        self.instance = _Instance()
        self._dbs = {"seed": Database("seed", seed), "current": Database("current", current)}

    def db(self, name: str = "current") -> Database:
        if name not in self._dbs:
            raise KeyError(f"Unknown database {name!r}. Available: {list(self._dbs)}")
        return self._dbs[name]


def _clean_verifier_code(code: str) -> str:
    """As the SDK does before running one (``verifier_from_string``): no ``@verifier``, no fleet imports."""
    code = re.sub(r"@verifier\([^)]*\)\s*\n", "", code)
    for pattern in (r"^from fleet\.verifiers.*import.*$\n?", r"^from fleet import verifier.*$\n?", r"^import fleet\.verifiers.*$\n?", r"^import fleet$\n?"):
        code = re.sub(pattern, "", code, flags=re.MULTILINE)
    return code


def _normalize_text(value: str) -> str:
    return "".join(value.lower().translate(str.maketrans(string.punctuation, " " * len(string.punctuation))).split())


def _helpers() -> dict[str, Any]:
    """The helper names Fleet's verifier namespace gives (``fleet/verifiers/local_executor.py``)."""

    def blob(content: Any) -> str:
        return json.dumps(content, sort_keys=True) if isinstance(content, dict | list) else str(content)

    def extract_numbers(text: str) -> list[float]:
        return [float(n) for n in re.findall(r"-?\d+\.?\d*", text.replace(",", ""))]

    def contains_number(text: str, target: Any) -> bool:
        try:
            return float(str(target).replace(",", "")) in extract_numbers(text)
        except ValueError:
            return False

    return {
        "normalized_contains": lambda target, content: _normalize_text(target) in _normalize_text(blob(content)),
        "normalized_string_comparison": lambda target, content: _normalize_text(target) == _normalize_text(blob(content)),
        "extract_numbers": extract_numbers,
        "contains_number": contains_number,
    }


def run_verifier(code: str, function_name: str | None, env: VerifierEnv, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Define and call a verifier: ``{"success", "result", "error", "stdout"}``; an exception (in the code or
    the call) is ``success: false`` with ``error = {"type", "message", "traceback"}`` (what the SDK reads)."""
    out = io.StringIO()

    def captured_print(*values: Any, sep: str | None = " ", end: str | None = "\n", file: Any = None, flush: bool = False) -> None:
        builtins.print(*values, sep=sep, end=end, file=out if file is None else file, flush=flush)

    namespace: dict[str, Any] = {
        "__builtins__": builtins,
        "__name__": "verifier",
        "print": captured_print,  # stdout per run, not the process's (runs share it)
        "TASK_SUCCESSFUL_SCORE": TASK_SUCCESSFUL_SCORE,
        "TASK_FAILED_SCORE": TASK_FAILED_SCORE,
        "Environment": VerifierEnv,
        "json": json,
        "re": re,
        "string": string,
        **_helpers(),
    }
    try:
        exec(compile(_clean_verifier_code(code), "verifier.py", "exec"), namespace)
        defined = [v for v in namespace.values() if inspect.isfunction(v) and v.__code__.co_filename == "verifier.py"]
        func = namespace.get(function_name) if function_name else (defined[0] if defined else None)
        if not inspect.isfunction(func):
            raise ValueError(f"no function {function_name!r} defined in the verifier bundle")
        result = func(env, *args, **kwargs)
        if inspect.isawaitable(result):
            result = asyncio.run(result)  # a worker thread: no loop running here
        return {"success": True, "result": result, "error": None, "stdout": out.getvalue()}
    except Exception as exc:
        error = {"type": type(exc).__name__, "message": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        return {"success": False, "result": None, "error": error, "stdout": out.getvalue()}


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


# --- the service ----------------------------------------------------------------------------------------


@dataclass
class FakeInstance:
    instance_id: str
    env_key: str
    version: str
    app_url: str
    env_variables: dict[str, Any]
    initial_state: dict[str, Any]
    seed: dict[str, Any]
    data_key: str | None = None
    data_version: str | None = None
    ttl_seconds: int | None = None
    run_id: str | None = None
    heartbeat_interval: int | None = None
    region: str = "us-west-1"
    status: str = "running"
    created_at: str = field(default_factory=_now)
    updated_at: str = field(default_factory=_now)
    terminated_at: str | None = None
    resets: int = 0

    @property
    def episode_id(self) -> str:
        return self.instance_id


class FakeFleet:
    """``with FakeFleet({"hotel": app_url}, datasets, api_key) as fake:`` then ``FLEET_BASE_URL=fake.base_url``.

    ``apps``: env_key -> base URL of a local app server; ``datasets``: data_key (no ``:version``) -> the
    ``initial_state`` an instance of it is seeded with (none given: ``{}``; an unknown one: 400).
    ``mcp_endpoints``: which of ``mcp`` and ``api/v1/mcp`` answer (the other 404s, as on an image without it).
    Counters, read from any thread: ``created``, ``deleted``, ``open_instances``, ``peak_instances``,
    ``resets``, ``heartbeats``; logs: ``requests``, ``make_requests``, ``verifier_runs``, ``bad_auth``,
    ``unexpected`` (a test asserts the last two empty).
    """

    def __init__(self, apps: Mapping[str, str], datasets: Mapping[str, Mapping[str, Any]] | None = None, api_key: str = "fake-fleet-key",
                 *, mcp_endpoints: tuple[str, ...] = MCP_ENDPOINTS, team_id: str = "team-fake"):
        unknown = set(mcp_endpoints) - set(MCP_ENDPOINTS)
        if unknown:
            raise ValueError(f"mcp_endpoints must be among {MCP_ENDPOINTS}, got {sorted(unknown)}")
        self.apps = {key: url.rstrip("/") for key, url in apps.items()}
        self.datasets = {key: copy.deepcopy(dict(value)) for key, value in (datasets or {}).items()}
        self.api_key = api_key
        self.mcp_endpoints = tuple(mcp_endpoints)
        self.team_id = team_id
        self.instances: dict[str, FakeInstance] = {}
        self.created = 0
        self.deleted = 0
        self.peak_instances = 0
        self.resets = 0
        self.heartbeats = 0
        self.requests: list[str] = []
        self.make_requests: list[dict[str, Any]] = []
        self.verifier_runs: list[dict[str, Any]] = []
        self.bad_auth: list[str] = []
        self.unexpected: list[str] = []
        self._bundles: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self._http: httpx.AsyncClient | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self.port: int | None = None

    # --- lifecycle -------------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("FakeFleet is not started")
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeFleet:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(512)
        self._socket, self.port = sock, sock.getsockname()[1]
        # keep-alive longer than any pause of a test (OpenEnv sleeps 8 s before listing tools, up to 12 s
        # between verifier attempts): uvicorn's 5 s default races the SDK's pooled connections
        config = uvicorn.Config(self._build_app(), log_level="warning", access_log=False, lifespan="on",
                                timeout_keep_alive=900, timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, name="fake-fleet", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the fake Fleet server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None

    def __enter__(self) -> FakeFleet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- what tests read -------------------------------------------------------------------------------

    @property
    def open_instances(self) -> int:
        with self._lock:
            return sum(1 for i in self.instances.values() if i.status == "running")

    def open_ids(self) -> set[str]:
        with self._lock:
            return {i.instance_id for i in self.instances.values() if i.status == "running"}

    @property
    def wrong_key_seen(self) -> bool:
        return bool(self.bad_auth)

    def instance_url(self, instance_id: str) -> str:
        return f"{self.base_url}/instances/{instance_id}/"

    # --- the app ---------------------------------------------------------------------------------------

    def _build_app(self) -> Starlette:
        @asynccontextmanager
        async def lifespan(app: Starlette):
            # the app servers are on 127.0.0.1: never through a proxy from the environment
            self._http = httpx.AsyncClient(trust_env=False, timeout=httpx.Timeout(120.0),
                                           limits=httpx.Limits(max_connections=256, max_keepalive_connections=64))
            try:
                yield
            finally:
                await self._http.aclose()
                self._http = None

        auth = self._authenticated
        routes = [
            Route("/v1/env/instances", auth(self._make), methods=["POST"]),
            Route("/v1/env/instances", auth(self._list_instances), methods=["GET"]),
            Route("/v1/env/instances/{instance_id}", auth(self._get_instance), methods=["GET"]),
            Route("/v1/env/instances/{instance_id}", auth(self._delete_instance), methods=["DELETE"]),
            Route("/v1/env/instances/{instance_id}/heartbeat", auth(self._heartbeat), methods=["POST"]),
            Route("/v1/verifiers/check", auth(self._check_bundle), methods=["GET"]),
            Route("/v1/verifiers/execute", auth(self._execute_verifier), methods=["POST"]),
            Route("/v1/env/{env_key}", auth(self._environment), methods=["GET"]),
            Route("/instances/{instance_id}/api/v1/env/reset", auth(self._manager_reset), methods=["POST"]),
            Route("/instances/{instance_id}/mcp", auth(self._mcp("mcp")), methods=["GET", "POST", "DELETE"]),
            Route("/instances/{instance_id}/api/v1/mcp", auth(self._mcp("api/v1/mcp")), methods=["GET", "POST", "DELETE"]),
            Route("/{path:path}", self._unexpected, methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]),
        ]
        return Starlette(routes=routes, lifespan=lifespan)

    def _authenticated(self, handler: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            where = f"{request.method} {request.url.path}"
            with self._lock:
                self.requests.append(where)
            if request.headers.get("authorization") != f"Bearer {self.api_key}":
                with self._lock:
                    self.bad_auth.append(where)
                # not "connection"/"timeout" & co: OpenEnv retries a make() whose error names those (30 s)
                return JSONResponse({"detail": "Invalid API key"}, status_code=401)
            return await handler(request)

        return endpoint

    async def _unexpected(self, request: Request) -> Response:
        where = f"{request.method} {request.url.path}"
        with self._lock:
            self.requests.append(where)
            self.unexpected.append(where)
        return JSONResponse({"detail": f"the fake Fleet does not serve {where}"}, status_code=404)

    def _lookup(self, request: Request, running: bool = True) -> FakeInstance | Response:
        instance_id = request.path_params["instance_id"]
        with self._lock:
            instance = self.instances.get(instance_id)
            if instance is None or (running and instance.status != "running"):
                state = "unknown" if instance is None else instance.status
                self.unexpected.append(f"{request.method} {request.url.path} ({state} instance)")
                return JSONResponse({"detail": f"Instance '{instance_id}' not found ({state})"}, status_code=404)
        return instance

    def _instance_json(self, instance: FakeInstance) -> dict[str, Any]:
        root = self.instance_url(instance.instance_id)
        manager = f"{root}api/v1/env"
        return {
            "instance_id": instance.instance_id,
            "env_key": instance.env_key,
            "version": instance.version,
            "status": instance.status,
            "subdomain": instance.instance_id,
            "created_at": instance.created_at,
            "updated_at": instance.updated_at,
            "terminated_at": instance.terminated_at,
            "team_id": self.team_id,
            "region": instance.region,
            "env_variables": instance.env_variables,
            "data_key": instance.data_key,
            "data_version": instance.data_version,
            "urls": {
                "root": root,
                "app": [root],
                "api": None,
                "health": None,
                "api_docs": None,
                "manager": {
                    "api": manager,
                    "docs": f"{manager}/docs",
                    "reset": f"{manager}/reset",
                    "diff": f"{manager}/diff",
                    "snapshot": f"{manager}/snapshot",
                    "execute_verifier_function": f"{manager}/execute_verifier_function",
                    "execute_verifier_function_with_upload": f"{manager}/execute_verifier_function_with_upload",
                },
            },
            "health": instance.status == "running",
            "run_id": instance.run_id,
            "profile_id": None,
            "heartbeat_interval": instance.heartbeat_interval,
            "heartbeat_region": None,
        }

    async def _seed(self, instance: FakeInstance) -> dict[str, Any]:
        """(Re)seed the instance's episode on its app: the state as seeded."""
        assert self._http is not None
        body = {"episode_id": instance.episode_id, "env_variables": instance.env_variables, "initial_state": instance.initial_state}
        response = await self._http.post(f"{instance.app_url}/episodes", json=body)
        response.raise_for_status()
        return response.json()["state"]

    async def _current_state(self, instance: FakeInstance) -> dict[str, Any]:
        assert self._http is not None
        response = await self._http.get(f"{instance.app_url}/episodes/{instance.episode_id}")
        response.raise_for_status()
        return response.json()

    # --- Fleet API -------------------------------------------------------------------------------------

    async def _make(self, request: Request) -> Response:
        body = await request.json()
        with self._lock:
            self.make_requests.append(copy.deepcopy(body))
        env_key = body.get("env_key")
        app_url = self.apps.get(env_key)
        if app_url is None:  # the SDK's FleetEnvironmentNotFoundError reads "environment ... not found"
            return JSONResponse({"detail": f"Environment '{env_key}' not found"}, status_code=400)
        data_key = body.get("data_key")
        data_key = data_key.split(":", 1)[0] if data_key else None
        if data_key is not None and data_key not in self.datasets:
            return JSONResponse({"detail": f"Data key '{data_key}' is not a data set of this team"}, status_code=400)
        instance = FakeInstance(
            instance_id=f"fake-{uuid.uuid4().hex[:12]}",
            env_key=env_key,
            version=body.get("env_version") or "v1",
            app_url=app_url,
            env_variables=dict(body.get("env_variables") or {}),
            initial_state=copy.deepcopy(self.datasets.get(data_key, {})) if data_key else {},
            seed={},
            data_key=data_key,
            data_version=body.get("data_version"),
            ttl_seconds=body.get("ttl_seconds"),
            run_id=body.get("run_id"),
            heartbeat_interval=body.get("heartbeat_interval"),
            region=body.get("region") or "us-west-1",
        )
        try:
            instance.seed = await self._seed(instance)
        except (httpx.HTTPError, KeyError, ValueError) as exc:
            # 400, not 5xx (the SDK retries those) and no "connection"/"timeout" (OpenEnv retries those for 30 s)
            return JSONResponse({"detail": f"the fake Fleet could not seed env '{env_key}' on its app ({type(exc).__name__})"}, status_code=400)
        with self._lock:
            self.instances[instance.instance_id] = instance
            self.created += 1
            self.peak_instances = max(self.peak_instances, sum(1 for i in self.instances.values() if i.status == "running"))
        return JSONResponse(self._instance_json(instance))

    async def _list_instances(self, request: Request) -> Response:
        status = request.query_params.get("status")
        with self._lock:
            found = [i for i in self.instances.values() if status is None or i.status == status]
        return JSONResponse([self._instance_json(i) for i in found])

    async def _get_instance(self, request: Request) -> Response:
        instance = self._lookup(request, running=False)
        return instance if isinstance(instance, Response) else JSONResponse(self._instance_json(instance))

    async def _delete_instance(self, request: Request) -> Response:
        instance = self._lookup(request, running=False)
        if isinstance(instance, Response):
            return instance
        with self._lock:
            first = instance.status == "running"
            if first:
                instance.status, instance.terminated_at = "stopped", _now()
                instance.updated_at = instance.terminated_at
                self.deleted += 1
        if first:
            assert self._http is not None
            try:
                await self._http.delete(f"{instance.app_url}/episodes/{instance.episode_id}")
            except httpx.HTTPError:
                pass  # the app is gone: so is the episode
        return JSONResponse(self._instance_json(instance))

    async def _heartbeat(self, request: Request) -> Response:
        instance = self._lookup(request)
        if isinstance(instance, Response):
            return instance
        with self._lock:
            self.heartbeats += 1
        interval = instance.heartbeat_interval
        return JSONResponse({"success": True, "instance_id": instance.instance_id, "last_heartbeat": _now(),
                             "deadline_timestamp": time.time() + interval if interval else None, "interval_seconds": interval})

    async def _environment(self, request: Request) -> Response:
        env_key = request.path_params["env_key"]
        if env_key not in self.apps:
            return JSONResponse({"detail": f"Environment '{env_key}' not found"}, status_code=400)
        return JSONResponse({"env_key": env_key, "name": env_key, "description": f"local app {env_key} (fake Fleet)",
                             "default_version": "v1", "versions": {"v1": "v1"}})

    # --- verifiers -------------------------------------------------------------------------------------

    async def _check_bundle(self, request: Request) -> Response:
        sha = request.query_params.get("sha256", "")
        with self._lock:
            known = sha in self._bundles
        # unknown: 200 with success false, as the SDK reads it (a 404 would cost its transport's 3 retries)
        return JSONResponse({"key": None, "version": 1 if known else None, "success": known})

    async def _execute_verifier(self, request: Request) -> Response:
        started = time.monotonic()
        body = await request.json()
        sha = body.get("sha256") or ""
        if body.get("bundle"):
            bundle = base64.b64decode(body["bundle"])
            computed = hashlib.sha256(bundle).hexdigest()
            if sha and sha != computed:
                return JSONResponse({"detail": f"bundle sha256 {computed} does not match the given {sha}"}, status_code=400)
            sha, cache_hit = computed, False
            with self._lock:
                self._bundles[sha] = bundle
        else:
            with self._lock:
                bundle = self._bundles.get(sha)
            if bundle is None:  # the SDK then uploads it ("not found" in the error)
                return JSONResponse({"detail": f"Bundle not found: {sha}"}, status_code=404)
            cache_hit = True
        try:
            with zipfile.ZipFile(io.BytesIO(bundle)) as archive:
                code = archive.read("verifier.py").decode("utf-8")
        except (zipfile.BadZipFile, KeyError) as exc:
            return JSONResponse({"detail": f"bad verifier bundle: {exc}"}, status_code=400)

        args_array = list(body.get("args_array") or [])
        kwargs: dict[str, Any] = {}
        if body.get("args"):  # cloudpickle of {"args": (None, *args), "kwargs": {...}}: builtins only, plain pickle reads it
            kwargs = dict(pickle.loads(base64.b64decode(body["args"])).get("kwargs") or {})
        env_refs = [a for a in args_array if isinstance(a, dict) and set(a) == {"env"}]
        positional = [a for a in args_array if a not in env_refs]
        instance_id = env_refs[-1]["env"] if env_refs else None
        with self._lock:
            instance = self.instances.get(instance_id) if instance_id else None
        if instance is None or instance.status != "running":
            outcome = {"success": False, "result": None, "stdout": "",
                       "error": {"type": "RuntimeError", "message": f"instance {instance_id!r} is not running", "traceback": ""}}
        else:
            try:
                current = await self._current_state(instance)
            except httpx.HTTPError as exc:
                outcome = {"success": False, "result": None, "stdout": "",
                           "error": {"type": type(exc).__name__, "message": f"could not read the current state: {exc}", "traceback": ""}}
            else:
                env = VerifierEnv(instance.instance_id, instance.env_key, copy.deepcopy(instance.seed), current)
                timeout = float(body.get("timeout") or 60)
                try:
                    outcome = await asyncio.wait_for(
                        asyncio.to_thread(run_verifier, code, body.get("function_name"), env, positional, kwargs), timeout)
                except TimeoutError:
                    outcome = {"success": False, "result": None, "stdout": "",
                               "error": {"type": "TimeoutError", "message": f"verifier timed out after {timeout:.0f}s", "traceback": ""}}
        execution_id = f"exec-{uuid.uuid4().hex[:12]}"
        response = {
            "key": body.get("key"),
            "version": 1,
            "success": outcome["success"],
            "result": _jsonable(outcome["result"]),
            "verifier_id": f"verifier-{sha[:12]}",
            "execution_id": execution_id,
            "error": outcome["error"],
            "execution_time_ms": int((time.monotonic() - started) * 1000),
            "bundle_cache_hit": cache_hit,
            "stdout": outcome["stdout"],
        }
        with self._lock:
            self.verifier_runs.append({"instance_id": instance_id, "function_name": body.get("function_name"), "kwargs": kwargs,
                                       "success": outcome["success"], "result": response["result"], "error": outcome["error"],
                                       "stdout": outcome["stdout"], "execution_id": execution_id})
        return JSONResponse(response)

    # --- the instance: manager and MCP -----------------------------------------------------------------

    async def _manager_reset(self, request: Request) -> Response:
        """The instance manager's POST /reset (the SDK's ResetResponse: success, message): back to the seed."""
        instance = self._lookup(request)
        if isinstance(instance, Response):
            return instance
        try:
            seed = await self._seed(instance)
        except (httpx.HTTPError, KeyError, ValueError) as exc:
            return JSONResponse({"success": False, "message": f"reset failed: {type(exc).__name__}"}, status_code=500)
        with self._lock:
            instance.seed = seed
            instance.resets += 1
            instance.updated_at = _now()
            self.resets += 1
        return JSONResponse({"success": True, "message": "Environment reset to its seed"})

    def _mcp(self, endpoint: str) -> Any:
        async def proxy(request: Request) -> Response:
            instance = self._lookup(request)
            if isinstance(instance, Response):
                return instance
            if endpoint not in self.mcp_endpoints:
                return JSONResponse({"detail": "Not Found"}, status_code=404)  # an image without this endpoint
            if request.method == "GET":  # no standalone SSE stream, as the spec lets a server answer
                return Response(status_code=405, headers={"allow": "POST, DELETE"})
            return await self._forward(request, instance)

        return proxy

    async def _forward(self, request: Request, instance: FakeInstance) -> Response:
        assert self._http is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROP_REQUEST}
        headers[EPISODE_HEADER] = instance.episode_id
        upstream_request = self._http.build_request(request.method, f"{instance.app_url}/mcp", headers=headers, content=await request.body())
        try:
            upstream = await self._http.send(upstream_request, stream=True)
        except httpx.HTTPError as exc:
            return JSONResponse({"detail": f"the env's MCP server did not answer ({type(exc).__name__})"}, status_code=502)
        out_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _DROP_RESPONSE}
        if not upstream.headers.get("content-type", "").startswith("text/event-stream"):
            try:
                content = await upstream.aread()
            finally:
                await upstream.aclose()
            return Response(content, status_code=upstream.status_code, headers=out_headers)

        async def relay():
            try:
                async for chunk in upstream.aiter_raw():
                    yield chunk
            finally:
                with anyio.CancelScope(shield=True):  # also when the client went away mid-stream
                    await upstream.aclose()

        return StreamingResponse(relay(), status_code=upstream.status_code, headers=out_headers, background=BackgroundTask(upstream.aclose))


# --- tasks in Fleet's export form ------------------------------------------------------------------------

_BOOKING_VERIFIER = '''def validate_task(env: Environment, final_answer: str | None = None) -> int:
    """Exactly one new active booking of the hotel, date and nights asked for; no seeded booking changed."""
    expected = __EXPECTED__
    error_accumulator = []
    success_accumulator = []

    env.instance.load()
    seed = env.db("seed")
    current = env.db("current")
__FAILURE__
    seed_ids = {row["id"] for row in seed.table("bookings").select("id").all()}
    new_bookings = [row for row in current.table("bookings").all() if row["id"] not in seed_ids]
    if len(new_bookings) != 1:
        error_accumulator.append(f"[X] Expected 1 new booking, but found {len(new_bookings)}")
    else:
        success_accumulator.append("[C] 1 new booking was created")
        booking = new_bookings[0]
        for field, value in expected.items():
            if booking.get(field) != value:
                error_accumulator.append(f"[X] Expected {field} {value!r}, but got {booking.get(field)!r}")
            else:
                success_accumulator.append(f"[C] {field} is {value!r}")
        if booking.get("status") != "active":
            error_accumulator.append(f"[X] Expected status 'active', but got {booking.get('status')!r}")

    for before in seed.table("bookings").all():
        after = current.table("bookings").eq("id", before["id"]).first()
        if after is None or after["status"] != before["status"]:
            error_accumulator.append(f"[X] Seeded booking {before['id']} changed")

    print(f">>> ERROR_ACCUMULATOR >>>\\n{error_accumulator}\\n<<< ERROR_ACCUMULATOR <<<")
    print(f">>> SUCCESS_ACCUMULATOR >>>\\n{success_accumulator}\\n<<< SUCCESS_ACCUMULATOR <<<")
    return TASK_FAILED_SCORE if error_accumulator else TASK_SUCCESSFUL_SCORE
'''

FAILURES = {
    None: "",
    # the verifier raises: Fleet answers success false (OpenEnv: retried 3 + 6 + 12 s, then reward None)
    "raise": '    raise RuntimeError("injected verifier failure (fake Fleet)")\n',
    # the judge wrapper's "JUDGE ERROR:" line with a fabricated grade (OpenEnv: retried the same, then None)
    "judge_error": '    print("JUDGE ERROR: rate limit exceeded (injected by the fake Fleet)")\n    return TASK_FAILED_SCORE\n',
}


def fleet_data_id(task: Any) -> str:
    return f"{task.task_key}-data"


def fleet_form(task: Any, failure: str | None = None) -> dict[str, Any]:
    """One of our hotel tasks with a ``booking_made`` verifier, written as Fleet exports tasks (the keys of
    SkyRL's ``fleet_booking_sample.json`` plus ``env_variables``), its verifier a Fleet-style
    ``validate_task`` over the seed and current ``bookings`` tables. ``failure``: ``"raise"`` (the verifier
    errors) or ``"judge_error"`` (it prints ``JUDGE ERROR:``), for tests of OpenEnv's ``None`` reward."""
    if failure not in FAILURES:
        raise ValueError(f"failure must be one of {sorted(map(str, FAILURES))}, got {failure!r}")
    spec = task.verifier or {}
    if spec.get("type") != "booking_made":
        raise ValueError(f"task {task.task_key}: only hotel booking_made tasks have a Fleet form here (got {spec.get('type')!r})")
    expected = {"hotel_id": spec["hotel_id"], "check_in": spec["check_in"], "nights": int(spec["nights"])}
    code = _BOOKING_VERIFIER.replace("__EXPECTED__", repr(expected)).replace("__FAILURE__\n", FAILURES[failure])
    version = task.env_version or "1"
    return {
        "key": task.task_key if failure is None else f"{task.task_key}-{failure}",
        "prompt": task.prompt,
        "env_id": task.env_key,
        "version": version if version.startswith("v") else f"v{version}",
        "data_id": fleet_data_id(task),
        "data_version": "v1",
        "env_variables": dict(task.env_variables),
        "verifier_func": code,
        "task_modality": "tool_use",
    }


def fleet_dataset(task: Any) -> dict[str, dict[str, Any]]:
    """The ``datasets`` entry for ``fleet_form(task)``: its data_id -> the task's initial_state."""
    return {fleet_data_id(task): copy.deepcopy(task.initial_state)}


def openenv_task_config(record: Mapping[str, Any]) -> dict[str, Any]:
    """A Fleet export record as the ``task_config`` OpenEnv's ``FleetTaskEnv`` reads (its own names: it
    reads ``data_key``, which SkyRL's mapping of the export, ``key``/``env_id``/``version`` only, leaves out)."""
    return {
        "task_key": record["key"],
        "prompt": record["prompt"],
        "env_key": record["env_id"],
        "env_version": record.get("version"),
        "data_key": record.get("data_id"),
        "data_version": record.get("data_version"),
        "env_variables": dict(record.get("env_variables") or {}),
        "verifier_func": record["verifier_func"],
        "task_modality": record.get("task_modality", "tool_use"),
    }
