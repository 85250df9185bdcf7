"""The rwkvd client: a ZeroMQ DEALER socket speaking protocol v1 (PROTOCOL.md).

Result tensors (embeddings, states) are numpy float32 arrays. When the worker runs on this
machine under this user, they view its shared-memory ring in place (read-only, no copy); the
ring lease is released when the last array viewing it is garbage-collected (the release rides
on the next request). An array keeps its bytes for as long as it lives, however long and
however many requests follow; arrays that outlive close() become private copies.

Threads: a Client may be shared by threads; their calls take turns on its one socket (a lock,
whose cost is lost in a round trip's), and replies are routed to the call that sent the request,
so a stream read in one thread and calls made in another both get their own. For requests that
run at the same time, use a Client per thread, `generate_all`, or `rwkvd.AsyncClient`.

fork(): ZeroMQ sockets do not survive it. A Client made before fork() raises WrongProcess in the
child at once (close() there is a no-op); make a new Client in the child.

When a reply does not come within the timeout the call raises RequestTimeout and the client
starts over on a fresh socket with the same identity: the next call reaches whichever worker
listens on the endpoint (a restarted one included) with nothing stale queued ahead of it, and
keeps its sessions and leases when it is the same worker.
"""
from __future__ import annotations

import collections
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import msgpack
import numpy as np
import zmq

from . import _connect, _shm
from ._connect import default_endpoint
from .errors import (BadEndpoint, ClosedError, ErrorCode, InvalidArgument, ProtocolViolation,
                     RequestTimeout, RwkvdError, TransportError, WorkerError, WrongProcess)

PROTOCOL_VERSION = 1
# Silence for this many of the worker's heartbeat intervals while waiting: the worker is gone.
HEARTBEAT_LIVENESS = 3
Prompt = Union[str, Sequence[int]]


ENDPOINT_SCHEMES = ("ipc://", "tcp://")
EMBED_IN_FLIGHT = 8  # embed requests of one call in flight at once (Client.embed)
_MODEL_SUFFIXES = (".gguf", ".st", ".safetensors", ".pth", ".bin")


def _check_endpoint(endpoint: str) -> None:
    """BadEndpoint unless `endpoint` has a scheme the worker serves; a model file's path gets
    told how to serve it instead (the client connects, it loads nothing)."""
    if endpoint.startswith(ENDPOINT_SCHEMES):
        return
    if endpoint.lower().endswith(_MODEL_SUFFIXES) or os.path.isfile(endpoint):
        raise BadEndpoint(f"{endpoint!r} looks like a model file, not an endpoint: a client "
                          f"connects to a running worker. Start one with `rwkvd serve --model "
                          f"{endpoint}` and connect with the default endpoint (or pass its "
                          f"--endpoint, e.g. 'ipc:///path/w.sock')")
    raise BadEndpoint(f"endpoint {endpoint!r} is neither ipc://PATH nor tcp://HOST:PORT")


_contexts: Dict[Tuple[type, int], zmq.Context] = {}
_contexts_lock = threading.Lock()


def shared_context(kind: type = zmq.Context) -> zmq.Context:
    """The ZeroMQ context of every client of this process (one per kind: plain or asyncio; a
    forked child makes its own). It is never terminated, so a client collected without close()
    just closes its socket: terminating a context from the garbage collector waits forever for
    a socket that the same sweep has not finalised yet."""
    key = (kind, os.getpid())
    with _contexts_lock:
        ctx = _contexts.get(key)
        if ctx is None or ctx.closed:
            ctx = _contexts[key] = kind()
        return ctx


def connect_socket(ctx: zmq.Context, endpoint: str, routing_id: bytes,
                   server_key: Optional[str] = None, probe: bool = True) -> zmq.Socket:
    """A DEALER with our identity connected to `endpoint` once it checks out and (probe) a
    worker answered there (_connect.py): the one place Client and AsyncClient connect (the
    context decides which kind of socket, plain or asyncio)."""
    _check_endpoint(endpoint)
    try:
        return _connect.connect(ctx, endpoint, routing_id, server_key=server_key, probe=probe)
    except zmq.ZMQError as e:
        raise BadEndpoint(f"cannot connect to {endpoint!r}: {e}") from None


def _shape(a: Optional[np.ndarray]) -> str:
    return "None" if a is None else "[" + ", ".join(str(d) for d in a.shape) + "]"


def _text(t: str, limit: int = 40) -> str:
    return repr(t if len(t) <= limit else t[:limit] + "...")


@dataclass(repr=False)
class GenerateResult:
    """A finished generation. With stream=True, the last Chunk carries one of these."""

    tokens: List[int]
    text: str
    finish_reason: str  # "length", "stop" or "cancelled"
    prompt_tokens: int
    completion_tokens: int
    seed: int
    state: Optional[np.ndarray] = None
    session: Optional[int] = None

    def __repr__(self) -> str:
        return (f"GenerateResult(text={_text(self.text)}, tokens={len(self.tokens)}, "
                f"finish_reason={self.finish_reason!r}, prompt_tokens={self.prompt_tokens}, "
                f"seed={self.seed}, state={_shape(self.state)}, session={self.session})")


OUTPUTS = ("last_logits", "all_logits", "last_embedding", "all_embeddings")


@dataclass(repr=False)
class ForwardResult:
    """The reply of a `forward`: the output tensor and where the state stands.

    `output` is float32 [1, n_vocab] (last_logits), [n_tokens, n_vocab] (all_logits),
    [1, n_embd] (last_embedding) or [n_tokens, n_embd] (all_embeddings).
    """

    output: np.ndarray
    n_tokens: int
    state: Optional[np.ndarray] = None
    session: Optional[int] = None
    position: Optional[int] = None

    def __repr__(self) -> str:
        return (f"ForwardResult(output={_shape(self.output)}, n_tokens={self.n_tokens}, "
                f"state={_shape(self.state)}, session={self.session}, position={self.position})")


@dataclass(repr=False)
class Chunk:
    """A piece of a streamed generation; `result` is set on the last one."""

    tokens: List[int]
    text: str
    result: Optional[GenerateResult] = None

    def __repr__(self) -> str:
        last = f", result={self.result!r}" if self.result is not None else ""
        return f"Chunk(text={_text(self.text)}, tokens={self.tokens}{last})"


def _prompt_fields(prompt: Prompt) -> Dict[str, Any]:
    if isinstance(prompt, str):
        return {"text": prompt}
    if isinstance(prompt, (bytes, bytearray)):
        return {"text": bytes(prompt).decode("utf-8", errors="surrogateescape")}
    return {"tokens": [int(t) for t in prompt]}


def _is_single(inputs: Any) -> bool:
    if isinstance(inputs, str):
        return True
    seq = list(inputs)
    return all(isinstance(t, (int, np.integer)) for t in seq) and len(seq) > 0


def _state_bytes(state: np.ndarray) -> memoryview:
    """The state's float32 bytes, without a copy where it already is contiguous float32 (a
    2.9B state: tobytes() took 9 ms)."""
    return memoryview(np.ascontiguousarray(state, dtype="<f4")).cast("B")


_LOST = {"id": -1, "lost": True}  # queued for requests in flight when the socket is reset


class _Base:
    """What Client and AsyncClient share: the request encoding, the routing of replies to the
    requests in flight, leases, the ring and the result objects. The subclasses only move bytes
    (blocking or asyncio) and wait."""

    def __init__(self, endpoint: Optional[str], timeout: float, use_shm: bool,
                 server_key: Optional[str]) -> None:
        self._server_key = server_key
        self.endpoint = endpoint or default_endpoint()
        _check_endpoint(self.endpoint)
        self.timeout = timeout
        self._use_shm = use_shm
        self._pid = os.getpid()  # a forked child must not touch our sockets: _check_usable
        self._closed = False
        # Our identity at the worker, which owns our leases and sessions by it: random (not
        # guessable), kept across socket resets. A leading zero byte is reserved by ZeroMQ.
        self._routing_id = b"p" + os.urandom(16).hex().encode()
        self._next_id = 1
        # Replies not yet taken, per request in flight (registered when sent, dropped when
        # done): whoever reads the socket files each reply under its request.
        self._mail: Dict[int, "collections.deque[Dict[str, Any]]"] = {}
        # Lease ids of garbage-collected arrays. Finalizers only append here (they may run at any
        # moment, even inside a socket call); the next request carries them.
        self._pending: "collections.deque[int]" = collections.deque()
        self._ring: Optional[_shm.Ring] = None
        self._hello: Optional[Dict[str, Any]] = None
        self._liveness: Optional[float] = None  # learnt from hello: see _recv
        # States of at least this many bytes go to the worker as shared-memory inputs while its
        # ring is mapped (PROTOCOL.md, "Shared-memory inputs"); None: always inline.
        self.shm_input_min_bytes: Optional[int] = 1 << 20
        self._inputs: List[str] = []  # those of the requests in flight (_send), removed after

    @property
    def closed(self) -> bool:
        """True after close()."""
        return self._closed

    def _check_usable(self) -> None:
        if os.getpid() != self._pid:
            raise WrongProcess(f"this client was made in process {self._pid}, before a fork(); "
                               f"make a new one in process {os.getpid()}")
        if self._closed:
            raise ClosedError(f"{type(self).__name__} of {self.endpoint} used after close()")

    def _open_socket(self) -> None:
        """A fresh DEALER (same identity) once the endpoint checks out and a worker answered
        (_connect.py); the next call says hello and maps the ring again."""
        self._sock = connect_socket(self._ctx, self.endpoint, self._routing_id, self._server_key)
        self._forget_ring()

    def _reset_socket(self) -> None:
        """Replaces the DEALER, dropping the requests queued for a dead worker (those in flight
        are lost), by one of the same identity at once, without waiting for a hello: a client
        holding leases must stay reachable, or the worker's lease check finds it gone and frees
        them under its arrays (PROTOCOL.md, "Shared-memory ring"). Where the endpoint no longer
        checks out (no socket file: no worker), the next call connects and says why it cannot."""
        if self._sock is not None:
            self._sock.close(linger=0)
            self._sock = None
            self._lose_in_flight()
        self._forget_ring()
        try:
            self._sock = connect_socket(self._ctx, self.endpoint, self._routing_id,
                                        self._server_key, probe=False)
        except RwkvdError:
            pass

    def _forget_ring(self) -> None:
        self._ring = None
        self._hello = None
        self._liveness = None

    def _encode(self, op: str, fields: Dict[str, Any]) -> Tuple[int, bytes]:
        """A new request id (now in flight) and the request's bytes."""
        rid = self._next_id
        self._next_id += 1
        if self._ring is not None and not self._ring.worker_alive():
            self._forget_ring()  # a restarted worker has a new ring: hello again first
        msg: Dict[str, Any] = {"v": PROTOCOL_VERSION, "id": rid, "op": op}
        if self._ring is not None:
            msg["shm"] = True
        release = []
        while self._pending:
            release.append(self._pending.popleft())
        if release:
            msg["release"] = release
        msg.update({k: v for k, v in fields.items() if v is not None})
        state = msg.get("state")
        if (isinstance(state, (bytes, memoryview)) and self._ring is not None
                and self.shm_input_min_bytes is not None
                and len(state) >= self.shm_input_min_bytes):
            # One copy into an object of ours instead of packing it and pushing it through the
            # socket; inline if the object cannot be made.
            name = _shm.write_input(state)
            if name is not None:
                self._inputs.append(name)
                msg["state"] = {"shm": name, "bytes": len(state)}
        try:
            data = msgpack.packb(msg, use_bin_type=True)
        except (TypeError, ValueError, OverflowError) as e:
            self._pending.extend(release)
            raise InvalidArgument(f"{op}: a field cannot be sent: {e}") from None
        self._mail[rid] = collections.deque()
        return rid, data

    def _drop_inputs(self) -> None:
        """Removes the shared-memory inputs sent so far: the worker read each one while it
        decoded its request, before any reply."""
        while self._inputs:
            _shm.remove_input(self._inputs.pop())

    def _done(self, rids: Sequence[int]) -> None:
        """The requests are no longer waited for: later replies to them are dropped."""
        for r in rids:
            self._mail.pop(r, None)

    def _lose_in_flight(self) -> None:
        """The socket is being replaced: what was in flight on it will never be answered."""
        for q in self._mail.values():
            q.append(_LOST)

    @staticmethod
    def _decode(data: bytes) -> Dict[str, Any]:
        try:
            reply = msgpack.unpackb(data, raw=False, unicode_errors="replace",
                                    strict_map_key=False)
        except Exception as e:  # noqa: BLE001 - msgpack raises several kinds
            raise ProtocolViolation(f"undecodable reply: {e}") from None
        if not isinstance(reply, dict) or "id" not in reply:
            raise ProtocolViolation(f"malformed reply: {reply!r:.200}")
        return reply

    def _route(self, reply: Dict[str, Any], fallback: int) -> None:
        """Files a reply under its request. Id 0 answers a request the worker could not read:
        the only one in flight, else `fallback` (the waiting caller's). Other ids are late
        replies to calls that timed out or were abandoned: dropped."""
        if reply.get("heartbeat") is True:
            return
        rid = reply["id"]
        if rid == 0:
            rid = next(iter(self._mail)) if len(self._mail) == 1 else fallback
        q = self._mail.get(rid)
        if q is not None:
            q.append(reply)

    def _take(self, rids: Sequence[int]) -> Optional[Dict[str, Any]]:
        """The next reply filed for one of `rids` (an error reply raised), or None."""
        for r in rids:
            q = self._mail.get(r)
            if q:
                reply = q.popleft()
                if reply is _LOST:
                    if self._closed:
                        raise ClosedError(f"{type(self).__name__} of {self.endpoint} closed "
                                          f"while this request was in flight")
                    raise RequestTimeout(f"the connection to {self.endpoint} was reset (another "
                                         f"call timed out) while this request was in flight")
                if not reply.get("ok"):
                    err = reply.get("error") or {}
                    raise WorkerError(err.get("code", 17), err.get("name", "internal"),
                                      err.get("message", ""))
                return reply
        return None

    def _end_stream(self, rid: int, finished: bool) -> None:
        """A stream's cleanup: it is no longer waited for, and cancelled unless it finished."""
        self._done([rid])
        self._drop_inputs()
        if (not finished and not self._closed and os.getpid() == self._pid
                and self._sock is not None):  # (a dropped socket took the request along)
            try:
                self._done([self._send("cancel", {"target": rid})])  # not waited for
            except TransportError:
                pass

    def _begin_close(self) -> bool:
        """Marks the client closed and sends the releases of held leases without waiting for
        them (a dead worker must not make close() take the whole timeout; a lost one is freed
        when the worker finds this client gone). Arrays still alive first become private copies
        of what they show (_shm.Ring.detach), so their leases go back too. False when there is
        nothing more to do: closed already, or a forked child, where touching the parent's
        socket and context could hang."""
        if self._closed:
            return False
        self._closed = True
        if os.getpid() != self._pid:
            return False
        try:
            leases = list(self._pending)
            self._pending.clear()  # not piggy-backed as well
            if self._ring is not None:
                leases += self._ring.detach()  # arrays still alive keep their bytes
            if leases and self._sock is not None:  # (no reconnecting just for this)
                self._send("release", {"leases": leases})
        except TransportError:
            pass
        return True

    def _send(self, op: str, fields: Dict[str, Any]) -> int:
        raise NotImplementedError

    def _timed_out(self, gone: bool) -> RequestTimeout:
        if gone:
            return RequestTimeout(f"no reply and no heartbeat from {self.endpoint} for "
                                  f"{self._liveness:.3g} s: the worker is gone")
        return RequestTimeout(f"no reply from {self.endpoint} within {self.timeout} s")

    def _tensor(self, t: Dict[str, Any]) -> np.ndarray:
        shape = tuple(t["shape"])
        if "shm" in t:
            ref = t["shm"]
            if self._ring is None:
                raise ProtocolViolation("worker sent a shared-memory tensor to an unmapped client")
            try:
                self._ring.check(ref, shape)
            except (WorkerError, ProtocolViolation) as e:
                if isinstance(e, WorkerError):
                    self._forget_ring()  # not in our mapping: maybe a new worker; hello again
                if isinstance(ref.get("lease"), int):
                    self._pending.append(ref["lease"])  # give it back (unknown ids are ignored)
                raise
            return self._ring.view(ref, self._pending.append).reshape(shape)
        return np.frombuffer(t["data"], dtype="<f4").astype(np.float32, copy=False).reshape(shape)

    def _on_hello(self, reply: Dict[str, Any]) -> Dict[str, Any]:
        hb = reply.get("heartbeat_ms")
        self._liveness = (min(hb, 3_600_000) * HEARTBEAT_LIVENESS / 1000.0
                          if isinstance(hb, int) and hb > 0 else None)
        if self._use_shm:
            shm = reply.get("shm") or {}
            if self._ring is None or self._ring.name != shm.get("name"):
                self._ring = _shm.open_ring(shm.get("name"))
        self._hello = reply
        return reply

    @property
    def shm_mapped(self) -> bool:
        """True when tensors can come through shared memory."""
        return self._ring is not None

    def _result(self, r: Dict[str, Any]) -> GenerateResult:
        return GenerateResult(tokens=list(r.get("tokens", [])), text=r.get("text", ""),
                              finish_reason=r["finish_reason"], prompt_tokens=r["prompt_tokens"],
                              completion_tokens=r["completion_tokens"], seed=r["seed"],
                              state=self._tensor(r["state"]) if "state" in r else None,
                              session=r.get("session"))

    def _chunk(self, r: Dict[str, Any]) -> Chunk:
        """A stream's message as a Chunk; the final one carries the result."""
        result = None if r.get("more") else self._result(r)
        return Chunk(list(r.get("tokens", [])), r.get("text", ""), result)

    def _forward_result(self, r: Dict[str, Any]) -> ForwardResult:
        return ForwardResult(output=self._tensor(r["output"]), n_tokens=r["n_tokens"],
                             state=self._tensor(r["state"]) if "state" in r else None,
                             session=r.get("session"), position=r.get("position"))

    @staticmethod
    def _forward_fields(prompt: Prompt, output: str, session: Optional[int],
                        state: Optional[np.ndarray], return_state: bool) -> Dict[str, Any]:
        if output not in OUTPUTS:
            raise InvalidArgument(f"output must be one of {OUTPUTS}, not {output!r}")
        return dict(_prompt_fields(prompt), output=output, session=session,
                    state=_state_bytes(state) if state is not None else None,
                    return_state=return_state or None)

    def _embed_requests(self, inputs: Union[Prompt, Sequence[Prompt]]) -> List[Dict[str, Any]]:
        """The fields of the embed requests for `inputs` (after hello): one for a single input,
        else batches within the worker's limits."""
        if _is_single(inputs):
            return [_prompt_fields(inputs)]
        items = [p if isinstance(p, str) else [int(t) for t in p] for p in inputs]
        if not items:
            raise InvalidArgument("embed needs at least one input")
        assert self._hello is not None
        return [{"inputs": b} for b in embed_batches(items, self._hello["limits"],
                                                     int(self._hello["model"]["n_embd"]))]

    @staticmethod
    def _embed_windows(requests: List[Dict[str, Any]]) -> List[List[Tuple[str, Dict[str, Any]]]]:
        """The embed requests in groups sent together: enough in flight for the worker to
        batch them, not so many that one client's backlog holds the ring or its queue."""
        return [[("embed", f) for f in requests[i:i + EMBED_IN_FLIGHT]]
                for i in range(0, len(requests), EMBED_IN_FLIGHT)]

    def _embed_parts(self, replies: List[Dict[str, Any]], n_requests: int) -> List[np.ndarray]:
        """The replies' embeddings: the view itself for a lone request, else copies (their
        leases go back with the next request instead of waiting for the whole batch)."""
        parts = [self._tensor(r["embeddings"]) for r in replies]
        return parts if n_requests == 1 else [np.array(p) for p in parts]

    def _embed_join(self, inputs: Any, parts: List[np.ndarray], normalize: bool) -> np.ndarray:
        """One array of the requests' embeddings: the reply's own (zero-copy) for one request,
        else a new array; L2-normalised (a new array) with `normalize`."""
        out = parts[0] if len(parts) == 1 else np.concatenate(parts)
        if normalize:
            norm = np.linalg.norm(out, axis=-1, keepdims=True)
            out = out / np.where(norm > 0, norm, 1).astype(np.float32)
        return out[0] if _is_single(inputs) else out

    def __repr__(self) -> str:
        if self._closed:
            shape = "closed"
        elif self._hello is None:
            shape = "not connected yet"
        else:
            m = self._hello.get("model", {})
            shape = (f"model={m.get('name', '')!r} n_layer={m.get('n_layer')} "
                     f"n_embd={m.get('n_embd')} n_vocab={m.get('n_vocab')} "
                     f"shm={'mapped' if self._ring is not None else 'inline'}")
        return (f"{type(self).__name__}(endpoint={self.endpoint!r}, "
                f"id={self._routing_id.decode()}, {shape})")


def _input_size(item: Union[str, List[int]]) -> int:
    """An upper bound of an input's token count (a token is at least one byte of text)."""
    return len(item.encode("utf-8", "surrogateescape")) if isinstance(item, str) else len(item)


def embed_batches(items: List[Union[str, List[int]]], limits: Dict[str, Any],
                  n_embd: int) -> List[List[Union[str, List[int]]]]:
    """`items` in order, cut into requests the worker takes: at most max_batch inputs, at most
    max_tokens tokens in all (a lone larger input goes alone: the worker judges it) and a reply
    within max_message_bytes."""
    per_request = min(int(limits["max_batch"]),
                      max(1, int(limits["max_message_bytes"]) // (4 * n_embd)))
    max_tokens = int(limits["max_tokens"])
    batches: List[List[Union[str, List[int]]]] = []
    tokens = 0
    for item in items:
        k = _input_size(item)
        if not batches or len(batches[-1]) >= per_request or tokens + k > max_tokens:
            batches.append([])
            tokens = 0
        batches[-1].append(item)
        tokens += k
    return batches


class Client(_Base):
    """A connection to an rwkvd worker.

    Args:
        endpoint: "ipc://PATH" or "tcp://HOST:PORT"; default: default_endpoint().
        timeout: seconds to wait for each reply message before RequestTimeout.
        use_shm: map the worker's shared-memory ring when possible (else tensors come inline).
        server_key: the worker's CURVE public key for tcp to a worker of another host (default
            $RWKVD_SERVER_KEY, else this user's own worker's: docs/THREAT_MODEL.md).

    Connects at once: NoWorker within about a second when no worker answers, UnsafeEndpoint when
    the socket could be another user's. Calls from several threads take turns (see the module doc); after fork() the child gets
    WrongProcess. Every error raised is an RwkvdError.
    """

    def __init__(self, endpoint: Optional[str] = None, timeout: float = 60.0,
                 use_shm: bool = True, server_key: Optional[str] = None) -> None:
        super().__init__(endpoint, timeout, use_shm, server_key)
        # One caller at a time on the socket (ZeroMQ sockets are not thread-safe). Re-entrant:
        # a generator's cleanup may run inside another call of the same thread.
        self._lock = threading.RLock()
        self._ctx = shared_context()
        self._sock: Optional[zmq.Socket] = None
        self._open_socket()

    # ---- plumbing ----

    def _send(self, op: str, fields: Dict[str, Any]) -> int:
        if self._sock is None:
            self._open_socket()
        rid, data = self._encode(op, fields)
        try:
            self._sock.send(data)
        except zmq.ZMQError as e:
            self._done([rid])
            raise TransportError(f"cannot send to {self.endpoint}: {e}") from None
        return rid

    def _recv(self, rid: Union[int, Sequence[int]]) -> Dict[str, Any]:
        """The next reply to request `rid` (or to any of several ids)."""
        # The timeout is per message. Heartbeats do not extend it (a stuck engine still times
        # out), but silence for `liveness` (3 heartbeat intervals) means the worker is dead, not
        # slow, and ends the wait early (PROTOCOL.md, Heartbeats).
        rids = (rid,) if isinstance(rid, int) else tuple(rid)
        liveness = self._liveness
        deadline = time.monotonic() + self.timeout
        alive_until = time.monotonic() + liveness if liveness else deadline
        while True:
            reply = self._take(rids)
            if reply is not None:
                return reply
            left = max(0.0, min(deadline, alive_until) - time.monotonic())
            try:
                ready = self._sock.poll(int(left * 1000))
                data = self._sock.recv() if ready else None
            except zmq.ZMQError as e:
                raise TransportError(f"cannot receive from {self.endpoint}: {e}") from None
            if data is None:
                error = self._timed_out(gone=alive_until < deadline)
                self._reset_socket()
                raise error
            if liveness:
                alive_until = time.monotonic() + liveness  # any message is a sign of life
            self._route(self._decode(data), fallback=rids[0])

    def call(self, op: str, **fields: Any) -> Dict[str, Any]:
        """Low level: one request, its final reply map (stream chunks are skipped)."""
        with self._lock:
            self._check_usable()
            rid = None
            try:
                rid = self._send(op, fields)
                while True:
                    reply = self._recv(rid)
                    if not reply.get("more"):
                        return reply
            finally:
                if rid is not None:
                    self._done([rid])
                self._drop_inputs()

    def call_all(self, requests: Sequence[Tuple[str, Dict[str, Any]]]) -> List[Dict[str, Any]]:
        """Low level: sends every (op, fields) request before reading any reply, so they are in
        flight together (the worker batches concurrent generations); returns their final replies
        in order. Stream chunks are skipped."""
        with self._lock:
            self._check_usable()
            rids: List[int] = []
            try:
                for op, fields in requests:
                    rids.append(self._send(op, dict(fields)))
                finals: Dict[int, Dict[str, Any]] = {}
                while len(finals) < len(rids):
                    reply = self._recv([r for r in rids if r not in finals])
                    if not reply.get("more"):
                        finals[reply["id"]] = reply
                        self._done([reply["id"]])
                return [finals[r] for r in rids]
            finally:
                self._done(rids)
                self._drop_inputs()

    def _tensor(self, t: Dict[str, Any]) -> np.ndarray:
        with self._lock:  # it may forget the ring, which another thread's call reads
            return super()._tensor(t)

    def _ensure_hello(self) -> None:
        self._check_usable()
        if self._hello is None:
            self.hello()

    # ---- ops ----

    def hello(self) -> Dict[str, Any]:
        """Protocol version, model shape, limits and the shared-memory ring's name."""
        with self._lock:
            return self._on_hello(self.call("hello"))

    def info(self) -> Dict[str, Any]:
        """Model, device, memory, limits and options of the worker."""
        return self.call("info")

    def stats(self) -> Dict[str, Any]:
        """Counters: requests, errors, batch-size histograms, latencies, cache and shm use."""
        return self.call("stats")["stats"]

    def tokenize(self, text: str) -> List[int]:
        """Token ids of `text` with the worker's tokenizer."""
        return list(self.call("tokenize", text=text)["tokens"])

    def detokenize(self, tokens: Sequence[int]) -> str:
        """Text of `tokens` (invalid UTF-8 replaced)."""
        return self.call("detokenize", tokens=[int(t) for t in tokens])["text"]

    def generate(self, prompt: Prompt, *, max_tokens: int = 16, temperature: float = 1.0,
                 top_p: float = 1.0, top_k: int = 0, presence_penalty: float = 0.0,
                 frequency_penalty: float = 0.0, stop: Optional[Sequence[str]] = None,
                 seed: Optional[int] = None, state: Optional[np.ndarray] = None,
                 return_state: bool = False, stream: bool = False,
                 session: Optional[int] = None) -> Union[GenerateResult, Iterator[Chunk]]:
        """Generate from a prompt (text or token ids).

        With stream=True returns an iterator of Chunks (the last one has `.result`); closing it
        early cancels the generation. `state` starts from a state instead of zeros; with
        return_state the result carries the final state (prompt and every generated token).
        """
        self._ensure_hello()
        fields = generate_fields(prompt, max_tokens=max_tokens, temperature=temperature,
                                 top_p=top_p, top_k=top_k, presence_penalty=presence_penalty,
                                 frequency_penalty=frequency_penalty, stop=stop, seed=seed,
                                 state=state, return_state=return_state, stream=stream,
                                 session=session)
        if not stream:
            return self._result(self.call("generate", **fields))
        return self._stream(fields)

    def generate_all(self, prompts: Sequence[Prompt], *, sessions: Optional[Sequence[int]] = None,
                     **options: Any) -> List[GenerateResult]:
        """Several generations in flight at once on this connection, batched by the worker (e.g.
        the field prompts of a document, each on a fork of its session). `sessions`: one per
        prompt, or None. Options as for generate(), without streaming. Results in prompt order.
        """
        requests = generate_all_requests(prompts, sessions, options)
        self._ensure_hello()
        return [self._result(r) for r in self.call_all(requests)]

    def _stream(self, fields: Dict[str, Any]) -> Iterator[Chunk]:
        with self._lock:
            self._check_usable()
            rid = self._send("generate", fields)
        finished = False
        try:
            while True:
                with self._lock:
                    r = self._recv(rid)
                chunk = self._chunk(r)
                finished = chunk.result is not None
                yield chunk
                if finished:
                    return
        finally:
            with self._lock:
                self._end_stream(rid, finished)

    def embed(self, inputs: Union[Prompt, Sequence[Prompt]], *,
              normalize: bool = False) -> np.ndarray:
        """Embeddings (final norm, last token): [n_embd] for one input, [n, n_embd] for many.

        An input is a string or a list of token ids. Any number of inputs: they go in requests
        within the worker's limits (max_batch, max_tokens), EMBED_IN_FLIGHT at a time. From one
        request the result views the reply (zero-copy, read-only); from several it is a new
        array. normalize=True divides each row by its L2 norm (a new array).
        """
        self._ensure_hello()
        requests = self._embed_requests(inputs)
        parts: List[np.ndarray] = []
        for window in self._embed_windows(requests):
            parts += self._embed_parts(self.call_all(window), len(requests))
        return self._embed_join(inputs, parts, normalize)

    def forward(self, prompt: Prompt, *, output: str = "last_logits",
                session: Optional[int] = None, state: Optional[np.ndarray] = None,
                return_state: bool = False) -> ForwardResult:
        """Run `prompt` without sampling: logits or final-norm hidden states (PROTOCOL.md, Forward).

        `output` is one of OUTPUTS. With `session` the session's state is continued and
        advanced; with `state` a stateless request starts from it (else from zeros).
        The output of one request must fit in the worker's max_message_bytes (too_large
        otherwise): split long inputs over several requests on a session.
        """
        fields = self._forward_fields(prompt, output, session, state, return_state)
        self._ensure_hello()
        return self._forward_result(self.call("forward", **fields))

    @property
    def limits(self) -> Dict[str, Any]:
        """The worker's limits (hello.limits)."""
        self._ensure_hello()
        assert self._hello is not None
        return dict(self._hello["limits"])

    @property
    def model(self) -> Dict[str, Any]:
        """The worker's model shape (hello.model: n_vocab, n_embd, n_layer, head_size, ...)."""
        self._ensure_hello()
        assert self._hello is not None
        return dict(self._hello["model"])

    def session(self, state: Optional[np.ndarray] = None) -> "Session":
        """A new session (its own recurrent state on the worker), from zeros or `state`."""
        self._ensure_hello()
        r = self.call("session_open", state=_state_bytes(state) if state is not None else None)
        return Session(self, r["session"])

    def fork_shared(self, token: str) -> "Session":
        """A new session of this client from a copy of the state, as it is now, of the session
        that `token` shares (Session.share() of any client). WorkerError UNKNOWN_SESSION once
        that session is closed or unshared (PROTOCOL.md, "Sharing a session")."""
        self._ensure_hello()
        return Session(self, self.call("session_fork", token=token)["session"])

    def release_now(self) -> None:
        """Send the releases of collected arrays now instead of with the next request."""
        if self._pending:
            leases = []
            while self._pending:
                leases.append(self._pending.popleft())
            try:
                self.call("release", leases=leases)
            except WorkerError:
                pass  # not ours any more (a restarted worker, a replaced ring)

    def close(self) -> None:
        """Hand back held leases and close the socket; again, or in a forked child, nothing."""
        with self._lock:
            if self._begin_close() and self._sock is not None:
                self._sock.close(linger=200)  # the release still goes out meanwhile

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def generate_fields(prompt: Prompt, *, max_tokens: int = 16, temperature: float = 1.0,
                    top_p: float = 1.0, top_k: int = 0, presence_penalty: float = 0.0,
                    frequency_penalty: float = 0.0, stop: Optional[Sequence[str]] = None,
                    seed: Optional[int] = None, state: Optional[np.ndarray] = None,
                    return_state: bool = False, stream: bool = False,
                    session: Optional[int] = None) -> Dict[str, Any]:
    """The fields of a generate request (Client.generate's arguments)."""
    return dict(_prompt_fields(prompt), max_tokens=max_tokens, temperature=float(temperature),
                top_p=float(top_p), top_k=top_k, presence_penalty=float(presence_penalty),
                frequency_penalty=float(frequency_penalty),
                stop=list(stop) if stop else None, seed=seed,
                state=_state_bytes(state) if state is not None else None,
                return_state=return_state or None, stream=stream or None, session=session)


def generate_all_requests(prompts: Sequence[Prompt], sessions: Optional[Sequence[int]],
                          options: Dict[str, Any]) -> List[Tuple[str, Dict[str, Any]]]:
    """The requests of generate_all: one generate per prompt, on its session if given."""
    if options.get("stream"):
        raise InvalidArgument("generate_all does not stream")
    if sessions is not None and len(sessions) != len(prompts):
        raise InvalidArgument("generate_all: one session per prompt, or none")
    return [("generate", generate_fields(p, **options,
                                         session=None if sessions is None else sessions[i]))
            for i, p in enumerate(prompts)]


class _SessionBase:
    """What Session and AsyncSession share: the id, the closed flag and its rules."""

    def __init__(self, client: Any, session_id: int) -> None:
        self.client = client
        self.id = session_id
        self.closed = False

    @property
    def _sid(self) -> int:
        if self.closed:
            raise ClosedError(f"session {self.id} used after close()")
        return self.id

    def _begin_close(self) -> bool:
        """Marks the session closed; False when the worker need not be told (closed already,
        or the client is: the worker frees a gone client's sessions)."""
        if self.closed:
            return False
        self.closed = True
        return not self.client.closed

    @staticmethod
    def _closed_anyway(e: WorkerError) -> bool:
        """A session the worker no longer has (reclaimed) is closed all the same."""
        return e.code == ErrorCode.UNKNOWN_SESSION

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return (f"{type(self).__name__}(id={self.id}, "
                f"client={self.client._routing_id.decode()}, {state})")


class Session(_SessionBase):
    """A recurrent state held by the worker; ops on it apply in the order they are sent.

    close() is idempotent (and a no-op once the client is closed: the worker frees a gone
    client's sessions); other ops on a closed session raise ClosedError.
    """

    client: Client

    def feed(self, prompt: Prompt) -> int:
        """Advance the state over `prompt`; returns the session's position (tokens consumed)."""
        return self.client.call("session_feed", session=self._sid,
                                **_prompt_fields(prompt))["position"]

    def generate(self, prompt: Prompt, **kwargs: Any) -> Union[GenerateResult, Iterator[Chunk]]:
        """Client.generate continuing this session's state (which then includes the output)."""
        return self.client.generate(prompt, session=self._sid, **kwargs)

    def embed(self, prompt: Prompt) -> np.ndarray:
        """Feed `prompt` and return the embedding of its last token, [n_embd]."""
        return self.client._tensor(
            self.client.call("embed", session=self._sid, **_prompt_fields(prompt))["embeddings"])[0]

    def forward(self, prompt: Prompt, output: str = "last_logits") -> ForwardResult:
        """Client.forward continuing (and advancing) this session's state."""
        return self.client.forward(prompt, output=output, session=self._sid)

    def state(self) -> np.ndarray:
        """The state, [n_layer, head_size + 2, n_embd] float32 (docs/STATE_LAYOUT.md); a
        read-only view when it came through shared memory (np.array(s) is a writable copy)."""
        return self.client._tensor(self.client.call("session_state", session=self._sid)["state"])

    def set_state(self, state: np.ndarray) -> None:
        """Replace the state (any shape with the right number of float32 values)."""
        self.client.call("session_set_state", session=self._sid, state=_state_bytes(state))

    def fork(self) -> "Session":
        """A new session starting from a copy of this one's state."""
        return Session(self.client, self.client.call("session_fork", session=self._sid)["session"])

    def share(self) -> str:
        """A token (32 hex digits) with which any client can fork this session
        (Client.fork_shared), i.e. read its state, until it is closed or unshared. Sharing again
        returns the same token. Later feeds change what later forks copy."""
        return self.client.call("session_share", session=self._sid)["token"]

    def unshare(self) -> None:
        """Revoke the share token; forks already made with it stay."""
        self.client.call("session_unshare", session=self._sid)

    def close(self) -> None:
        """Free the session on the worker. Again: nothing."""
        if self._begin_close():
            try:
                self.client.call("session_close", session=self.id)
            except WorkerError as e:
                if not self._closed_anyway(e):
                    raise

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
