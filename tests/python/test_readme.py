"""Every Python snippet of clients/python/README.md runs, as its own script, against a real
worker (the snippet of the library it ports from, web_rwkv_py, excepted: it is not installed)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from conftest import REPO

README = REPO / "clients" / "python" / "README.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_the_readme_has_its_snippets():
    assert len(SNIPPETS) >= 8
    assert any("stream=True" in s for s in SNIPPETS)
    assert any("AsyncClient" in s for s in SNIPPETS)
    assert any("share()" in s for s in SNIPPETS)
    assert any("np.load" in s for s in SNIPPETS)


@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_a_readme_snippet_runs(worker, tmp_path, index):
    code = SNIPPETS[index]
    if "import web_rwkv_py" in code:
        pytest.skip("the web_rwkv_py side of the comparison")
    script = tmp_path / f"snippet{index}.py"
    script.write_text(code)
    env = dict(os.environ, RWKVD_ENDPOINT=worker.endpoint,
               PYTHONPATH=str(REPO / "clients" / "python"))
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"snippet {index}:\n{code}\n--- stderr:\n{r.stderr[-3000:]}"
