"""`cmake --install` gives a C++ user what they need: the rwkvd binary, the client library with
its headers, find_package(rwkvd) -> rwkvd::client and pkg-config's rwkvd.pc. A small program
is built against the installed tree both ways and talks to the installed worker."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, Worker, build_dir, require

CONSUMER = REPO / "tests" / "packaging"


def run(*cmd, **kw) -> str:
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300, **kw)
    assert r.returncode == 0, f"{cmd}:\n{r.stdout}\n{r.stderr}"
    return r.stdout


@pytest.fixture(scope="module")
def prefix(tmp_path_factory) -> Path:
    require(build_dir() / "CMakeCache.txt", "build dir")
    p = tmp_path_factory.mktemp("prefix")
    run("cmake", "--install", build_dir(), "--prefix", p)
    return p


def test_install_puts_binary_library_headers_and_package_files(prefix):
    for f in ("bin/rwkvd", "lib/librwkvd_client.a", "lib/librwkvd_protocol.a",
              "include/rwkvd/clients/cpp/client.h", "include/rwkvd/protocol/messages.h",
              "lib/cmake/rwkvd/rwkvdConfig.cmake", "lib/cmake/rwkvd/rwkvdConfigVersion.cmake",
              "lib/pkgconfig/rwkvd.pc"):
        assert (prefix / f).is_file(), f


def consumer_answers(program: Path, worker: Worker, prompt: str) -> list:
    return run(program, worker.endpoint, prompt).splitlines()


def expected(worker: Worker, prompt: str) -> list:
    with worker.client() as c:
        info = c.info()
        g = c.generate(prompt, max_tokens=6, temperature=0)
    return [f"model {info['model']['name']}", f"embed 1 {info['model']['n_embd']}",
            "tokens " + " ".join(str(t) for t in g.tokens)]


@pytest.fixture(scope="module")
def installed_worker(prefix, synthetic_model):
    """A worker run by the installed binary (Worker runs $RWKVD_BUILD_DIR/tools/rwkvd)."""
    tools = prefix / "as-build" / "tools"
    tools.mkdir(parents=True)
    (tools / "rwkvd").symlink_to(prefix / "bin" / "rwkvd")
    env = pytest.MonkeyPatch()
    env.setenv("RWKVD_BUILD_DIR", str(prefix / "as-build"))
    try:
        w = Worker(synthetic_model, [])
    finally:
        env.undo()
    yield w
    w.stop()


def test_find_package_builds_a_client_program(prefix, installed_worker, tmp_path):
    build = tmp_path / "consumer"
    run("cmake", "-S", CONSUMER, "-B", build, f"-DCMAKE_PREFIX_PATH={prefix}")
    run("cmake", "--build", build)
    prompt = "Hello there"
    assert consumer_answers(build / "consumer", installed_worker, prompt) == \
        expected(installed_worker, prompt)


def test_pkg_config_builds_a_client_program(prefix, installed_worker, tmp_path):
    if shutil.which("pkg-config") is None:
        pytest.skip("pkg-config is not installed")
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    flags = run("pkg-config", "--cflags", "--libs", "rwkvd", env=env).split()
    program = tmp_path / "consumer_pc"
    run("c++", "-std=c++20", CONSUMER / "consumer.cpp", "-o", program, *flags)
    prompt = "Another prompt"
    assert consumer_answers(program, installed_worker, prompt) == \
        expected(installed_worker, prompt)
