"""What docs/THREAT_MODEL.md promises: private socket and segment, unguessable names and ids,
one client cannot touch another's leases or sessions, no network bind without --allow-remote."""
from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

import pytest

import rwkvd
from conftest import Worker, build_dir


def segment_of(pid: int) -> Path:
    segs = list(Path("/dev/shm").glob(f"rwkvd-{os.getuid()}-{pid}-*"))
    assert len(segs) == 1
    return segs[0]


def test_socket_directory_and_segment_are_private_and_ours(worker):
    for path, mode in ((worker.dir / "w.sock", 0o600), (worker.dir, 0o700),
                       (segment_of(worker.proc.pid), 0o600)):
        st = os.stat(path)
        assert stat.S_IMODE(st.st_mode) == mode, path
        assert st.st_uid == os.getuid() and st.st_gid == os.getgid(), path


def test_segment_names_and_ids_are_unguessable(synthetic_model, worker):
    other = Worker(synthetic_model, [])
    try:
        names = [segment_of(worker.proc.pid).name, segment_of(other.proc.pid).name]
    finally:
        other.stop()
    tails = []
    for n in names:
        m = re.fullmatch(rf"rwkvd-{os.getuid()}-(\d+)-([0-9a-f]{{32}})", n)
        assert m, n
        tails.append(m.group(2))
    assert tails[0] != tails[1]
    with worker.client() as c:
        sessions = [c.session() for _ in range(16)]
        ids = [s.id for s in sessions]
        for s in sessions:
            s.close()
        leases = []
        for i in range(16):
            r = c.call("embed", text=f"x{i}")
            leases.append(r["embeddings"]["shm"]["lease"])
        c.call("release", leases=leases)
    for values, bits in ((ids, 53), (leases, 64)):
        assert len(set(values)) == len(values)
        assert all(0 < v < 2 ** bits for v in values)
        # Not a counter: consecutive ids are far apart and unevenly spaced.
        gaps = {b - a for a, b in zip(values, values[1:])}
        assert len(gaps) == len(values) - 1
        assert max(values) - min(values) > 2 ** (bits - 8)


def test_two_clients_cannot_touch_each_others_leases_or_sessions(worker):
    with worker.client() as a, worker.client() as b:
        s = a.session()
        s.feed("private")
        state = s.state().copy()
        r = a.call("embed", text="a's tensor")
        lease = r["embeddings"]["shm"]["lease"]
        for op, fields in (("release", {"leases": [lease]}), ("retain", {"leases": [lease]})):
            with pytest.raises(rwkvd.WorkerError) as e:
                b.call(op, **fields)
            assert e.value.code == rwkvd.ErrorCode.UNKNOWN_LEASE
        for op, fields in (("session_state", {}), ("session_feed", {"text": "x"}),
                           ("session_close", {}), ("session_fork", {}),
                           ("session_set_state", {"state": state.tobytes()}),
                           ("generate", {"text": "x"}), ("embed", {"text": "x"}),
                           ("forward", {"text": "x"})):
            with pytest.raises(rwkvd.WorkerError) as e:
                b.call(op, session=s.id, **fields)
            assert e.value.code == rwkvd.ErrorCode.UNKNOWN_SESSION, op
        b.call("hello", release=[lease])  # piggy-backed: ignored, not released
        assert a.call("release", leases=[lease])["count"] == 1  # still a's to release
        assert (s.state() == state).all()
        s.close()


@pytest.mark.parametrize("host", ["0.0.0.0", "*", "[::]", "192.168.1.10", "127.0.0.1.nip.io",
                                  "localhost.example.com", "lo", "eth0"])
def test_no_network_bind_without_allow_remote(synthetic_model, host):
    r = subprocess.run([str(build_dir() / "tools" / "rwkvd"), "serve", "--model",
                        str(synthetic_model), "--endpoint", f"tcp://{host}:45999"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0, host
    assert "--allow-remote" in r.stderr, (host, r.stderr[-300:])


def test_loopback_tcp_is_allowed(synthetic_model):
    binary = build_dir() / "tools" / "rwkvd"
    p = subprocess.Popen([str(binary), "serve", "--model", str(synthetic_model), "--endpoint",
                          "tcp://127.0.0.1:*", "--log-level", "info"],
                         stderr=subprocess.PIPE, text=True)
    try:
        for line in p.stderr:
            m = re.search(r"ready on (tcp://127\.0\.0\.1:\d+)", line)
            if m:
                with rwkvd.Client(m.group(1), timeout=10) as c:
                    assert c.hello()["protocol"] == 1
                break
        else:
            pytest.fail("worker never became ready")
    finally:
        p.terminate()
        p.wait(timeout=20)


def serve_default(synthetic_model, env, *extra):
    return subprocess.Popen([str(build_dir() / "tools" / "rwkvd"), "serve", "--model",
                             str(synthetic_model), "--log-level", "info", *extra],
                            stderr=subprocess.PIPE, text=True, env=env)


def ready_endpoint(p) -> str:
    for line in p.stderr:
        m = re.search(r"ready on (\S+) ", line)
        if m:
            return m.group(1)
    pytest.fail("worker never became ready")


def test_the_default_endpoint_lives_in_xdg_runtime_dir(synthetic_model, tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    monkeypatch.delenv("RWKVD_ENDPOINT", raising=False)
    p = serve_default(synthetic_model, dict(os.environ))
    try:
        assert ready_endpoint(p) == f"ipc://{run}/rwkvd.sock"
        assert rwkvd.default_endpoint() == f"ipc://{run}/rwkvd.sock"
        with rwkvd.Client(timeout=10) as c:
            assert c.hello()["protocol"] == 1
    finally:
        p.terminate()
        p.wait(timeout=20)
    assert not (run / "rwkvd.sock").exists()
    os.chmod(run, 0o755)  # not private: refused, and said why
    r = subprocess.run([str(build_dir() / "tools" / "rwkvd"), "serve", "--model",
                        str(synthetic_model)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert f"{run} is open to other users (mode 0755, wanted 0700)" in r.stderr, r.stderr


def test_curve_over_ipc_when_asked(synthetic_model, tmp_path):
    ep = f"ipc://{tmp_path}/w.sock"
    p = serve_default(synthetic_model, dict(os.environ), "--endpoint", ep, "--curve")
    try:
        ready_endpoint(p)
        with pytest.raises(rwkvd.NoWorker, match="no answer"):
            rwkvd.Client(ep)  # a client without CURVE gets nothing
        os.environ["RWKVD_CURVE"] = "1"
        try:
            with rwkvd.Client(ep, timeout=10) as c:
                assert c.hello()["protocol"] == 1
        finally:
            del os.environ["RWKVD_CURVE"]
    finally:
        p.terminate()
        p.wait(timeout=20)
