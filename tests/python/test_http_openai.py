"""The official `openai` npm client against `rwkvd http` and a real worker.

Needs node and npm's registry: `npm ci` installs the pinned client (tests/http/package-lock.json)
into <build>/http-node once. Without node or npm the test skips, or fails under
RWKVD_REQUIRE_FIXTURES=1 (CI). The node script asserts what the client can see alone; this side
compares its results with the worker's own answers.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from conftest import REPO, build_dir
from http_front import API_KEY, Front

SOURCES = REPO / "tests" / "http"


def need(what: str) -> None:
    msg = f"{what} is needed for the openai client test"
    if os.environ.get("RWKVD_REQUIRE_FIXTURES") == "1":
        pytest.fail(msg + " (RWKVD_REQUIRE_FIXTURES=1)")
    pytest.skip(msg)


def installed_client() -> str:
    """<build>/http-node with the pinned openai package (npm ci when the lock file changed)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        need("node with npm")
    home = build_dir() / "http-node"
    home.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json", "openai_client.mjs"):
        shutil.copyfile(SOURCES / name, home / name)
    lock = (SOURCES / "package-lock.json").read_text()
    stamp = home / "node_modules" / ".installed-lock"
    if not stamp.exists() or stamp.read_text() != lock:
        r = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=home,
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            need("npm's registry (npm ci failed: " + r.stderr.strip()[-400:] + ")")
        stamp.write_text(lock)
    return str(home)


def test_openai_client(worker, tmp_path):
    home = installed_client()
    front = Front(worker.endpoint)
    try:
        out_path = tmp_path / "out.json"
        env = dict(os.environ, BASE_URL=front.url + "/v1", API_KEY=API_KEY, OUT=str(out_path))
        r = subprocess.run(["node", "openai_client.mjs"], cwd=home, env=env, capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr + front.log_path.read_text()
        out = json.loads(out_path.read_text())
        assert front.proc.poll() is None
    finally:
        front.stop()
    with worker.client() as c:
        name = c.info()["model"]["name"]
        completion = c.generate("The capital of France", max_tokens=12, temperature=0)
        chat = c.generate("System: You are terse.\n\nUser: Name a colour.\n\nAssistant:",
                          max_tokens=10, temperature=0, stop=["\n\nUser:"])
        embeddings = np.array(c.embed(["hello world", "a second, longer input"]))
    assert out["models"] == [name]
    assert out["completion"] == completion.text
    assert out["chat"] == chat.text.lstrip()
    assert np.array_equal(np.array(out["embeddings_float"], dtype=np.float32), embeddings)
    assert np.array_equal(np.array(out["embeddings_base64"], dtype=np.float32), embeddings)
