"""A familiar face for users of web-rwkv's Python bindings (web_rwkv_py), over an rwkvd worker.

    from rwkvd.compat import Model, RnnOption

    model = Model()                                   # $RWKVD_ENDPOINT or the default socket
    tokens = model.encode("The Eiffel Tower is")
    logits = model.run(tokens, token_chunk_size=128)  # float32 [n_vocab]
    state = model.back_state().to_numpy()             # [n_layer, head_size + 2, n_embd], no copy
    hidden = model.run(tokens, option=RnnOption.EmbedFull)   # [n_tokens, n_embd]
    emb = model.embed(tokens, last_only=True)         # [n_embd], from a zero state

Everything here is pure Python over `rwkvd.Client`: a `Runner` (and `Model`, a Runner that also
opens the connection) is bound to one worker *session*, whose recurrent state plays the part of
web-rwkv's model state: `run` advances it, `back_state` reads it, `load_state`/`clear_state`
replace it. `embed` and `embed_batch` are stateless (a document from a zero state) and can go
through an `EmbeddingCache`.

Arrays returned here view the worker's shared-memory ring when they came back in one reply
(read-only, zero copy, the ring lease released when they are garbage-collected); results
assembled from several chunks are ordinary arrays. Either kind keeps its bytes for as long as it
lives. Code that writes into a result (web_rwkv_py gave lists: `logits[0] = -inf`,
`E /= norm`) takes a writable copy first: `np.array(x)` (`state.copy()` for a BackedState).

`token_chunk_size` is the number of tokens sent per request: a prompt is fed to the session in
chunks of at most that many tokens (capped by the worker's `max_tokens`, and for all-position
outputs so that one reply stays within `max_message_bytes`). The state carries over between
chunks, so the result equals the unchunked one (up to float rounding; the CPU backend gives
identical bits); only the memory and latency of each request change.
"""
from __future__ import annotations

import collections
import enum
import threading
from dataclasses import dataclass
from typing import (Any, Dict, Hashable, Iterable, List, Optional, Sequence, Tuple, Union)

import numpy as np

from .client import Client, Session
from .errors import ClosedError, InvalidArgument

__all__ = ["Model", "Runner", "RnnOption", "StateDevice", "ModelInfo", "BackedState",
           "EmbeddingCache", "DEFAULT_TOKEN_CHUNK_SIZE"]

DEFAULT_TOKEN_CHUNK_SIZE = 128  # web_rwkv_py's default
Tokens = Union[Sequence[int], np.ndarray]


class RnnOption(enum.Enum):
    """What `Runner.run` returns (web-rwkv's RnnOption, plus the embedding variants).

    The value is the protocol's `forward` output name.
    """

    Last = "last_logits"            # logits after the last token: [n_vocab]
    Full = "all_logits"             # logits after every token: [n_tokens, n_vocab]
    EmbedLast = "last_embedding"    # final-norm hidden state, head skipped: [n_embd]
    EmbedFull = "all_embeddings"    # the same for every token: [n_tokens, n_embd]

    @classmethod
    def parse(cls, option: Union["RnnOption", str]) -> "RnnOption":
        """An RnnOption from itself, its name ("Full") or its protocol value ("all_logits")."""
        if isinstance(option, cls):
            return option
        if isinstance(option, str):
            for o in cls:
                if option in (o.name, o.value) or option.lower() == o.name.lower():
                    return o
        raise InvalidArgument(f"unknown option {option!r}; use one of {[o.name for o in cls]}")

    @property
    def all_positions(self) -> bool:
        """True for the options that return one row per token."""
        return self in (RnnOption.Full, RnnOption.EmbedFull)

    @property
    def logits(self) -> bool:
        """True for the options that return logits (else hidden states)."""
        return self in (RnnOption.Last, RnnOption.Full)


class StateDevice(enum.Enum):
    """Accepted for source compatibility: rwkvd states always come back to host memory."""

    Cpu = "cpu"
    Gpu = "gpu"


@dataclass(frozen=True)
class ModelInfo:
    """The worker's model (web_rwkv_py's ModelInfo fields, plus rwkvd's own names)."""

    version: str
    num_layer: int
    num_emb: int
    num_vocab: int
    num_head: int
    head_size: int
    state_shape: Tuple[int, int, int]
    name: str = ""
    has_tokenizer: bool = True


class BackedState:
    """A state read back from the worker: float32 [n_layer, head_size + 2, n_embd].

    The layout is web-rwkv's v7 layout (docs/STATE_LAYOUT.md). `to_numpy()` returns the array
    as it arrived: when the client mapped the worker's shared-memory ring, a read-only view of
    it (no copy; the ring lease is released when the last view is collected).
    """

    def __init__(self, array: np.ndarray) -> None:
        self._array = array

    def to_numpy(self) -> np.ndarray:
        """The state as a numpy array, without copying (read-only when it views the ring)."""
        return self._array

    def to_list(self, flat: bool = False) -> list:
        """The state as Python floats: nested [layer][row][channel], or one flat list.

        `np.array(state.to_list(), dtype=np.float32)` equals `to_numpy()`, only slower.
        """
        return self._array.reshape(-1).tolist() if flat else self._array.tolist()

    def copy(self) -> "BackedState":
        """An owned, writable copy."""
        return BackedState(np.array(self._array, dtype=np.float32, copy=True))

    deep_clone = copy  # web_rwkv_py's spelling

    def device(self) -> StateDevice:
        """Always StateDevice.Cpu: the state is in this process's memory."""
        return StateDevice.Cpu

    def to(self, device: StateDevice) -> "BackedState":
        """Source compatibility: returns self."""
        return self

    @property
    def shape(self) -> Tuple[int, ...]:
        """(n_layer, head_size + 2, n_embd)."""
        return tuple(self._array.shape)

    @property
    def nbytes(self) -> int:
        """Size in bytes."""
        return int(self._array.nbytes)

    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> np.ndarray:
        if copy:
            return np.array(self._array, dtype=dtype, copy=True)
        return self._array if dtype is None else self._array.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return f"BackedState(shape={self.shape})"


def _token_list(tokens: Tokens) -> List[int]:
    out = [int(t) for t in (tokens.reshape(-1) if isinstance(tokens, np.ndarray) else tokens)]
    if not out:
        raise InvalidArgument("input tokens cannot be empty")
    return out


class EmbeddingCache:
    """An LRU cache of embeddings for repeated inputs, bounded by bytes and by entries.

    Values are owned, read-only float32 copies (so they outlive ring leases and nobody can
    alter a cached result); a hit returns the very same array object. Thread-safe, so several
    runners (one client each) may share one cache; keys include the model's shape, but use one
    cache per model file.
    """

    def __init__(self, max_bytes: int = 64 << 20, max_entries: int = 4096) -> None:
        if max_bytes <= 0 or max_entries <= 0:
            raise InvalidArgument("max_bytes and max_entries must be positive")
        self.max_bytes = int(max_bytes)
        self.max_entries = int(max_entries)
        self._items: "collections.OrderedDict[Hashable, np.ndarray]" = collections.OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    @staticmethod
    def key(model_key: Hashable, tokens: Union[str, Sequence[int]], last_only: bool) -> Hashable:
        """The key of one input: the model, the kind of output and the tokens (or the text)."""
        if isinstance(tokens, str):
            body: Hashable = ("text", tokens)
        else:
            body = ("tokens", np.asarray(tokens, dtype="<i4").tobytes())
        return (model_key, bool(last_only), body)

    def get(self, key: Hashable) -> Optional[np.ndarray]:
        """The cached array (now most recently used) or None; counts a hit or a miss."""
        with self._lock:
            arr = self._items.get(key)
            if arr is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return arr

    def put(self, key: Hashable, value: np.ndarray) -> np.ndarray:
        """Store an owned read-only copy of `value` and return it (the array later hits give).

        A value larger than max_bytes is returned (copied) without being stored.
        """
        arr = np.array(value, dtype=np.float32, copy=True)
        arr.flags.writeable = False
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old.nbytes
            if arr.nbytes > self.max_bytes:
                return arr
            self._items[key] = arr
            self._bytes += arr.nbytes
            while self._bytes > self.max_bytes or len(self._items) > self.max_entries:
                _, gone = self._items.popitem(last=False)
                self._bytes -= gone.nbytes
                self.evictions += 1
        return arr

    def clear(self) -> None:
        """Drop every entry (the counters stay)."""
        with self._lock:
            self._items.clear()
            self._bytes = 0

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached arrays."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def stats(self) -> Dict[str, int]:
        """hits, misses, evictions, entries, bytes."""
        with self._lock:
            return {"hits": self.hits, "misses": self.misses, "evictions": self.evictions,
                    "entries": len(self._items), "bytes": self._bytes}


class Runner:
    """A worker session driven like web_rwkv_py's model: run, back_state, load_state, embed.

    Args:
        endpoint: a `Client` to share (not closed by this runner), another Runner/Model (its
            client is shared), an endpoint string ("ipc://PATH", "tcp://HOST:PORT"), or None for
            the default endpoint (then the runner owns its client and closes it). A model file
            is not an endpoint: the worker loads it (`rwkvd serve --model FILE`); BadEndpoint
            says so.
        state: the initial state (a BackedState, an array or a list); zeros by default.
        token_chunk_size: the default number of tokens per request (see the module doc).
        cache: an EmbeddingCache used by `embed` and `embed_batch`.
        timeout, use_shm: passed to the Client when the runner creates one.

    Calls from several threads take turns on its Client; a Runner's state is one sequence, so
    two threads running it interleave their tokens. Close it (or use `with`) to free the
    worker session; an abandoned one is reclaimed after the worker's session idle time.
    """

    def __init__(self, endpoint: Union[Client, "Runner", str, None] = None, *,
                 state: Union["BackedState", np.ndarray, Sequence[Any], None] = None,
                 token_chunk_size: int = DEFAULT_TOKEN_CHUNK_SIZE,
                 cache: Optional[EmbeddingCache] = None, timeout: float = 60.0,
                 use_shm: bool = True) -> None:
        if isinstance(endpoint, Runner):
            endpoint = endpoint.client
        if isinstance(endpoint, Client):
            self.client = endpoint
            self._owns_client = False
        else:
            self.client = Client(endpoint, timeout=timeout, use_shm=use_shm)
            self._owns_client = True
        self.token_chunk_size = self._check_chunk(token_chunk_size)
        self.cache = cache
        self._session: Optional[Session] = None
        try:
            hp = self.client.model
            limits = self.client.limits
            self._n_vocab = int(hp["n_vocab"])
            self._n_embd = int(hp["n_embd"])
            self._state_shape = tuple(int(d) for d in hp["state_shape"])
            self._state_floats = int(hp["state_floats"])
            self._max_tokens = int(limits["max_tokens"])
            self._max_batch = int(limits["max_batch"])
            self._max_message_bytes = int(limits["max_message_bytes"])
            self._model_key = (hp.get("name", ""), self._n_vocab, self._n_embd,
                               self._state_floats)
            self._info = ModelInfo(version="V7", num_layer=int(hp["n_layer"]),
                                   num_emb=self._n_embd, num_vocab=self._n_vocab,
                                   num_head=self._n_embd // int(hp["head_size"]),
                                   head_size=int(hp["head_size"]),
                                   state_shape=self._state_shape,  # type: ignore[arg-type]
                                   name=str(hp.get("name", "")),
                                   has_tokenizer=bool(hp.get("has_tokenizer", True)))
            self._session = self.client.session(
                self._state_array(state) if state is not None else None)
        except BaseException:
            if self._owns_client:
                self.client.close()
            raise

    # ---- model and tokenizer ----

    def info(self) -> ModelInfo:
        """The model's shape."""
        return self._info

    def encode(self, text: str) -> List[int]:
        """Token ids of `text` (the worker's tokenizer)."""
        return self.client.tokenize(text)

    def decode(self, tokens: Tokens) -> str:
        """Text of `tokens` (invalid UTF-8 replaced); web_rwkv_py's Tokenizer gave bytes."""
        return self.client.detokenize(_token_list(tokens))

    @property
    def session(self) -> Session:
        """The worker session holding this runner's state."""
        if self._session is None:
            raise ClosedError("this runner is closed")
        return self._session

    # ---- state ----

    def back_state(self, device: StateDevice = StateDevice.Cpu) -> BackedState:
        """The current state (zero copy through shared memory when mapped)."""
        return BackedState(self.session.state())

    def load_state(self, state: Union[BackedState, np.ndarray, Sequence[Any]]) -> None:
        """Replace the state with `state` (BackedState, array or nested/flat list of floats)."""
        self.session.set_state(self._state_array(state))

    def clear_state(self) -> None:
        """Back to the zero state (a fresh session; nothing large is sent)."""
        old = self.session
        self._session = self.client.session()
        old.close()

    def init_state(self) -> BackedState:
        """A zero state of this model's shape."""
        return BackedState(np.zeros(self._state_shape, dtype=np.float32))

    def _state_array(self, state: Union[BackedState, np.ndarray, Sequence[Any]]) -> np.ndarray:
        arr = state.to_numpy() if isinstance(state, BackedState) else np.asarray(state,
                                                                                  np.float32)
        if arr.size != self._state_floats:
            raise InvalidArgument(f"a state has {self._state_floats} floats "
                             f"{self._state_shape}; got {arr.size}")
        return arr

    # ---- running ----

    @staticmethod
    def _check_chunk(token_chunk_size: Optional[int]) -> int:
        if token_chunk_size is None:
            return DEFAULT_TOKEN_CHUNK_SIZE
        n = int(token_chunk_size)
        if n < 1:
            raise InvalidArgument(f"token_chunk_size must be >= 1, not {token_chunk_size}")
        return n

    def chunk_size(self, token_chunk_size: Optional[int] = None,
                   option: Union[RnnOption, str] = RnnOption.Last) -> int:
        """Tokens per request for this option: token_chunk_size (or the runner's default),
        capped by the worker's max_tokens and, for all-position outputs, by max_message_bytes."""
        n = self._check_chunk(token_chunk_size if token_chunk_size is not None
                              else self.token_chunk_size)
        opt = RnnOption.parse(option)
        n = min(n, self._max_tokens)
        if opt.all_positions:
            width = self._n_vocab if opt.logits else self._n_embd
            n = min(n, max(1, self._max_message_bytes // (4 * width)))
        return n

    @staticmethod
    def _split(tokens: List[int], n: int) -> List[List[int]]:
        return [tokens[i:i + n] for i in range(0, len(tokens), n)]

    def _run_on(self, session: Session, tokens: List[int], n: int, opt: RnnOption) -> np.ndarray:
        """Feed `tokens` to `session` in chunks of `n` and return the option's output."""
        chunks = self._split(tokens, n)
        if not opt.all_positions:
            for c in chunks[:-1]:
                session.feed(c)  # no output wanted: session_feed
            return session.forward(chunks[-1], output=opt.value).output[0]
        if len(chunks) == 1:
            return session.forward(chunks[0], output=opt.value).output
        width = self._n_vocab if opt.logits else self._n_embd
        out = np.empty((len(tokens), width), dtype=np.float32)
        row = 0
        for c in chunks:
            part = session.forward(c, output=opt.value).output
            out[row:row + len(c)] = part
            row += len(c)
            del part  # its ring lease goes with the next request
        return out

    def run(self, tokens: Tokens, token_chunk_size: Optional[int] = None,
            option: Union[RnnOption, str] = RnnOption.Last) -> np.ndarray:
        """Advance the state over `tokens` and return float32 output (see RnnOption).

        Last -> [n_vocab], Full -> [n_tokens, n_vocab], EmbedLast -> [n_embd],
        EmbedFull -> [n_tokens, n_embd]. Tokens go in requests of `chunk_size(...)` tokens; the
        result does not depend on it.
        """
        opt = RnnOption.parse(option)
        toks = _token_list(tokens)
        return self._run_on(self.session, toks, self.chunk_size(token_chunk_size, opt), opt)

    def run_full(self, tokens: Tokens, token_chunk_size: Optional[int] = None) -> np.ndarray:
        """run(option=RnnOption.Full): logits after every token, [n_tokens, n_vocab]."""
        return self.run(tokens, token_chunk_size, RnnOption.Full)

    # ---- stateless embeddings ----

    def _embed_uncached(self, tokens: Union[str, List[int]], n: int,
                        last_only: bool) -> np.ndarray:
        opt = RnnOption.EmbedLast if last_only else RnnOption.EmbedFull
        if isinstance(tokens, str):
            # A text of at most n bytes has at most n tokens: the worker tokenizes it.
            if len(tokens.encode("utf-8", "surrogateescape")) <= n:
                if last_only:
                    return self.client.embed(tokens)
                return self.client.forward(tokens, output=opt.value).output
            tokens = _token_list(self.encode(tokens))
        if len(tokens) <= n:
            if last_only:
                return self.client.embed(tokens)  # the batched embed path
            return self.client.forward(tokens, output=opt.value).output
        with self.client.session() as tmp:  # a long document: chunks on a scratch session
            return self._run_on(tmp, tokens, n, opt)

    def embed(self, tokens: Union[Tokens, str], token_chunk_size: Optional[int] = None,
              last_only: bool = True) -> np.ndarray:
        """The embedding of a document from a zero state (this runner's state is untouched).

        Final-norm hidden state with the head skipped: [n_embd] of the last token, or
        [n_tokens, n_embd] with last_only=False. `tokens` may also be a text. With a cache, a
        repeated input returns the cached array itself. (To embed *continuing* this runner's
        state, use run(option=RnnOption.EmbedLast).)
        """
        opt = RnnOption.EmbedLast if last_only else RnnOption.EmbedFull
        n = self.chunk_size(token_chunk_size, opt)
        item: Union[str, List[int]] = tokens if isinstance(tokens, str) else _token_list(tokens)
        if self.cache is None:
            return self._embed_uncached(item, n, last_only)
        key = EmbeddingCache.key(self._model_key, item, last_only)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        return self.cache.put(key, self._embed_uncached(item, n, last_only))

    def embed_batch(self, inputs: Iterable[Union[Tokens, str]],
                    token_chunk_size: Optional[int] = None,
                    last_only: bool = True) -> Union[np.ndarray, List[np.ndarray]]:
        """Embeddings of many documents, each from a zero state.

        last_only=True gives [n_inputs, n_embd]: short inputs go in as few batched `embed`
        requests as the worker's max_batch/max_tokens allow (one request: a zero-copy view),
        longer ones in chunks. last_only=False gives a list of [n_tokens_i, n_embd] arrays.
        Cached inputs are not sent again.
        """
        items: List[Union[str, List[int]]] = [
            t if isinstance(t, str) else _token_list(t) for t in inputs]
        if not items:
            raise InvalidArgument("embed_batch needs at least one input")
        if not last_only:
            return [self.embed(t, token_chunk_size, last_only=False) for t in items]
        n = self.chunk_size(token_chunk_size, RnnOption.EmbedLast)
        results: List[Optional[np.ndarray]] = [None] * len(items)
        keys: List[Hashable] = []
        if self.cache is not None:
            for i, t in enumerate(items):
                keys.append(EmbeddingCache.key(self._model_key, t, True))
                results[i] = self.cache.get(keys[i])
        todo = [i for i, r in enumerate(results) if r is None]

        def size(t: Union[str, List[int]]) -> int:  # an upper bound of the token count
            return len(t.encode("utf-8", "surrogateescape")) if isinstance(t, str) else len(t)

        short = [i for i in todo if size(items[i]) <= n]
        long_ = [i for i in todo if size(items[i]) > n]
        # Group the short ones into requests within max_batch and max_tokens.
        groups: List[List[int]] = []
        tokens_in_group = 0
        for i in short:
            k = size(items[i])
            if (not groups or len(groups[-1]) >= self._max_batch
                    or tokens_in_group + k > self._max_tokens):
                groups.append([])
                tokens_in_group = 0
            groups[-1].append(i)
            tokens_in_group += k
        if len(groups) == 1 and not long_ and len(groups[0]) == len(items):
            out = self.client.embed([items[i] for i in groups[0]])  # one reply: a view
            if self.cache is not None:
                return np.stack([self.cache.put(keys[i], out[j]) for j, i in
                                 enumerate(groups[0])])
            return out
        for g in groups:
            out = self.client.embed([items[i] for i in g])
            for j, i in enumerate(g):
                results[i] = out[j]
        for i in long_:
            results[i] = self._embed_uncached(items[i], n, True)
        if self.cache is not None:
            for i in todo:
                results[i] = self.cache.put(keys[i], results[i])  # type: ignore[arg-type]
        return np.stack(results)  # type: ignore[arg-type]

    # ---- lifetime ----

    def close(self) -> None:
        """Close the worker session (and the client, when this runner created it)."""
        if self._session is not None:
            try:
                self._session.close()
            except Exception:
                pass  # already reclaimed, or the worker is gone
            self._session = None
        if self._owns_client:
            self.client.close()
            self._owns_client = False

    def __repr__(self) -> str:
        where = "closed" if self._session is None else f"session={self._session.id}"
        i = self._info
        return (f"{type(self).__name__}({where}, endpoint={self.client.endpoint!r}, "
                f"num_layer={i.num_layer}, num_emb={i.num_emb}, num_vocab={i.num_vocab})")

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Model(Runner):
    """web_rwkv_py.Model's face: a connection to the worker that is also a Runner.

    `Model(endpoint)` connects (the model is whatever the worker serves) and opens a session;
    `model.runner()` gives further independent Runners sharing the connection.
    """

    def runner(self, state: Union[BackedState, np.ndarray, Sequence[Any], None] = None,
               token_chunk_size: Optional[int] = None) -> Runner:
        """A new Runner (its own session) on this model's connection and cache."""
        return Runner(self.client, state=state,
                      token_chunk_size=(token_chunk_size if token_chunk_size is not None
                                        else self.token_chunk_size),
                      cache=self.cache)
