"""The rwkvd client: a ZeroMQ DEALER socket speaking protocol v1 (PROTOCOL.md).

Result tensors (embeddings, states) are numpy float32 arrays. When the worker runs on this
machine under this user, they view its shared-memory ring in place (read-only, no copy); the
ring lease is released when the last array viewing it is garbage-collected (the release rides
on the next request). An array keeps its bytes for as long as it lives, however long and
however many requests follow; arrays that outlive close() become private copies.

A Client is not thread-safe: use one per thread (or per process; never share across fork()).

When a reply does not come within the timeout the call raises RequestTimeout and the client
starts over on a fresh socket with the same identity: the next call reaches whichever worker
listens on the endpoint (a restarted one included) with nothing stale queued ahead of it, and
keeps its sessions and leases when it is the same worker.
"""
from __future__ import annotations

import collections
import os
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import msgpack
import numpy as np
import zmq

from . import _connect, _shm
from ._connect import default_endpoint
from .errors import ProtocolViolation, RequestTimeout, WorkerError

PROTOCOL_VERSION = 1
# Silence for this many of the worker's heartbeat intervals while waiting: the worker is gone.
HEARTBEAT_LIVENESS = 3
Prompt = Union[str, Sequence[int]]


@dataclass
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


OUTPUTS = ("last_logits", "all_logits", "last_embedding", "all_embeddings")


@dataclass
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


@dataclass
class Chunk:
    """A piece of a streamed generation; `result` is set on the last one."""

    tokens: List[int]
    text: str
    result: Optional[GenerateResult] = None


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


class Client:
    """A connection to an rwkvd worker.

    Args:
        endpoint: "ipc://PATH" or "tcp://HOST:PORT"; default: default_endpoint().
        timeout: seconds to wait for each reply message before RequestTimeout.
        use_shm: map the worker's shared-memory ring when possible (else tensors come inline).
        server_key: the worker's CURVE public key for tcp to a worker of another host (default
            $RWKVD_SERVER_KEY, else this user's own worker's: docs/THREAT_MODEL.md).

    Connects at once: NoWorker within about a second when no worker answers, UnsafeEndpoint when
    the socket could be another user's.
    """

    def __init__(self, endpoint: Optional[str] = None, timeout: float = 60.0,
                 use_shm: bool = True, server_key: Optional[str] = None) -> None:
        self._server_key = server_key
        self.endpoint = endpoint or default_endpoint()
        self.timeout = timeout
        self._use_shm = use_shm
        self._ctx = zmq.Context()
        # Our identity at the worker, which owns our leases and sessions by it: random (not
        # guessable), kept across socket resets. A leading zero byte is reserved by ZeroMQ.
        self._routing_id = b"p" + os.urandom(16).hex().encode()
        self._sock: Optional[zmq.Socket] = None
        try:
            self._open_socket()
        except BaseException:
            self._ctx.term()
            raise
        self._next_id = 1
        # Lease ids of garbage-collected arrays. Finalizers only append here (they may run at any
        # moment, even inside a socket call); the next request carries them.
        self._pending: "collections.deque[int]" = collections.deque()
        self._ring: Optional[_shm.Ring] = None
        self._hello: Optional[Dict[str, Any]] = None
        # States of at least this many bytes go to the worker as shared-memory inputs while its
        # ring is mapped (PROTOCOL.md, "Shared-memory inputs"); None: always inline.
        self.shm_input_min_bytes: Optional[int] = 1 << 20
        self._inputs: List[str] = []  # those of the requests in flight (_send), removed after

    # ---- plumbing ----

    def _open_socket(self) -> None:
        """A fresh DEALER (same identity) once the endpoint checks out and the worker answered a
        hello within a second (_connect.py); the next call says hello and maps the ring again."""
        self._sock = _connect.connect(self._ctx, self.endpoint, self._routing_id,
                                      server_key=self._server_key)
        self._forget_ring()

    def _reset_socket(self) -> None:
        """Drops the DEALER, and with it requests queued for a dead worker: the next call
        connects afresh."""
        if self._sock is not None:
            self._sock.close(linger=0)
            self._sock = None
        self._forget_ring()

    def _forget_ring(self) -> None:
        self._ring = None
        self._hello = None
        self._liveness: Optional[float] = None  # learnt from hello: see _recv

    def _send(self, op: str, fields: Dict[str, Any]) -> int:
        if self._sock is None:
            self._open_socket()
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
        self._sock.send(msgpack.packb(msg, use_bin_type=True))
        return rid

    def _drop_inputs(self) -> None:
        """Removes the shared-memory inputs sent so far: the worker read each one while it
        decoded its request, before any reply."""
        while self._inputs:
            _shm.remove_input(self._inputs.pop())

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
            left = max(0.0, min(deadline, alive_until) - time.monotonic())
            if not self._sock.poll(int(left * 1000)):
                self._reset_socket()
                if alive_until < deadline:
                    raise RequestTimeout(f"no reply and no heartbeat from {self.endpoint} for "
                                         f"{liveness:.3g} s: the worker is gone")
                raise RequestTimeout(f"no reply from {self.endpoint} within {self.timeout} s")
            reply = msgpack.unpackb(self._sock.recv(), raw=False, unicode_errors="replace",
                                    strict_map_key=False)
            if not isinstance(reply, dict) or "id" not in reply:
                raise ProtocolViolation(f"malformed reply: {reply!r:.200}")
            if liveness:
                alive_until = time.monotonic() + liveness  # any message is a sign of life
            if reply.get("heartbeat") is True:
                continue
            # Id 0 answers a request the worker could not read: ours when only one is in
            # flight; an error among several is still raised. Other ids are late replies to
            # earlier calls that timed out or were abandoned.
            ours = reply["id"] in rids or (reply["id"] == 0 and (len(rids) == 1
                                                                 or not reply.get("ok")))
            if not ours:
                continue
            if not reply.get("ok"):
                err = reply.get("error") or {}
                raise WorkerError(err.get("code", 17), err.get("name", "internal"),
                                  err.get("message", ""))
            return reply

    def call(self, op: str, **fields: Any) -> Dict[str, Any]:
        """Low level: one request, its final reply map (stream chunks are skipped)."""
        try:
            rid = self._send(op, fields)
            while True:
                reply = self._recv(rid)
                if not reply.get("more"):
                    return reply
        finally:
            self._drop_inputs()

    def call_all(self, requests: Sequence[Tuple[str, Dict[str, Any]]]) -> List[Dict[str, Any]]:
        """Low level: sends every (op, fields) request before reading any reply, so they are in
        flight together (the worker batches concurrent generations); returns their final replies
        in order. Stream chunks are skipped."""
        try:
            rids = [self._send(op, dict(fields)) for op, fields in requests]
            finals: Dict[int, Dict[str, Any]] = {}
            while len(finals) < len(rids):
                reply = self._recv([r for r in rids if r not in finals])
                if not reply.get("more"):
                    finals[reply["id"]] = reply
            return [finals[r] for r in rids]
        finally:
            self._drop_inputs()

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

    def _ensure_hello(self) -> None:
        if self._hello is None:
            self.hello()

    # ---- ops ----

    def hello(self) -> Dict[str, Any]:
        """Protocol version, model shape, limits and the shared-memory ring's name."""
        reply = self.call("hello")
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
        fields = self._generate_fields(prompt, max_tokens=max_tokens, temperature=temperature,
                                       top_p=top_p, top_k=top_k, presence_penalty=presence_penalty,
                                       frequency_penalty=frequency_penalty, stop=stop, seed=seed,
                                       state=state, return_state=return_state, stream=stream,
                                       session=session)
        if not stream:
            return self._result(self.call("generate", **fields))
        return self._stream(fields)

    @staticmethod
    def _generate_fields(prompt: Prompt, *, max_tokens: int = 16, temperature: float = 1.0,
                         top_p: float = 1.0, top_k: int = 0, presence_penalty: float = 0.0,
                         frequency_penalty: float = 0.0, stop: Optional[Sequence[str]] = None,
                         seed: Optional[int] = None, state: Optional[np.ndarray] = None,
                         return_state: bool = False, stream: bool = False,
                         session: Optional[int] = None) -> Dict[str, Any]:
        return dict(_prompt_fields(prompt), max_tokens=max_tokens, temperature=float(temperature),
                    top_p=float(top_p), top_k=top_k, presence_penalty=float(presence_penalty),
                    frequency_penalty=float(frequency_penalty),
                    stop=list(stop) if stop else None, seed=seed,
                    state=_state_bytes(state) if state is not None else None,
                    return_state=return_state or None, stream=stream or None, session=session)

    def generate_all(self, prompts: Sequence[Prompt], *, sessions: Optional[Sequence[int]] = None,
                     **options: Any) -> List[GenerateResult]:
        """Several generations in flight at once on this connection, batched by the worker (e.g.
        the field prompts of a document, each on a fork of its session). `sessions`: one per
        prompt, or None. Options as for generate(), without streaming. Results in prompt order.
        """
        if options.get("stream"):
            raise ValueError("generate_all does not stream")
        if sessions is not None and len(sessions) != len(prompts):
            raise ValueError("generate_all: one session per prompt, or none")
        self._ensure_hello()
        requests = []
        for i, prompt in enumerate(prompts):
            fields = self._generate_fields(prompt, **options,
                                           session=None if sessions is None else sessions[i])
            requests.append(("generate", fields))
        return [self._result(r) for r in self.call_all(requests)]

    def _result(self, r: Dict[str, Any]) -> GenerateResult:
        return GenerateResult(tokens=list(r.get("tokens", [])), text=r.get("text", ""),
                              finish_reason=r["finish_reason"], prompt_tokens=r["prompt_tokens"],
                              completion_tokens=r["completion_tokens"], seed=r["seed"],
                              state=self._tensor(r["state"]) if "state" in r else None,
                              session=r.get("session"))

    def _stream(self, fields: Dict[str, Any]) -> Iterator[Chunk]:
        rid = self._send("generate", fields)
        finished = False
        try:
            while True:
                r = self._recv(rid)
                if r.get("more"):
                    yield Chunk(list(r.get("tokens", [])), r.get("text", ""))
                    continue
                finished = True
                yield Chunk(list(r.get("tokens", [])), r.get("text", ""), self._result(r))
                return
        finally:
            self._drop_inputs()
            if not finished and self._sock is not None:  # (a dropped socket took it along)
                try:
                    self._send("cancel", {"target": rid})
                except zmq.ZMQError:
                    pass

    def embed(self, inputs: Union[Prompt, Sequence[Prompt]]) -> np.ndarray:
        """Embeddings (final norm, last token): [n_embd] for one input, [n, n_embd] for many.

        An input is a string or a list of token ids.
        """
        self._ensure_hello()
        if _is_single(inputs):
            return self._tensor(self.call("embed", **_prompt_fields(inputs))["embeddings"])[0]
        items = [p if isinstance(p, str) else [int(t) for t in p] for p in inputs]
        return self._tensor(self.call("embed", inputs=items)["embeddings"])

    def forward(self, prompt: Prompt, *, output: str = "last_logits",
                session: Optional[int] = None, state: Optional[np.ndarray] = None,
                return_state: bool = False) -> ForwardResult:
        """Run `prompt` without sampling: logits or final-norm hidden states (PROTOCOL.md, Forward).

        `output` is one of OUTPUTS. With `session` the session's state is continued and
        advanced; with `state` a stateless request starts from it (else from zeros).
        The output of one request must fit in the worker's max_message_bytes (too_large
        otherwise): split long inputs over several requests on a session.
        """
        if output not in OUTPUTS:
            raise ValueError(f"output must be one of {OUTPUTS}, not {output!r}")
        self._ensure_hello()
        r = self.call("forward", **_prompt_fields(prompt), output=output, session=session,
                      state=_state_bytes(state) if state is not None else None,
                      return_state=return_state or None)
        return ForwardResult(output=self._tensor(r["output"]), n_tokens=r["n_tokens"],
                             state=self._tensor(r["state"]) if "state" in r else None,
                             session=r.get("session"), position=r.get("position"))

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
        """Hand back held leases and close the socket. Arrays still alive first become private
        copies of what they show (_shm.Ring.detach), so their leases go back too. The release is
        not waited for: a dead worker must not make close() take the whole timeout (a lost one
        is freed when the worker finds this client gone)."""
        try:
            leases = list(self._pending)
            self._pending.clear()  # not piggy-backed as well
            if self._ring is not None:
                leases += self._ring.detach()  # arrays still alive keep their bytes
            if leases and self._sock is not None:  # (no reconnecting just for this)
                self._send("release", {"leases": leases})
        except zmq.ZMQError:
            pass
        if self._sock is not None:
            self._sock.close(linger=200)
        self._ctx.term()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Session:
    """A recurrent state held by the worker; ops on it apply in the order they are sent."""

    def __init__(self, client: Client, session_id: int) -> None:
        self.client = client
        self.id = session_id

    def feed(self, prompt: Prompt) -> int:
        """Advance the state over `prompt`; returns the session's position (tokens consumed)."""
        return self.client.call("session_feed", session=self.id, **_prompt_fields(prompt))["position"]

    def generate(self, prompt: Prompt, **kwargs: Any) -> Union[GenerateResult, Iterator[Chunk]]:
        """Client.generate continuing this session's state (which then includes the output)."""
        return self.client.generate(prompt, session=self.id, **kwargs)

    def embed(self, prompt: Prompt) -> np.ndarray:
        """Feed `prompt` and return the embedding of its last token, [n_embd]."""
        return self.client._tensor(
            self.client.call("embed", session=self.id, **_prompt_fields(prompt))["embeddings"])[0]

    def forward(self, prompt: Prompt, output: str = "last_logits") -> ForwardResult:
        """Client.forward continuing (and advancing) this session's state."""
        return self.client.forward(prompt, output=output, session=self.id)

    def state(self) -> np.ndarray:
        """The state, [n_layer, head_size + 2, n_embd] float32 (docs/STATE_LAYOUT.md)."""
        return self.client._tensor(self.client.call("session_state", session=self.id)["state"])

    def set_state(self, state: np.ndarray) -> None:
        """Replace the state (any shape with the right number of float32 values)."""
        self.client.call("session_set_state", session=self.id, state=_state_bytes(state))

    def fork(self) -> "Session":
        """A new session starting from a copy of this one's state."""
        return Session(self.client, self.client.call("session_fork", session=self.id)["session"])

    def share(self) -> str:
        """A token (32 hex digits) with which any client can fork this session
        (Client.fork_shared), i.e. read its state, until it is closed or unshared. Sharing again
        returns the same token. Later feeds change what later forks copy."""
        return self.client.call("session_share", session=self.id)["token"]

    def unshare(self) -> None:
        """Revoke the share token; forks already made with it stay."""
        self.client.call("session_unshare", session=self.id)

    def close(self) -> None:
        """Free the session on the worker."""
        self.client.call("session_close", session=self.id)

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
