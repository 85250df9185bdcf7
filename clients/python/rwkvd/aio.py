"""The rwkvd client for asyncio: the operations of rwkvd.Client as coroutines (zmq.asyncio).

    async with rwkvd.AsyncClient() as c:
        print((await c.generate("Hello", max_tokens=20)).text)
        async for chunk in await c.generate("Once", max_tokens=20, stream=True):
            print(chunk.text, end="")
        v = await c.embed(["one", "two"], normalize=True)
        async with await c.session() as s:
            await s.feed("context")
            st = await s.state()

Many coroutines may use one AsyncClient at once: their requests are in flight together on its
socket (the worker batches them) and each reply goes to the coroutine that sent its request.
It belongs to the event loop it first runs in (WrongLoop elsewhere) and, like Client, raises
WrongProcess in a forked child. Results are the same objects as Client's (read-only views of the
worker's shared memory where mapped; `np.array(x)` is a writable copy).
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import zmq
import zmq.asyncio

from .client import (Chunk, ForwardResult, GenerateResult, Prompt, _Base, _prompt_fields,
                     _SessionBase, _state_bytes, generate_all_requests,
                     generate_fields, shared_context)
from .errors import ClosedError, RwkvdError, TransportError, WorkerError, WrongLoop


class AsyncClient(_Base):
    """A connection to an rwkvd worker for asyncio code (arguments as for Client)."""

    def __init__(self, endpoint: Optional[str] = None, timeout: float = 60.0,
                 use_shm: bool = True, server_key: Optional[str] = None) -> None:
        super().__init__(endpoint, timeout, use_shm, server_key)
        self._ctx = shared_context(zmq.asyncio.Context)
        self._sock: Optional[zmq.asyncio.Socket] = None
        self._open_socket()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        # One coroutine at a time reads the socket and files what comes; the others wait for
        # `_wake`, set (and replaced) after each message.
        self._reading = False
        self._wake: Optional[asyncio.Event] = None  # made in the loop: _check_usable
        self._last_seen = time.monotonic()

    # ---- plumbing ----

    def _check_usable(self) -> None:
        super()._check_usable()
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
            self._wake = asyncio.Event()
        elif loop is not self._loop:
            raise WrongLoop("this AsyncClient belongs to another event loop: make one per loop")

    def _send(self, op: str, fields: Dict[str, Any]) -> int:
        if self._sock is None:
            self._open_socket()
        rid, data = self._encode(op, fields)
        # Not awaited: a DEALER queues what it cannot send yet. A send that failed at once
        # raises here; one that fails later has its error read (a lost request times out).
        sent = self._sock.send(data)
        if sent.done() and not sent.cancelled() and sent.exception() is not None:
            self._done([rid])
            raise TransportError(f"cannot send to {self.endpoint}: {sent.exception()}")
        sent.add_done_callback(lambda f: f.cancelled() or f.exception())
        return rid

    def _wake_all(self) -> None:
        wake = self._wake
        if wake is not None:
            self._wake = asyncio.Event()
            wake.set()

    def _reset_socket(self) -> None:
        super()._reset_socket()
        self._wake_all()

    async def _read_one(self, left: float) -> bool:
        """Reads and files one message within `left` seconds; False if none came. (A recv
        future, not poll: pyzmq wakes pending receives after our own sends, not polls.)"""
        self._reading = True
        try:
            data = await asyncio.wait_for(self._sock.recv(), left)
        except asyncio.TimeoutError:
            return False
        except asyncio.CancelledError:
            if self._closed:
                raise ClosedError(f"AsyncClient of {self.endpoint} closed during the call")
            raise
        except zmq.ZMQError as e:
            raise TransportError(f"cannot receive from {self.endpoint}: {e}") from None
        finally:
            self._reading = False
            self._wake_all()  # a waiter takes over reading, or finds its reply
        self._last_seen = time.monotonic()
        self._route(self._decode(data), fallback=-1)
        self._wake_all()
        return True

    async def _recv(self, rids: Sequence[int]) -> Dict[str, Any]:
        """The next reply to one of `rids`, with Client's timeout and heartbeat rules."""
        start = time.monotonic()
        deadline = start + self.timeout
        while True:
            reply = self._take(rids)
            if reply is not None:
                return reply
            liveness = self._liveness
            alive_until = max(start, self._last_seen) + liveness if liveness else deadline
            left = min(deadline, alive_until) - time.monotonic()
            if left <= 0:
                error = self._timed_out(gone=alive_until < deadline)
                if not self._reading:
                    self._reset_socket()
                raise error
            if not self._reading:
                await self._read_one(left)
                continue
            assert self._wake is not None
            try:
                await asyncio.wait_for(self._wake.wait(), left)
            except asyncio.TimeoutError:
                pass

    async def _final(self, rids: List[int]) -> Dict[int, Dict[str, Any]]:
        finals: Dict[int, Dict[str, Any]] = {}
        while len(finals) < len(rids):
            reply = await self._recv([r for r in rids if r not in finals])
            if not reply.get("more"):
                finals[reply["id"]] = reply
                self._done([reply["id"]])
        return finals

    async def call(self, op: str, **fields: Any) -> Dict[str, Any]:
        """Low level: one request, its final reply map (stream chunks are skipped)."""
        return (await self.call_all([(op, fields)]))[0]

    async def call_all(self,
                       requests: Sequence[Tuple[str, Dict[str, Any]]]) -> List[Dict[str, Any]]:
        """Low level: every request in flight together; their final replies in order."""
        self._check_usable()
        rids: List[int] = []
        try:
            for op, fields in requests:
                rids.append(self._send(op, dict(fields)))
            finals = await self._final(rids)
            return [finals[r] for r in rids]
        finally:
            self._done(rids)
            self._drop_inputs()

    async def _ensure_hello(self) -> None:
        self._check_usable()
        if self._hello is None:
            await self.hello()

    # ---- ops ----

    async def hello(self) -> Dict[str, Any]:
        """Protocol version, model shape, limits and the shared-memory ring's name."""
        return self._on_hello(await self.call("hello"))

    @property
    def limits(self) -> Dict[str, Any]:
        """The worker's limits, known once a call has run (`await c.hello()`)."""
        return dict(self._known_hello()["limits"])

    @property
    def model(self) -> Dict[str, Any]:
        """The worker's model shape, known once a call has run (`await c.hello()`)."""
        return dict(self._known_hello()["model"])

    def _known_hello(self) -> Dict[str, Any]:
        if self._hello is None:
            raise RwkvdError("not connected yet: await hello() first")
        return self._hello

    async def info(self) -> Dict[str, Any]:
        """Model, device, memory, limits and options of the worker."""
        return await self.call("info")

    async def stats(self) -> Dict[str, Any]:
        """Counters: requests, errors, batch-size histograms, latencies, cache and shm use."""
        return (await self.call("stats"))["stats"]

    async def tokenize(self, text: str) -> List[int]:
        """Token ids of `text` with the worker's tokenizer."""
        return list((await self.call("tokenize", text=text))["tokens"])

    async def detokenize(self, tokens: Sequence[int]) -> str:
        """Text of `tokens` (invalid UTF-8 replaced)."""
        return (await self.call("detokenize", tokens=[int(t) for t in tokens]))["text"]

    async def generate(self, prompt: Prompt, *, stream: bool = False, **options: Any
                       ) -> Union[GenerateResult, AsyncIterator[Chunk]]:
        """Client.generate's options. With stream=True returns an async iterator of Chunks (the
        last one has `.result`); leaving it early (aclose, break) cancels the generation."""
        await self._ensure_hello()
        fields = generate_fields(prompt, stream=stream, **options)
        if not stream:
            return self._result(await self.call("generate", **fields))
        return self._stream(self._send("generate", fields))

    async def _stream(self, rid: int) -> AsyncIterator[Chunk]:
        finished = False
        try:
            while True:
                r = await self._recv([rid])
                chunk = self._chunk(r)
                finished = chunk.result is not None
                yield chunk
                if finished:
                    return
        finally:
            self._end_stream(rid, finished)

    async def generate_all(self, prompts: Sequence[Prompt], *,
                           sessions: Optional[Sequence[int]] = None,
                           **options: Any) -> List[GenerateResult]:
        """As Client.generate_all."""
        requests = generate_all_requests(prompts, sessions, options)
        await self._ensure_hello()
        return [self._result(r) for r in await self.call_all(requests)]

    async def embed(self, inputs: Union[Prompt, Sequence[Prompt]], *,
                    normalize: bool = False) -> np.ndarray:
        """As Client.embed: any number of inputs, batched within the worker's limits."""
        await self._ensure_hello()
        requests = self._embed_requests(inputs)
        parts: List[np.ndarray] = []
        for window in self._embed_windows(requests):
            parts += self._embed_parts(await self.call_all(window), len(requests))
        return self._embed_join(inputs, parts, normalize)

    async def forward(self, prompt: Prompt, *, output: str = "last_logits",
                      session: Optional[int] = None, state: Optional[np.ndarray] = None,
                      return_state: bool = False) -> ForwardResult:
        """As Client.forward."""
        fields = self._forward_fields(prompt, output, session, state, return_state)
        await self._ensure_hello()
        return self._forward_result(await self.call("forward", **fields))

    async def session(self, state: Optional[np.ndarray] = None) -> "AsyncSession":
        """A new session, from zeros or `state`."""
        await self._ensure_hello()
        r = await self.call("session_open",
                            state=_state_bytes(state) if state is not None else None)
        return AsyncSession(self, r["session"])

    async def fork_shared(self, token: str) -> "AsyncSession":
        """As Client.fork_shared: a session of ours from another's share token."""
        await self._ensure_hello()
        return AsyncSession(self, (await self.call("session_fork", token=token))["session"])

    async def release_now(self) -> None:
        """Send the releases of collected arrays now instead of with the next request."""
        if self._pending:
            leases = list(self._pending)
            self._pending.clear()
            try:
                await self.call("release", leases=leases)
            except WorkerError:
                pass  # not ours any more (a restarted worker, a replaced ring)

    def close(self) -> None:
        """As Client.close (not a coroutine: nothing is waited for)."""
        if self._begin_close():
            self._lose_in_flight()
            self._wake_all()
            if self._sock is not None:
                self._sock.close(linger=200)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()


class AsyncSession(_SessionBase):
    """A worker session driven from asyncio (Session's operations as coroutines)."""

    client: AsyncClient

    async def feed(self, prompt: Prompt) -> int:
        """Advance the state over `prompt`; returns the position."""
        return (await self.client.call("session_feed", session=self._sid,
                                       **_prompt_fields(prompt)))["position"]

    async def generate(self, prompt: Prompt, **kwargs: Any
                       ) -> Union[GenerateResult, AsyncIterator[Chunk]]:
        """AsyncClient.generate continuing this session's state."""
        return await self.client.generate(prompt, session=self._sid, **kwargs)

    async def embed(self, prompt: Prompt) -> np.ndarray:
        """Feed `prompt` and return the embedding of its last token, [n_embd]."""
        r = await self.client.call("embed", session=self._sid, **_prompt_fields(prompt))
        return self.client._tensor(r["embeddings"])[0]

    async def forward(self, prompt: Prompt, output: str = "last_logits") -> ForwardResult:
        """AsyncClient.forward continuing (and advancing) this session's state."""
        return await self.client.forward(prompt, output=output, session=self._sid)

    async def state(self) -> np.ndarray:
        """The state, [n_layer, head_size + 2, n_embd] float32."""
        r = await self.client.call("session_state", session=self._sid)
        return self.client._tensor(r["state"])

    async def set_state(self, state: np.ndarray) -> None:
        """Replace the state."""
        await self.client.call("session_set_state", session=self._sid, state=_state_bytes(state))

    async def fork(self) -> "AsyncSession":
        """A new session starting from a copy of this one's state."""
        r = await self.client.call("session_fork", session=self._sid)
        return AsyncSession(self.client, r["session"])

    async def share(self) -> str:
        """A token with which any client can fork this session (Session.share)."""
        return (await self.client.call("session_share", session=self._sid))["token"]

    async def unshare(self) -> None:
        """Revoke the share token; forks already made with it stay."""
        await self.client.call("session_unshare", session=self._sid)

    async def close(self) -> None:
        """Free the session on the worker. Again: nothing."""
        if self._begin_close():
            try:
                await self.client.call("session_close", session=self.id)
            except WorkerError as e:
                if not self._closed_anyway(e):
                    raise

    async def __aenter__(self) -> "AsyncSession":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
