"""How a client reaches its worker (the rules of protocol/owned_path.h and curve_keys.h, and
clients/cpp/connect.cpp, in Python): the endpoint checked, CURVE keys where the worker requires
them, and a hello that must be answered within a second (3 s once a live process shook hands).

An ipc socket is only as private as the directories above it: another user who can write one of
them can put an impostor's socket in the worker's place. So every directory on the way, as
written and as resolved, must be root's or ours and writable by nobody else unless sticky; links
on the way must be root's or ours; the socket must be a socket of ours.
"""
from __future__ import annotations

import os
import stat
import time
from typing import Iterator, Optional, Tuple

import msgpack
import zmq

from .errors import CurveKeyError, NoWorker, UnsafeEndpoint

# How long a fresh connection's hello may go unanswered before the client says there is no
# worker: a live worker answers from its socket thread at once. Once ZeroMQ's handshake with the
# other end has succeeded (a live process there, and with CURVE one that knows our key), the wait
# grows to HELLO_PATIENCE_S, what a silent worker gets before it is presumed gone (3 heartbeat
# intervals, PROTOCOL.md): a loaded machine is not "no worker". (clients/cpp/connect.h too.)
HELLO_WAIT_S = 1.0
HELLO_PATIENCE_S = 3.0


def _tmp_dir() -> str:
    return f"/tmp/rwkvd-{os.getuid()}"


def _xdg_dir() -> Optional[str]:
    """$XDG_RUNTIME_DIR where it names something that exists (not a stale value after su)."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    return xdg if xdg and os.path.lexists(xdg) else None


def default_endpoint() -> str:
    """$RWKVD_ENDPOINT, else the worker's default per-user ipc socket: $XDG_RUNTIME_DIR/rwkvd.sock
    when that directory exists, else /tmp/rwkvd-<uid>/rwkvd.sock."""
    env = os.environ.get("RWKVD_ENDPOINT")
    if env:
        return env
    return f"ipc://{_xdg_dir() or _tmp_dir()}/rwkvd.sock"


def _refuse(path: str, why: str) -> None:
    raise UnsafeEndpoint(f"{path} {why}: another user could put their own socket there; "
                         "refusing to use it")


def _prefixes(path: str) -> Iterator[str]:
    so_far = "/"
    yield so_far
    for part in path.split("/"):
        if part and part != ".":
            so_far = os.path.join(so_far, part)
            yield so_far


def _check_entry(path: str, st: os.stat_result) -> None:
    if st.st_uid not in (0, os.getuid()):
        _refuse(path, f"belongs to user {st.st_uid}")
    if (stat.S_ISDIR(st.st_mode) and st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
            and not st.st_mode & stat.S_ISVTX):
        _refuse(path, f"is writable by others (mode {stat.S_IMODE(st.st_mode):04o})")


def _lstat(path: str) -> os.stat_result:
    try:
        return os.lstat(path)
    except OSError as e:
        raise UnsafeEndpoint(f"cannot check {path}: {e.strerror}") from None


def check_safe_dir(directory: str) -> None:
    """UnsafeEndpoint unless no other user can change `directory` or anything above it."""
    path = os.path.normpath(os.path.abspath(directory))
    for p in _prefixes(path):  # as written: a link by its own owner, and where it leads
        st = _lstat(p)
        _check_entry(p, st)
        if stat.S_ISLNK(st.st_mode):
            try:
                _check_entry(f"{p} (the link's target)", os.stat(p))
            except FileNotFoundError:
                _refuse(p, "is a dangling symbolic link")
    real = os.path.realpath(path)
    for p in _prefixes(real):  # as resolved: every real directory the kernel walks through
        _check_entry(p, _lstat(p))
    if not os.path.isdir(real):
        raise UnsafeEndpoint(f"{path} is not a directory")


def check_private_dir(directory: str) -> None:
    """check_safe_dir, and `directory` is a real directory of ours with mode 0700."""
    st = _lstat(directory)
    if stat.S_ISLNK(st.st_mode):
        _refuse(directory, "is a symbolic link")
    if not stat.S_ISDIR(st.st_mode):
        _refuse(directory, "is not a directory")
    if st.st_uid != os.getuid():
        _refuse(directory, f"belongs to user {st.st_uid}")
    if st.st_mode & 0o077:
        _refuse(directory, f"is open to other users (mode {stat.S_IMODE(st.st_mode):04o}, "
                           "wanted 0700)")
    check_safe_dir(directory)


def check_own_socket(path: str) -> bool:
    """False when there is no such file; True for a socket of ours; else UnsafeEndpoint."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(st.st_mode):
        _refuse(path, "is a symbolic link")
    if not stat.S_ISSOCK(st.st_mode):
        raise UnsafeEndpoint(f"{path} is not a socket")
    if st.st_uid != os.getuid():
        _refuse(path, f"belongs to user {st.st_uid}")
    return True


def how_to_start(endpoint: str) -> str:
    cmd = "rwkvd serve --model FILE.gguf"
    if endpoint != f"ipc://{_xdg_dir() or _tmp_dir()}/rwkvd.sock":
        cmd += f" --endpoint {endpoint}"
    return f"start one with `{cmd}`"


# ---- CURVE keys ($XDG_CONFIG_HOME/rwkvd or ~/.config/rwkvd; made by the worker) ----

def key_dir() -> str:
    cfg = os.environ.get("XDG_CONFIG_HOME")
    if cfg and cfg.startswith("/"):
        return os.path.join(cfg, "rwkvd")
    return os.path.join(os.path.expanduser("~"), ".config", "rwkvd")


def read_key_pair(directory: str, name: str) -> Optional[Tuple[bytes, bytes]]:
    """(public, secret) Z85 keys from <directory>/<name>.key, None when it does not exist."""
    path = os.path.join(directory, name + ".key")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise CurveKeyError(f"cannot open {path}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if (not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077
                or st.st_size >= 65536):
            raise CurveKeyError(f"{path} must be a small file of this user with mode 0600")
        lines = os.read(fd, st.st_size).split(b"\n")
    finally:
        os.close(fd)
    if len(lines) < 2 or len(lines[0]) != 40 or len(lines[1]) != 40:
        raise CurveKeyError(f"{path} is not a key pair (two Z85 lines: public, secret)")
    return lines[0], lines[1]


def _wants_curve(endpoint: str) -> bool:
    return endpoint.startswith("tcp://") or os.environ.get("RWKVD_CURVE") == "1"


def _set_curve(sock: zmq.Socket, endpoint: str, server_key: Optional[str]) -> None:
    """Our side of CURVE: the worker's public key and this user's client pair."""
    directory = key_dir()
    if os.path.lexists(directory):
        try:
            check_private_dir(directory)
        except UnsafeEndpoint as e:
            raise CurveKeyError(str(e)) from None
    client = read_key_pair(directory, "client") if os.path.lexists(directory) else None
    key = server_key or os.environ.get("RWKVD_SERVER_KEY")
    if not key and client is not None:
        server = read_key_pair(directory, "server")
        key = server[0].decode() if server else None
    if client is None or not key:
        missing = "no server.key" if client else "no client.key"
        raise CurveKeyError(
            f"{endpoint} needs CURVE keys and {directory} has {missing}: a worker of this user "
            "makes both on its first tcp start; on another host, copy client.key from the "
            "worker's host and give its server key (server_key= or RWKVD_SERVER_KEY)")
    if len(key) != 40:
        raise CurveKeyError(f"the server key must be 40 Z85 characters: {key!r}")
    sock.curve_serverkey = key.encode() if isinstance(key, str) else key
    sock.curve_publickey, sock.curve_secretkey = client


def _open(ctx: zmq.Context, endpoint: str, routing_id: bytes,
          server_key: Optional[str]) -> zmq.Socket:
    """A DEALER set up for `endpoint` once the checks pass; not connected yet (so that a
    monitor can be attached first)."""
    if endpoint.startswith("ipc://"):
        path = endpoint[len("ipc://"):]
        directory = os.path.dirname(path) or "."
        exists = os.path.lexists(directory)
        if exists:
            check_safe_dir(directory)
        if not exists or not check_own_socket(path):
            raise NoWorker(f"no worker at {endpoint}: there is no socket {path}; "
                           f"{how_to_start(endpoint)}")
    elif not endpoint.startswith("tcp://"):
        raise NoWorker(f"endpoint must be ipc://PATH or tcp://HOST:PORT: {endpoint!r}")
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 200)
    sock.setsockopt(zmq.ROUTING_ID, routing_id)
    try:
        if _wants_curve(endpoint):
            _set_curve(sock, endpoint, server_key)
    except (zmq.ZMQError, CurveKeyError):
        sock.close(linger=0)
        raise
    return sock


def _probe(ctx: zmq.Context, endpoint: str, server_key: Optional[str]) -> None:
    """Returns once the worker answers a hello, sent on a short-lived synchronous socket of its
    own (so that an asyncio context's caller gets the same check); NoWorker after HELLO_WAIT_S
    (HELLO_PATIENCE_S once the handshake succeeded) of silence."""
    sync_ctx = zmq.Context.shadow(ctx.underlying)  # the caller's context, blocking sockets
    sock = _open(sync_ctx, endpoint, b"probe-" + os.urandom(8).hex().encode(), server_key)
    events = sock.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)
    shook_hands = False
    try:
        sock.connect(endpoint)
        sock.send(msgpack.packb({"v": 1, "id": 1, "op": "hello"}, use_bin_type=True))
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        poller.register(events, zmq.POLLIN)
        start = time.monotonic()
        deadline = start + HELLO_WAIT_S
        while time.monotonic() < deadline:
            ready = dict(poller.poll(max(0, int((deadline - time.monotonic()) * 1000))))
            if sock in ready:
                return  # any reply at all: a worker is there
            if events in ready:
                events.recv_multipart()
                shook_hands = True
                deadline = start + HELLO_PATIENCE_S
    finally:
        sock.disable_monitor()
        events.close(linger=0)
        sock.close(linger=0)
    if shook_hands:
        why = ("a process accepted the connection but did not answer (a stuck or overloaded "
               "worker?)")
    else:
        why = "no worker is listening there, or it is stopped"
        if _wants_curve(endpoint):
            why += ", or it does not know this client's CURVE key"
    wait = HELLO_PATIENCE_S if shook_hands else HELLO_WAIT_S
    raise NoWorker(f"no answer from {endpoint} to a hello within {wait:g} s: {why}; "
                   f"{how_to_start(endpoint)}")


def connect(ctx: zmq.Context, endpoint: str, routing_id: bytes, *,
            server_key: Optional[str] = None, probe: bool = True) -> zmq.Socket:
    """A DEALER of `ctx` (a zmq.asyncio.Context gives an asyncio socket) connected to
    `endpoint` once the checks pass and (probe) the worker has answered a hello within
    HELLO_WAIT_S.

    Raises UnsafeEndpoint for a socket or directory another user could have set up, NoWorker
    when there is no socket file or no answer, CurveKeyError when tcp keys are missing.
    server_key: the worker's CURVE public key (Z85) for a worker of another user or host;
    default $RWKVD_SERVER_KEY, else the user's own worker's.
    """
    if probe:
        _probe(ctx, endpoint, server_key)
    sock = _open(ctx, endpoint, routing_id, server_key)
    sock.connect(endpoint)
    return sock
