"""Sharing a session with another client by token (PROTOCOL.md, "Sharing a session"), through
the Python client and a real worker process."""
from __future__ import annotations

import re

import numpy as np
import pytest

import rwkvd


def test_another_client_forks_a_shared_session_until_it_is_closed(worker):
    with worker.client() as owner, worker.client() as other:
        doc = owner.session()
        doc.feed("A document several agents analyse.")
        token = doc.share()
        assert re.fullmatch(r"[0-9a-f]{32}", token)
        assert doc.share() == token  # the same capability, not a new one
        fork = other.fork_shared(token)
        assert np.array_equal(fork.state(), doc.state())
        fork.feed(" The other's own question.")  # the fork is the other client's
        with pytest.raises(rwkvd.WorkerError) as e:
            owner.call("session_state", session=fork.id)
        assert e.value.code == rwkvd.ErrorCode.UNKNOWN_SESSION
        kept = fork.state().copy()

        doc.unshare()
        with pytest.raises(rwkvd.WorkerError) as e:
            other.fork_shared(token)
        assert e.value.code == rwkvd.ErrorCode.UNKNOWN_SESSION
        token = doc.share()
        other.fork_shared(token).close()

        doc.close()
        with pytest.raises(rwkvd.WorkerError) as e:
            other.fork_shared(token)
        assert e.value.code == rwkvd.ErrorCode.UNKNOWN_SESSION  # as for a token never made
        with pytest.raises(rwkvd.WorkerError) as e:
            other.fork_shared("0" * 32)
        assert e.value.code == rwkvd.ErrorCode.UNKNOWN_SESSION
        assert np.array_equal(fork.state(), kept)  # forks made before stay
        fork.close()


@pytest.mark.parametrize("fields, code", [
    ({"token": "0" * 31}, rwkvd.ErrorCode.BAD_VALUE),
    ({"token": "G" * 32}, rwkvd.ErrorCode.BAD_VALUE),
    ({"token": 12}, rwkvd.ErrorCode.BAD_TYPE),
    ({"token": "0" * 32, "session": 5}, rwkvd.ErrorCode.BAD_VALUE),
    ({}, rwkvd.ErrorCode.MISSING_FIELD),
])
def test_a_fork_by_token_is_validated(worker, fields, code):
    with worker.client() as c:
        with pytest.raises(rwkvd.WorkerError) as e:
            c.call("session_fork", **fields)
        assert e.value.code == code
        assert c.tokenize("still serving")
