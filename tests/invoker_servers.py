"""Loopback HTTP servers that speak the OpenAI and Anthropic streaming wire formats, for tests.

A `ScriptedServer` answers the n-th request with the n-th reply of its script (the last one
repeats), records every request, and notes when a client hung up on a response it was writing.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Reply = Callable[["Handler"], None]
"""Writes one response through the handler."""


@dataclass(frozen=True)
class Received:
    """One request as the server saw it."""

    path: str
    headers: dict[str, str]
    body: Any


class Handler(BaseHTTPRequestHandler):
    """Records the request, then plays the server's next reply."""

    protocol_version = "HTTP/1.1"
    server: _Server
    request_seen: Received

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length", "0")))
        headers = {name.lower(): value for name, value in self.headers.items()}
        self.request_seen = Received(self.path, headers, json.loads(raw))
        with self.server.lock:
            self.server.received.append(self.request_seen)
            script = self.server.script
            reply = script[min(len(self.server.received) - 1, len(script) - 1)]
        self.close_connection = True
        try:
            reply(self)
        except OSError:
            self.server.client_gone.set()

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the test output quiet."""

    def send_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def wait_for_hangup(self) -> None:
        """Block until the client closes the connection, or the server stops."""
        self.connection.settimeout(0.02)
        while not self.server.stopping.is_set():
            try:
                if not self.connection.recv(1024):
                    break
            except TimeoutError:
                continue
            except OSError:
                break
        else:
            return
        self.server.client_gone.set()


class _Server(ThreadingHTTPServer):
    def __init__(self, script: Sequence[Reply]) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.script = list(script)
        self.received: list[Received] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.client_gone = threading.Event()


class ScriptedServer:
    """What a test sees of a running server: its URL, the requests, and the hang-up flag."""

    def __init__(self, server: _Server) -> None:
        self._server = server
        host, port = server.server_address[:2]
        self.url = f"http://{host!s}:{port}"

    @property
    def received(self) -> list[Received]:
        with self._server.lock:
            return list(self._server.received)

    def client_hung_up(self, timeout: float = 5.0) -> bool:
        """Whether a client closed a connection the server was still serving, within `timeout`."""
        return self._server.client_gone.wait(timeout)


@contextmanager
def serve(*script: Reply) -> Iterator[ScriptedServer]:
    """Run a server with this script on an ephemeral loopback port for the `with` block."""
    server = _Server(script)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01})
    thread.start()
    try:
        yield ScriptedServer(server)
    finally:
        server.stopping.set()
        server.shutdown()
        thread.join()
        server.server_close()


# --- replies ------------------------------------------------------------------------------------

End = Literal["finish", "keep", "drop", "hold"]


def stream(frames: Sequence[str], *, end: End = "finish") -> Reply:
    """A 200 event stream, chunked, one chunk per frame.

    `end`: "finish" ends the body and the connection; "keep" ends the body but keeps the connection
    alive until the client hangs up; "drop" closes the connection mid-body; "hold" keeps the
    response open until the client hangs up.
    """

    def reply(handler: Handler) -> None:
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.send_header("transfer-encoding", "chunked")
        if end != "keep":
            handler.send_header("connection", "close")
        handler.end_headers()
        for frame in frames:
            handler.send_chunk(frame.encode())
        if end in ("finish", "keep"):
            handler.wfile.write(b"0\r\n\r\n")
        if end in ("keep", "hold"):
            handler.wait_for_hangup()
        elif end == "drop":
            handler.connection.shutdown(socket.SHUT_RDWR)

    return reply


def error(status: int, body: Any, headers: dict[str, str] | None = None) -> Reply:
    """An error answer with a JSON (or, for a str body, plain text) body."""
    data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    kind = "text/plain" if isinstance(body, str) else "application/json"

    def reply(handler: Handler) -> None:
        handler.send_response(status)
        handler.send_header("content-type", kind)
        handler.send_header("content-length", str(len(data)))
        handler.send_header("connection", "close")
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)

    return reply


def routed(choose: Callable[[Received], Reply]) -> Reply:
    """A reply chosen from the request it answers (for a client whose requests interleave)."""

    def reply(handler: Handler) -> None:
        choose(handler.request_seen)(handler)

    return reply


def silent(handler: Handler) -> None:
    """Never answer: wait until the client gives up and hangs up."""
    handler.wait_for_hangup()


# --- wire formats -------------------------------------------------------------------------------


def sse(data: Any, event: str | None = None) -> str:
    """One server-sent event frame."""
    text = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n"


def openai_frames(
    texts: Sequence[str], *, reasoning: Sequence[str] = (), usage: tuple[int, int] | None = (7, 3)
) -> list[str]:
    """A Chat Completions stream: reasoning deltas, text deltas, finish, usage, `[DONE]`."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return sse({"id": "c1", "object": "chat.completion.chunk", "choices": [choice]})

    frames = [chunk({"role": "assistant", "content": ""})]
    frames += [chunk({"reasoning_content": piece}) for piece in reasoning]
    frames += [chunk({"content": piece}) for piece in texts]
    frames.append(chunk({}, "stop"))
    if usage is not None:
        counts = {"prompt_tokens": usage[0], "completion_tokens": usage[1]}
        frames.append(sse({"id": "c1", "choices": [], "usage": counts}))
    return [*frames, sse("[DONE]")]


def _anthropic_event(payload: dict[str, Any]) -> str:
    return sse(payload, payload["type"])


def anthropic_frames(
    texts: Sequence[str],
    *,
    thinking: Sequence[str] = (),
    usage: tuple[int, int] = (7, 3),
    model: str | None = None,
    message_id: str = "m1",
) -> list[str]:
    """A Messages stream: message_start, ping, thinking and text blocks, message_delta, stop."""
    event = _anthropic_event
    message: dict[str, Any] = {"id": message_id, "type": "message", "role": "assistant"}
    message["content"] = []
    if model is not None:
        message["model"] = model
    start_usage = {"input_tokens": usage[0], "output_tokens": 1}
    frames = [event({"type": "message_start", "message": {**message, "usage": start_usage}})]
    frames.append(event({"type": "ping"}))
    index = 0
    if thinking:
        block = {"type": "thinking", "thinking": ""}
        frames.append(event({"type": "content_block_start", "index": 0, "content_block": block}))
        for piece in thinking:
            delta = {"type": "thinking_delta", "thinking": piece}
            frames.append(event({"type": "content_block_delta", "index": 0, "delta": delta}))
        frames.append(event({"type": "content_block_stop", "index": 0}))
        index = 1
    block = {"type": "text", "text": ""}
    frames.append(event({"type": "content_block_start", "index": index, "content_block": block}))
    for piece in texts:
        delta = {"type": "text_delta", "text": piece}
        frames.append(event({"type": "content_block_delta", "index": index, "delta": delta}))
    frames.append(event({"type": "content_block_stop", "index": index}))
    stop = {"stop_reason": "end_turn", "stop_sequence": None}
    frames.append(
        event({"type": "message_delta", "delta": stop, "usage": {"output_tokens": usage[1]}})
    )
    return [*frames, event({"type": "message_stop"})]


def anthropic_tool_use_frames(
    calls: Sequence[tuple[str, str, Any]], *, model: str, usage: tuple[int, int] = (9, 5)
) -> list[str]:
    """A Messages stream whose answer is tool calls, (id, name, input) each, inputs streamed as
    JSON (several calls: a parallel turn)."""
    event = _anthropic_event
    message = {"id": f"m-{calls[0][0]}", "type": "message", "role": "assistant", "model": model}
    start = {**message, "content": [], "usage": {"input_tokens": usage[0], "output_tokens": 1}}
    frames = [event({"type": "message_start", "message": start})]
    for index, (call_id, name, tool_input) in enumerate(calls):
        block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(tool_input)}
        frames += [
            event({"type": "content_block_start", "index": index, "content_block": block}),
            event({"type": "content_block_delta", "index": index, "delta": delta}),
            event({"type": "content_block_stop", "index": index}),
        ]
    stop = {"stop_reason": "tool_use", "stop_sequence": None}
    return [
        *frames,
        event({"type": "message_delta", "delta": stop, "usage": {"output_tokens": usage[1]}}),
        event({"type": "message_stop"}),
    ]
