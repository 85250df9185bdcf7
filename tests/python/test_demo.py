"""The README's main job (scripts/demo -> scripts/demo.py) against this build: it must finish,
label its synthesised model as random weights, and its own consistency checks must hold."""
import subprocess
import sys

from conftest import REPO, build_dir, require


def test_demo_runs_end_to_end():
    require(build_dir() / "tools" / "rwkvd", "rwkvd binary")
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "demo.py"), "--build", str(build_dir())],
                       capture_output=True, text=True, timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert "RANDOM WEIGHTS" in out
    for check in ("session and its fork continue identically: True",
                  "another client's fork by share token too: True",
                  "a stateless request with that state in agrees: True",
                  "socket removed: True"):
        assert check in out, f"{check!r} missing:\n{out[-4000:]}"
