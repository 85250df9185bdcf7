"""Python client of the rwkvd worker (pure Python: pyzmq, numpy, msgpack).

    from rwkvd import Client
    with Client() as c:
        print(c.generate("Hello", max_tokens=20).text)
        v = c.embed(["one text", "another"])      # float32 [2, n_embd], viewing shared memory
        with c.session() as s:
            s.feed("Some context")
            st = s.state()                        # [n_layer, head_size + 2, n_embd]

`rwkvd.AsyncClient` offers the same operations to asyncio code. `rwkvd.compat` gives the same
worker the shape of web-rwkv's Python bindings (Model/Runner, run with RnnOption,
back_state().to_numpy(), embed, EmbeddingCache); see clients/python/README.md.
"""
from .aio import AsyncClient, AsyncSession
from .client import (OUTPUTS, Chunk, Client, ForwardResult, GenerateResult, Session,
                     default_endpoint)
from .errors import (BadEndpoint, ClosedError, CurveKeyError, ErrorCode, InvalidArgument,
                     NoWorker, ProtocolViolation, RequestTimeout, RwkvdError, TransportError,
                     UnsafeEndpoint, WorkerError, WrongLoop, WrongProcess)

__all__ = ["Client", "Session", "AsyncClient", "AsyncSession", "Chunk", "GenerateResult",
           "ForwardResult", "OUTPUTS", "default_endpoint", "ErrorCode",
           "RwkvdError", "WorkerError", "RequestTimeout", "ProtocolViolation", "InvalidArgument",
           "BadEndpoint", "ClosedError", "WrongProcess", "WrongLoop", "TransportError",
           "NoWorker", "UnsafeEndpoint", "CurveKeyError"]
__version__ = "0.1.0"
