"""The soak in CI: 8 client processes x mixed requests for RWKVD_SOAK_SECONDS (default 30)
against one worker, a flood and a slow consumer beside them; scripts/soak runs the same code for
10 minutes."""
from __future__ import annotations

import os

import pytest

import soak
from conftest import start_worker


@pytest.mark.soak
def test_soak_mixed_clients(synthetic_model, capsys):
    seconds = float(os.environ.get("RWKVD_SOAK_SECONDS", "30"))
    for w in start_worker(synthetic_model, *soak.SOAK_WORKER_ARGS):
        res = soak.soak(w.endpoint, w.proc.pid, seconds, clients=8, attackers=True)
    with capsys.disabled():
        print("\n" + res.report())
    c = res.counts
    assert c.scenarios > 0 and c.replies > 0
    assert (c.lost, c.duplicated, c.unknown, c.mismatched, c.errors) == (0, 0, 0, 0, 0), c.notes
    assert c.requests == c.replies + c.lost
    assert len(res.samples) >= 8, res.report()
    assert res.rss_growth() <= soak.RSS_SLACK_BYTES, res.report()
    # What the attackers cost is bounded: the slow consumer's replies by --client-queue-bytes.
    assert res.rss_end <= soak.RSS_GROWTH_MAX * res.rss_start, res.report()
    assert res.attackers["slow"]["dropped"] > 0, res.report()
