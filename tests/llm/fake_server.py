"""A scripted HTTP server on 127.0.0.1 that speaks just enough of the OpenAI chat-completions and
Anthropic messages wire formats to exercise the real SDKs (test helper, not product code).

Each test queues `Reply`s; every incoming request pops the next one (or gets a 500 saying the
script ran out), so the tests control status codes, headers, bodies, delays and truncation exactly.
All answers served here are hand-written test data.
"""
from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    """One scripted response. `truncate` sends only that many body bytes, then closes the socket
    while Content-Length still promises the full body."""

    status: int = 200
    body: bytes | str | dict = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    truncate: int | None = None

    def body_bytes(self) -> bytes:
        if isinstance(self.body, dict):
            return json.dumps(self.body).encode()
        return self.body.encode() if isinstance(self.body, str) else self.body


@dataclass
class Seen:
    """A request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict:
        return json.loads(self.body)


def openai_reply(text: str, model: str = "fake-model", prompt_tokens: int = 11,
                 completion_tokens: int = 7, finish_reason: str = "stop", **kw) -> Reply:
    body = {
        "id": "chatcmpl-test", "object": "chat.completion", "created": 1700000000, "model": model,
        "choices": [{"index": 0, "finish_reason": finish_reason,
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }
    return Reply(body=body, headers={"Content-Type": "application/json"}, **kw)


def anthropic_reply(text: str, model: str = "fake-claude", input_tokens: int = 13,
                    output_tokens: int = 5, stop_reason: str = "end_turn", **kw) -> Reply:
    body = {
        "id": "msg_test", "type": "message", "role": "assistant", "model": model,
        "content": [{"type": "text", "text": text}], "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }
    return Reply(body=body, headers={"Content-Type": "application/json"}, **kw)


def error_reply(status: int, message: str, headers: dict | None = None) -> Reply:
    body = {"error": {"type": "error", "message": message}}
    return Reply(status=status, body=body,
                 headers={"Content-Type": "application/json", **(headers or {})})


class FakeLLMServer:
    """Context manager: `with FakeLLMServer() as srv: srv.push(...); srv.base_url`."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.seen: list[Seen] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_base_url(self) -> str:
        return self.base_url + "/v1"

    def push(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def __enter__(self) -> "FakeLLMServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next(self, seen: Seen) -> Reply:
        with self._lock:
            self.seen.append(seen)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            if self.replies:
                return self.replies.popleft()
        return error_reply(500, "fake server: no scripted reply left")

    def _done(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _handler_class(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length)
                seen = Seen("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                reply = server._next(seen)
                try:
                    self._send(reply)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests): nothing to answer
                finally:
                    server._done()

            def _send(self, reply: Reply) -> None:
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                payload = reply.body_bytes()
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("Connection", "close")
                self.end_headers()
                if reply.truncate is not None:
                    payload = payload[: reply.truncate]
                self.wfile.write(payload)
                self.wfile.flush()
                self.close_connection = True

            def log_message(self, *args) -> None:  # keep test output quiet
                pass

        return Handler
