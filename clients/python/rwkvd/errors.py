"""Exceptions raised by the rwkvd client, and the worker's error codes (PROTOCOL.md)."""
from __future__ import annotations

import enum


class ErrorCode(enum.IntEnum):
    """Stable error numbers of protocol v1 (never renumbered)."""

    BAD_MESSAGE = 1
    BAD_VERSION = 2
    UNKNOWN_OP = 3
    MISSING_FIELD = 4
    BAD_TYPE = 5
    BAD_VALUE = 6
    UNKNOWN_FIELD = 7
    TOO_LARGE = 8
    BAD_TOKEN = 9
    UNKNOWN_SESSION = 10
    UNKNOWN_LEASE = 11
    BAD_STATE = 12
    BUSY = 13
    CANCELLED = 14
    SHUTTING_DOWN = 15
    UNSUPPORTED = 16
    INTERNAL = 17
    UNKNOWN_REQUEST = 18
    QUOTA_EXCEEDED = 19


class RwkvdError(Exception):
    """Base class of every error this package raises."""


class WorkerError(RwkvdError):
    """The worker answered a request with an error.

    Attributes:
        code: the numeric error code (an ErrorCode when known).
        name: the code's name as the worker spells it, e.g. "bad_token".
        message: the worker's readable explanation.
    """

    def __init__(self, code: int, name: str, message: str) -> None:
        try:
            self.code: int = ErrorCode(code)
        except ValueError:
            self.code = code
        self.name = name
        self.message = message
        super().__init__(f"{name} ({int(code)}): {message}")


class RequestTimeout(RwkvdError, TimeoutError):
    """No reply within the client's timeout (worker gone, stuck or overloaded)."""


class ProtocolViolation(RwkvdError):
    """The worker sent something this client cannot understand."""


class InvalidArgument(RwkvdError, ValueError):
    """An argument the client refuses before sending anything (also a ValueError)."""


class BadEndpoint(InvalidArgument):
    """The endpoint is not "ipc://PATH" or "tcp://HOST:PORT" (or ZeroMQ refused it)."""


class ClosedError(RwkvdError):
    """A Client, Session or compat Runner was used after its close()."""


class WrongProcess(RwkvdError):
    """A client made before fork() was used in the child. ZeroMQ sockets do not survive fork:
    make a new client in the child (sessions belong to the parent's client; share them by
    token with Session.share() and Client.fork_shared())."""


class WrongLoop(RwkvdError):
    """An AsyncClient was used from an event loop other than the one it first ran in."""


class TransportError(RwkvdError):
    """ZeroMQ failed to send or receive on the client's socket."""


class NoWorker(RwkvdError, ConnectionError):
    """No worker at the endpoint: no socket file, or no answer to a hello within a second. The
    message names the endpoint and how to start a worker."""


class UnsafeEndpoint(RwkvdError, PermissionError):
    """The endpoint's socket, or a directory on its way, is another user's or writable by others:
    a socket there could be an impostor's, so the client refuses to connect."""


class CurveKeyError(RwkvdError):
    """A tcp endpoint needs CURVE keys (docs/THREAT_MODEL.md) and they are missing or unusable."""
