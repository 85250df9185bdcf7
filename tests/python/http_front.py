"""`rwkvd http` as a subprocess for the HTTP tests, and small urllib helpers."""
from __future__ import annotations

import json
import re
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from conftest import build_dir, require

API_KEY = "test-key-123"


class Front:
    """A running `rwkvd http --port 0`; the port comes from its ready line."""

    def __init__(self, endpoint: str, *extra: str, api_key: Optional[str] = API_KEY,
                 env: Optional[Dict[str, str]] = None) -> None:
        binary = require(build_dir() / "tools" / "rwkvd", "rwkvd binary")
        self.log_path = Path(tempfile.mkdtemp(prefix="rwkvd-http-")) / "http.log"
        self.log = open(self.log_path, "w+")
        key = ["--api-key", api_key] if api_key else []
        self.proc = subprocess.Popen(
            [str(binary), "http", "--endpoint", endpoint, "--port", "0", *key, *extra],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.api_key = api_key
        deadline = time.time() + 30
        while True:
            m = re.search(r"listening on (http://[^ ]+)", self.log_path.read_text())
            if m:
                self.url = m.group(1)
                return
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("rwkvd http did not come up:\n" + self.log_path.read_text())
            time.sleep(0.05)

    def request(self, method: str, path: str, body: Any = None, *, raw: Optional[bytes] = None,
                key: Optional[str] = "default", timeout: float = 60
                ) -> Tuple[int, Dict[str, str], bytes]:
        """(status, headers, body bytes); `raw` sends bytes as they are."""
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        key = self.api_key if key == "default" else key
        if key:
            req.add_header("Authorization", f"Bearer {key}")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def json(self, method: str, path: str, body: Any = None, **kw: Any) -> Tuple[int, Any]:
        status, _, data = self.request(method, path, body, **kw)
        return status, json.loads(data)

    def events(self, path: str, body: Any) -> List[str]:
        """The `data:` payloads of a server-sent event stream, in order."""
        status, headers, data = self.request("POST", path, body)
        assert status == 200, data
        assert headers["Content-Type"].startswith("text/event-stream")
        text = data.decode()
        assert text.endswith("\n\n"), text[-40:]
        blocks = text.split("\n\n")[:-1]
        assert all(b.startswith("data: ") for b in blocks), blocks
        return [b[len("data: "):] for b in blocks]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def assert_openai_error(status: int, body: Any, want_status: int, **fields: Any) -> Dict[str, Any]:
    """`body` is {"error": {message, type, param, code}} with `fields`; returns the error."""
    assert status == want_status, (status, body)
    assert set(body) == {"error"}, body
    err = body["error"]
    assert set(err) == {"message", "type", "param", "code"}, err
    assert isinstance(err["message"], str) and err["message"], err
    for k, v in fields.items():
        assert err[k] == v, (k, err)
    return err
