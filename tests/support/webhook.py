"""A Slack-compatible incoming webhook for tests: a local HTTP server that records what each POST said."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Webhook:
    """A Slack-compatible incoming webhook on 127.0.0.1 that records the ``text`` of each POST."""

    def __init__(self, status: int = 200, delay_s: float = 0.0):
        self.texts: list[str] = []
        self.paths: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                time.sleep(delay_s)
                outer.texts.append(body["text"])
                outer.paths.append(self.path)
                try:
                    self.send_response(status)
                    self.end_headers()
                    self.wfile.write(b"ok")
                except BrokenPipeError:  # the client gave up waiting (the timeout test)
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/services/T000/B000/s3cr3t-webhook-token"

    def __enter__(self) -> Webhook:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
