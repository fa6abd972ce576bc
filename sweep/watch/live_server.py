"""The live sweep page's HTTP side: a stdlib server on a daemon thread of the driver, on loopback unless told
otherwise, and who may read it; also the flags that say how a sweep is watched (``Watch``).

Serves ``/`` (the page) and ``/state.json`` (what the page polls: its version, and whether the sweep ended).
Each open page names itself with ``?viewer=`` on both, so that at the end the driver waits for every open page
to load the final report, two tabs on one machine included (a request without a name counts as its address's).
A client on loopback (the driver's machine, or an SSH tunnel's end) is always served. Bound to any other
address (``--live-host``), the server needs ``GRPO_SWEEP_LIVE_TOKEN`` and refuses, with 403, a client from
elsewhere that does not present it (``?token=`` once, kept as a cookie, or ``Authorization: Bearer``).
Leaves out TLS and accounts: beyond one machine, reach the page through an SSH tunnel (README).
Imports nothing beyond the standard library, so ``sweep run`` can check the flags before anything starts.
"""

from __future__ import annotations

import errno
import hmac
import ipaddress
import json
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Protocol
from urllib.parse import parse_qs, urlsplit

from configkit import environ

DASHBOARD_PORT = 8265  # Ray's own default
LIVE_PORT = 8266
COOKIE = "grpo_live_token"
POLL_S = 2.0  # how often an open page asks whether there is something new
FORGET_S = 30 * POLL_S  # a page silent this long is closed: the server forgets it


@dataclass(frozen=True)
class Watch:
    """How a sweep can be watched while it runs: Ray's dashboard and the live page (``sweep run``'s flags)."""

    dashboard: bool = True
    dashboard_port: int = DASHBOARD_PORT
    live: bool = True
    live_host: str = "127.0.0.1"
    live_port: int = LIVE_PORT  # 0: any free port


def default_watch() -> Watch:
    """The flags' defaults: the dashboard is on unless ``GRPO_SWEEP_DASHBOARD=0`` (the tests set it)."""
    return Watch(dashboard=environ.GRPO_SWEEP_DASHBOARD.get("1") != "0")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def bind_problem(host: str, token: str | None) -> str | None:
    """Why the live page may not or cannot be bound to ``host`` (None: it may): anywhere but loopback needs a token,
    and the address must be one this machine can listen on (tried now, on any free port, before anything starts)."""
    if not (is_loopback(host) or token):
        return (f"--live-host {host}: the live page would be open to other machines; set {environ.GRPO_SWEEP_LIVE_TOKEN.name} "
                "(clients from elsewhere must present it), or keep it on 127.0.0.1 and reach it through an SSH tunnel")
    try:
        with socket.socket(LiveServer.address_family, socket.SOCK_STREAM) as probe:  # the server's own family (IPv4)
            probe.bind((host, 0))
    except (OSError, UnicodeError) as exc:
        return (f"--live-host {host}: this machine cannot listen there ({getattr(exc, 'strerror', None) or type(exc).__name__}); "
                "give one of its own IPv4 addresses or names (0.0.0.0 for all of them), or 127.0.0.1")
    return None


def bind_or_any(bind: Callable[[int], object], port: int) -> bool:
    """``bind(port)``, or ``bind(0)`` (any free port) when ``port`` is taken; True when it moved."""
    try:
        bind(port)
        return False
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE or port == 0:
            raise
    bind(0)
    return True


def dashboard_port(asked: int) -> int | None:
    """The port to hand ``ray.init`` for its dashboard. Ray's default: None, so that Ray's dashboard tries 8265 and
    the ports above it, binding each as it tries (two sweeps started in the same second on one machine both
    probed 8265 free, then one dashboard's bind failed and its sweep with it). Any other: that port when it is
    free now, else any free one (Ray tries a port it is given once).
    """
    return None if asked == DASHBOARD_PORT else free_port("127.0.0.1", asked)


def free_port(host: str, port: int) -> int:
    """``port`` when it can be bound on ``host`` now, else any free one: Ray's dashboard moves off a port held by
    a Ray left running (or anything else), as the live page does, rather than failing the sweep with Ray's traceback.
    """
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Ray's server binds: a closed socket's
        bind_or_any(lambda p: probe.bind((host, p)), port)  # lingering connections do not hold the port
        return probe.getsockname()[1]


def allowed(client: str, presented: str | None, token: str | None) -> bool:
    """May this client read the page? Loopback always; any other address only with the token."""
    if is_loopback(client):
        return True
    return bool(token) and presented is not None and hmac.compare_digest(presented.encode(), token.encode())


def presented_token(query: str, headers) -> str | None:
    """The token a request carries: ``?token=``, an ``Authorization: Bearer`` header, or the page's cookie."""
    if token := parse_qs(query).get("token", [None])[0]:
        return token
    auth = headers.get("Authorization") or ""
    if auth.startswith("Bearer "):
        return auth.removeprefix("Bearer ").strip()
    morsel = SimpleCookie(headers.get("Cookie") or "").get(COOKIE)
    return morsel.value if morsel else None


def viewer_of(client: str, query: str) -> str:
    """Who asks: the open page that names itself with ``?viewer=`` (at most 64 characters), else the address."""
    name = parse_qs(query).get("viewer", [""])[0][:64]
    return f"{client} {name}" if name else client


class Page(Protocol):
    def html(self) -> bytes: ...
    def state(self) -> dict: ...


class _Handler(BaseHTTPRequestHandler):
    server: LiveServer

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        url = urlsplit(self.path)
        given = presented_token(url.query, self.headers)
        client = self.client_address[0]
        viewer = viewer_of(client, url.query)
        if not allowed(client, given, self.server.token):
            self._send(403, b"403: this page needs the sweep's token (GRPO_SWEEP_LIVE_TOKEN): open it with ?token=...\n", "text/plain")
            return
        if url.path in ("/", "/index.html"):
            body = self.server.page.html()
            if self.server.page.state().get("final", False):  # (a page counts as open by its polls, below)
                self.server.viewed(viewer, final=True)
            self._send(200, body, "text/html; charset=utf-8", remember=given if "token=" in url.query else None)
        elif url.path == "/state.json":
            self.server.viewed(viewer)
            self._send(200, json.dumps(self.server.page.state()).encode(), "application/json")
        else:
            self._send(404, b"404: the live page is at /\n", "text/plain")

    def _send(self, code: int, body: bytes, kind: str, remember: str | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        if remember:
            self.send_header("Set-Cookie", f"{COOKIE}={remember}; HttpOnly; SameSite=Strict; Path=/")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the sweep's terminal is not an access log
        pass


class LiveServer(ThreadingHTTPServer):
    """The page on ``host:port`` (a taken port falls back to a free one), served from a daemon thread."""

    daemon_threads = True

    def __init__(self, page: Page, host: str = "127.0.0.1", port: int = LIVE_PORT, token: str | None = None):
        problem = bind_problem(host, token)
        if problem:
            raise ValueError(problem)
        self.page, self.token, self.moved_from = page, token, None
        self._viewers: dict[str, tuple[float, bool]] = {}  # viewer -> (last request, has the final page)
        if bind_or_any(lambda p: super(LiveServer, self).__init__((host, p), _Handler), port):
            self.moved_from = port
        self._thread = threading.Thread(target=self.serve_forever, name="live-page", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
        return f"http://{shown}:{port}/"

    def start(self) -> LiveServer:
        self._thread.start()
        return self

    def handle_error(self, request, client_address) -> None:
        """A page closed mid-answer (a reload, a browser's favicon request) is no error; anything else is printed."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def viewed(self, viewer: str, final: bool | None = None) -> None:
        now = time.monotonic()
        _, had = self._viewers.get(viewer, (0.0, False))
        self._viewers = {name: seen for name, seen in self._viewers.items() if seen[0] > now - FORGET_S}
        self._viewers[viewer] = (now, had or bool(final))

    def wait_for_viewers(self, timeout_s: float) -> None:
        """Until every page open in the last few polls has loaded the final report (at most ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            recent = time.monotonic() - 3 * POLL_S
            if not any(seen > recent and not final for seen, final in list(self._viewers.values())):
                return
            time.sleep(0.2)

    def stop(self) -> None:
        if self._thread.is_alive():  # (shutdown waits for serve_forever: it would wait forever on a server never started)
            self.shutdown()
        self.server_close()
