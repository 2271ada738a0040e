"""Issue #29, security items 4, 7 and 9: what one client may take of `autoprof serve`, tried
with real sockets against a real server. Each test fails on the server before the issue.

The server runs with 50 connections and a 1 s write deadline (hidden options), so that a few
dozen sockets show what a few hundred do at the defaults; a job (`sleep`) runs the whole
module long, so that its live stream stays open."""

from __future__ import annotations

import errno
import json
import shutil
import socket
import time
from dataclasses import dataclass

import pytest

from autoprof.store import driver, upload
from autoprof.testing.synthetic_out import make_out
from autoprof.web.state import TOKEN_HEADER
from tests.helpers import TOKEN, Served, start_serve, stop

BIG = 64 * 1024 * 1024  # a file far larger than what the kernel buffers for one connection
# the defaults (web/limits.py, README "Web pages"), spelled out: the tests run on the server
# before these limits too
MAX_BODY = 1024 * 1024
MAX_HEADERS = 16 * 1024
STREAMS_PER_CLIENT, ANONYMOUS_STREAMS = 16, 32


@dataclass
class Limited:
    served: Served
    big: str  # the path of a large file of a stored run's out/
    job_id: str  # a job that runs (sleeps) while the tests run


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    if shutil.which("perf") is None:
        pytest.skip("needs perf (the running job)")
    root = tmp_path_factory.mktemp("limits")
    out = make_out(root / "data" / "job000000001" / "out", seed=5)
    run_id = upload.upload(driver.Database.of(f"sqlite:///{root}/r.db"), out).uuid
    (root / "data" / "job000000001" / "request.json").write_text(
        json.dumps({"tool": "stat", "command": ["true"]})
    )
    with (out / "big.bin").open("wb") as big:
        big.truncate(BIG)  # sparse: no disk needed
    proc, port, log = start_serve(root, "--allow", "true|sleep [0-9]+", "--max-connections",
                                  "50", "--write-timeout", "1")  # fmt: skip
    served = Served(port, proc, log, run_id, "")
    job = {"tool": "stat", "command": "sleep 600", "events": ["task-clock"]}
    auth = {TOKEN_HEADER: TOKEN, "Content-Type": "application/json"}
    status, _, body = served.request("POST", "/api/jobs", json.dumps(job).encode(), auth)
    assert status == 202, body
    yield Limited(served, f"/runs/{run_id}/files/big.bin", json.loads(body)["id"])
    stop(proc)


def connect(port: int, source: str = "127.0.0.1", small_window: bool = False) -> socket.socket:
    """A client socket from `source` (any 127.x.y.z is this machine); with `small_window` it
    takes in at most a few KB until it reads."""
    s = socket.socket()
    if small_window:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def get(s: socket.socket, port: int, path: str, headers: dict | None = None) -> None:
    lines = [f"GET {path} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())


def status_of(s: socket.socket, timeout: float = 20) -> int:
    """The status code of the answer arriving on `s` (its status line only is read)."""
    s.settimeout(timeout)
    head = b""
    while b"\r\n" not in head:
        chunk = s.recv(1)
        if not chunk:
            raise ConnectionError(f"closed before a status line: {head!r}")
        head += chunk
    return int(head.split()[1])


def rest(s: socket.socket) -> bytes:
    """What arrives on `s` until the server closes it (then closed here too)."""
    s.settimeout(20)
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    s.close()
    return data


def answered(limited: Limited, deadline_s: float = 30) -> int:
    """A fresh client's answer for the runs list: the server is not locked out. A connection
    refused while every other one is busy (none idle, none stalled yet) is tried again."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return limited.served.request("GET", "/api/runs")[0]
        except (ConnectionResetError, BrokenPipeError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def reset_by_server(s: socket.socket) -> bool:
    """Whether the server closed `s`, learnt without reading (reading would let the server
    write again): the socket's pending error, or hang-up."""
    error = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    return error in (errno.ECONNRESET, errno.EPIPE)


# item 4a: clients that ask for a large file and read nothing of it
@pytest.mark.slow  # a real server process
def test_readers_that_read_nothing_neither_lock_the_server_out_nor_stay(limited):
    port = limited.served.port
    slow, cut = [], set()
    try:
        for i in range(60):  # more than the 50 allowed: each one over evicts another
            slow.append(connect(port, small_window=True))
            try:
                get(slow[-1], port, limited.big)
            except (ConnectionResetError, BrokenPipeError):
                cut.add(i)  # evicted before it asked
        assert answered(limited) == 200  # a stalled reader is evicted for it
        deadline = time.monotonic() + 60
        while len(cut) < len(slow) and time.monotonic() < deadline:
            cut |= {i for i, s in enumerate(slow) if i not in cut and reset_by_server(s)}
            time.sleep(0.1)
        assert len(cut) == len(slow)  # each cut at its write deadline (or evicted before)
        assert answered(limited) == 200
    finally:
        for s in slow:
            s.close()
    text = limited.served.log.read_text()
    assert "Traceback" not in text
    assert "cut an answer whose reader took nothing of it in 1 s" in text


# item 4b: live streams (Server-Sent Events) held open by clients without the token
@pytest.mark.slow  # a real server process
def test_live_streams_are_capped_per_client_and_without_the_token(limited):
    port, path = limited.served.port, f"/api/jobs/{limited.job_id}/stream"
    streams: list[socket.socket] = []
    try:
        statuses = []
        for i in range(220):  # 11 addresses of this machine, 20 streams each
            s = connect(port, f"127.0.0.{2 + i % 11}")
            streams.append(s)
            get(s, port, path)
            statuses.append(status_of(s))
        assert statuses.count(200) == ANONYMOUS_STREAMS
        assert set(statuses) == {200, 429}
        assert answered(limited) == 200
        token = {TOKEN_HEADER: TOKEN}
        codes = []
        for _ in range(STREAMS_PER_CLIENT + 1):  # one address, with the token
            s = connect(port, "127.0.0.99")
            streams.append(s)
            get(s, port, path, token)
            codes.append(status_of(s))
        assert codes == [200] * STREAMS_PER_CLIENT + [429]
    finally:
        for s in streams:
            s.close()
    deadline = time.monotonic() + 30  # the server notices the closed streams and frees them
    while time.monotonic() < deadline:
        s = connect(port, "127.0.0.2")
        get(s, port, path)
        code = status_of(s)
        s.close()
        if code == 200:
            break
        time.sleep(0.2)
    assert code == 200


# item 7: request sizes
def post_head(served: Served, framing: str) -> socket.socket:
    """A connection that has sent the head of a job POST with the token and `framing`."""
    s = connect(served.port)
    head = ["POST /api/jobs HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json",
            f"{TOKEN_HEADER}: {TOKEN}", framing]  # fmt: skip
    s.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
    return s


@pytest.mark.slow  # a real server process
def test_a_body_over_the_limit_is_413_announced_or_chunked(limited):
    s = post_head(limited.served, f"Content-Length: {48 << 20}")  # 48 MiB: refused unsent
    assert status_of(s) == 413
    s.close()
    s = post_head(limited.served, "Transfer-Encoding: chunked")  # counted as it arrives
    chunk = b"x" * 65536
    for _ in range(MAX_BODY // len(chunk)):
        s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
    s.sendall(b"1\r\nx\r\n")  # one byte over, and no end: the server must not wait for one
    assert status_of(s) == 413
    answer = rest(s).lower()
    assert b"connection: close" in answer
    assert answer.endswith(b'"request body over 1048576 bytes: refused"}')


@pytest.mark.slow  # a real server process
def test_headers_over_the_limit_are_431(limited):
    s = connect(limited.served.port)
    get(s, limited.served.port, "/api/runs", {"X-Pad": "a" * 70_000})  # one write: all of it
    assert status_of(s) == 431
    s.close()
    fits = {"X-Pad": "a" * (MAX_HEADERS // 2)}
    assert limited.served.request("GET", "/api/runs", headers=fits)[0] == 200


# item 9: request smuggling
@pytest.mark.slow  # a real server process
def test_a_request_with_both_content_length_and_transfer_encoding_is_refused(limited):
    served = limited.served
    body = json.dumps({"tool": "stat", "command": "true", "events": ["task-clock"]}).encode()
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    s = connect(served.port)
    s.sendall(b"POST /api/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              + f"{TOKEN_HEADER}: {TOKEN}\r\nContent-Length: {len(chunked)}\r\n".encode()
              + b"Transfer-Encoding: chunked\r\n\r\n" + chunked)  # fmt: skip
    s.settimeout(20)
    answer = b""
    while b"\r\n\r\n" not in answer or not answer.endswith(b"}"):
        part = s.recv(4096)
        if not part:
            break
        answer += part
    s.close()
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert b"connection: close" in answer.lower()
    assert answer.endswith(b'"a request with both Content-Length and Transfer-Encoding is '
                           b'refused (request smuggling)"}')  # fmt: skip


def test_the_limits_tried_here_are_the_servers_defaults():
    from autoprof.web.limits import DEFAULTS

    assert (DEFAULTS.max_body_bytes, DEFAULTS.max_header_bytes) == (MAX_BODY, MAX_HEADERS)
    assert DEFAULTS.max_streams_per_client == STREAMS_PER_CLIENT
    assert DEFAULTS.max_anonymous_streams == ANONYMOUS_STREAMS
