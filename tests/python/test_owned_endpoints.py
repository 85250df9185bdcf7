"""Endpoints another local user cannot take over (docs/THREAT_MODEL.md): a victim user's worker,
Python client and CLI refuse a socket directory squatted by an attacker user, or an attacker's
symbolic link to a directory the victim owns; the worker removes at shutdown only the socket it
bound; over tcp, CURVE admits the victim's own clients and nobody else.

Both users are made by the test (useradd), so it needs root; otherwise it is skipped."""
from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Dict, List

import pytest

from conftest import REPO, Worker, build_dir

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("useradd") is None,
                                reason="needs root and useradd to make a second user")

PY = "/usr/bin/python3"


class User:
    """A throw-away local user with a private home (its own CURVE keys live there)."""

    def __init__(self) -> None:
        self.name = "rwkvdt" + uuid.uuid4().hex[:8]
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        self.name], check=True, capture_output=True)
        pw = pwd.getpwnam(self.name)
        self.uid, self.gid = pw.pw_uid, pw.pw_gid
        self.home = Path(tempfile.mkdtemp(prefix=f"rwkvd-home-{self.uid}-"))
        os.chown(self.home, self.uid, self.gid)
        os.chmod(self.home, 0o700)
        self.clear_default_dir()  # left by an earlier user that had this uid

    def clear_default_dir(self) -> None:
        d = f"/tmp/rwkvd-{self.uid}"
        if os.path.islink(d):
            os.unlink(d)
        else:
            shutil.rmtree(d, ignore_errors=True)

    def env(self) -> Dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if k not in ("XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "RWKVD_ENDPOINT")}
        env.update(HOME=str(self.home), USER=self.name,
                   PYTHONPATH=str(REPO / "clients" / "python"))
        return env

    def popen(self, args: List[str], **kw) -> subprocess.Popen:
        return subprocess.Popen(args, user=self.uid, group=self.gid, extra_groups=[],
                                env=self.env(), cwd=str(self.home), **kw)

    def run(self, args: List[str], timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(args, user=self.uid, group=self.gid, extra_groups=[],
                              env=self.env(), cwd=str(self.home), capture_output=True, text=True,
                              timeout=timeout)

    def python(self, code: str) -> subprocess.CompletedProcess:
        return self.run([PY, "-c", code])

    def remove(self) -> None:
        subprocess.run(["userdel", self.name], capture_output=True)
        shutil.rmtree(self.home, ignore_errors=True)
        self.clear_default_dir()


@pytest.fixture
def victim():
    u = User()
    yield u
    u.remove()


@pytest.fixture
def attacker():
    u = User()
    yield u
    u.remove()


def rwkvd_bin() -> str:
    return str((build_dir() / "tools" / "rwkvd").resolve())


def readable_model(synthetic_model: Path) -> Path:
    assert os.stat(synthetic_model).st_mode & 0o004, "the fixture must be world-readable"
    return synthetic_model


def impostor(attacker: User, directory: str) -> subprocess.Popen:
    """The attacker's fake worker: a ROUTER on <directory>/rwkvd.sock that records requests."""
    code = f"""
import os, zmq
os.makedirs({directory!r}, exist_ok=True); os.chmod({directory!r}, 0o777)
s = zmq.Context().socket(zmq.ROUTER); s.bind("ipc://{directory}/rwkvd.sock")
os.chmod("{directory}/rwkvd.sock", 0o777)
print("ready", flush=True)
while True:
    ident, msg = s.recv_multipart()
    open({directory!r} + "/stolen", "ab").write(msg)
"""
    p = attacker.popen([PY, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


CLIENT = """
import rwkvd, sys
try:
    with rwkvd.Client(timeout=5) as c:
        print("CONNECTED", c.generate("my secret prompt", max_tokens=2).text)
except rwkvd.RwkvdError as e:
    print(type(e).__name__, e)
"""


def test_a_squatted_socket_directory_is_refused_by_worker_client_and_cli(
        synthetic_model, victim, attacker):
    d = f"/tmp/rwkvd-{victim.uid}"
    fake = impostor(attacker, d)
    try:
        r = victim.run([rwkvd_bin(), "serve", "--model", str(readable_model(synthetic_model))])
        assert r.returncode != 0
        assert f"belongs to user {attacker.uid}" in r.stderr, r.stderr[-400:]
        r = victim.python(CLIENT)
        assert r.stdout.startswith("UnsafeEndpoint"), r.stdout + r.stderr
        assert f"belongs to user {attacker.uid}" in r.stdout
        r = victim.run([rwkvd_bin(), "generate", "--text", "my secret prompt"])
        assert r.returncode != 0
        assert f"belongs to user {attacker.uid}" in r.stderr, r.stderr
        assert not os.path.exists(f"{d}/stolen"), "a prompt reached the impostor"
    finally:
        fake.kill()
        fake.wait()


def test_an_attackers_link_to_the_victims_own_directory_is_refused(
        synthetic_model, victim, attacker):
    # The victim's private directory, reached through the attacker's link: the attacker could
    # repoint it at a directory of theirs at any moment.
    target = victim.home / "sock"
    target.mkdir(mode=0o700)
    os.chown(target, victim.uid, victim.gid)
    d = f"/tmp/rwkvd-{victim.uid}"
    attacker.run(["ln", "-s", str(target), d]).check_returncode()
    assert os.lstat(d).st_uid == attacker.uid
    r = victim.run([rwkvd_bin(), "serve", "--model", str(readable_model(synthetic_model))])
    assert r.returncode != 0
    assert "symbolic link" in r.stderr or f"belongs to user {attacker.uid}" in r.stderr, r.stderr
    assert not any(target.iterdir()), "the worker bound a socket through the attacker's link"
    # A socket of the victim's in that directory (as a worker started earlier would have made):
    # the client still refuses the way there.
    code = f"import socket; s = socket.socket(socket.AF_UNIX); s.bind('{target}/rwkvd.sock')"
    victim.python(code).check_returncode()
    r = victim.python(CLIENT)
    assert r.stdout.startswith("UnsafeEndpoint"), r.stdout + r.stderr
    r = victim.run([rwkvd_bin(), "stats"])
    assert r.returncode != 0 and str(d) in r.stderr, r.stderr


def test_the_default_directory_is_made_private_and_used(synthetic_model, victim):
    p = victim.popen([rwkvd_bin(), "serve", "--model", str(readable_model(synthetic_model))],
                     stderr=subprocess.PIPE, text=True)
    try:
        for line in p.stderr:
            if "ready on" in line:
                break
        d = f"/tmp/rwkvd-{victim.uid}"
        st = os.lstat(d)
        assert st.st_uid == victim.uid and (st.st_mode & 0o777) == 0o700
        r = victim.python(CLIENT)
        assert r.stdout.startswith("CONNECTED"), r.stdout + r.stderr
    finally:
        p.terminate()
        p.wait(timeout=20)


def test_shutdown_removes_only_the_socket_it_bound(synthetic_model):
    w = Worker(synthetic_model, [])
    sock = w.dir / "w.sock"
    os.rename(sock, w.dir / "moved.sock")
    other = socket.socket(socket.AF_UNIX)
    other.bind(str(sock))  # someone else's socket now has the name
    try:
        assert w.stop() == 0
        assert sock.exists(), "the worker removed a socket it did not bind"
    finally:
        other.close()
        shutil.rmtree(w.dir, ignore_errors=True)


RAW_HELLO = """
import zmq, msgpack, sys
s = zmq.Context().socket(zmq.DEALER); s.linger = 0
{setup}
s.connect(sys.argv[1])
s.send(msgpack.packb({{"v": 1, "id": 1, "op": "hello"}}))
print("ANSWERED" if s.poll(2000) else "SILENCE")
"""


def test_tcp_needs_a_curve_key_the_worker_knows(synthetic_model, victim, attacker):
    p = victim.popen([rwkvd_bin(), "serve", "--model", str(readable_model(synthetic_model)),
                      "--endpoint", "tcp://127.0.0.1:*", "--log-level", "info"],
                     stderr=subprocess.PIPE, text=True)
    try:
        server_key = ep = None
        for line in p.stderr:
            m = re.search(r"CURVE: server key (\S{40}),", line)
            server_key = m.group(1) if m else server_key
            m = re.search(r"ready on (tcp://127\.0\.0\.1:\d+)", line)
            if m:
                ep = m.group(1)
                break
        assert ep and server_key
        keydir = victim.home / ".config" / "rwkvd"
        assert (os.lstat(keydir).st_mode & 0o777) == 0o700
        # The other user: without CURVE, and with CURVE and the server's (public) key but a key
        # pair of their own, the worker answers nothing.
        r = attacker.run([PY, "-c", RAW_HELLO.format(setup=""), ep])
        assert r.stdout.strip() == "SILENCE", r.stdout + r.stderr
        own = ("pub, sec = zmq.curve_keypair(); s.curve_publickey = pub; "
               f"s.curve_secretkey = sec; s.curve_serverkey = b'{server_key}'")
        r = attacker.run([PY, "-c", RAW_HELLO.format(setup=own), ep])
        assert r.stdout.strip() == "SILENCE", r.stdout + r.stderr
        # Their rwkvd client has no keys of this worker to offer, and says so.
        r = attacker.python(f"import rwkvd\ntry:\n rwkvd.Client('{ep}')\n"
                            "except rwkvd.RwkvdError as e: print(type(e).__name__, e)")
        assert r.stdout.startswith("CurveKeyError"), r.stdout + r.stderr
        # The victim's own client and CLI pick the keys up by themselves.
        r = victim.python(CLIENT.replace("rwkvd.Client(timeout=5)",
                                         f"rwkvd.Client('{ep}', timeout=5)"))
        assert r.stdout.startswith("CONNECTED"), r.stdout + r.stderr
        r = victim.run([rwkvd_bin(), "stats", "--endpoint", ep])
        assert r.returncode == 0, r.stderr
    finally:
        p.terminate()
        p.wait(timeout=20)
