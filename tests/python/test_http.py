"""`rwkvd http` spoken to directly (urllib): OpenAI-style errors, the token, streaming framing,
state endpoints, /metrics, /health, a dropped stream; the front outlives every bad request."""
from __future__ import annotations

import base64
import json
import os
import re
import socket
import time
from typing import Iterator
from urllib.parse import urlparse

import numpy as np
import pytest

from http_front import API_KEY, Front, assert_openai_error


@pytest.fixture(scope="module")
def front(worker) -> Iterator[Front]:
    f = Front(worker.endpoint, "--max-body-bytes", str(1 << 20))
    yield f
    assert f.proc.poll() is None, "the front died:\n" + f.log_path.read_text()
    f.stop()


@pytest.fixture(scope="module")
def model(worker) -> str:
    with worker.client() as c:
        return c.info()["model"]["name"]


def test_models_list_names_the_workers_model(front, model):
    status, body = front.json("GET", "/v1/models")
    assert status == 200
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == [model]
    assert front.json("GET", f"/v1/models/{model}")[1]["id"] == model
    assert_openai_error(*front.json("GET", "/v1/models/other"), 404, code="model_not_found")


@pytest.mark.parametrize("key", [None, "wrong", API_KEY + "x"])
def test_a_missing_or_wrong_token_is_401(front, key):
    err = assert_openai_error(*front.json("GET", "/v1/models", key=key), 401,
                              code="invalid_api_key")
    assert err["type"] == "invalid_request_error"


def test_the_token_can_come_from_the_environment(worker):
    f = Front(worker.endpoint, api_key=None, env=dict(os.environ, RWKVD_API_KEY="from-env"))
    try:
        assert_openai_error(*f.json("GET", "/v1/models"), 401, code="invalid_api_key")
        assert f.json("GET", "/v1/models", key="from-env")[0] == 200
    finally:
        f.stop()


def test_health_needs_no_token_and_names_the_model(front, model):
    status, body = front.json("GET", "/health", key=None)
    assert status == 200 and body["status"] == "ok" and body["model"] == model


def test_completion_equals_the_workers_generate(front, worker, model):
    body = {"model": model, "prompt": "Once upon a time", "max_tokens": 9, "temperature": 0,
            "stop": ["zzz"]}
    status, out = front.json("POST", "/v1/completions", body)
    assert status == 200, out
    with worker.client() as c:
        want = c.generate("Once upon a time", max_tokens=9, temperature=0, stop=["zzz"])
    assert out["choices"][0]["text"] == want.text
    assert out["usage"] == {"prompt_tokens": want.prompt_tokens,
                            "completion_tokens": want.completion_tokens,
                            "total_tokens": want.prompt_tokens + want.completion_tokens}
    assert out["id"].startswith("cmpl-") and out["object"] == "text_completion"


def test_a_stop_string_ends_the_text_before_it(front, model):
    body = {"model": model, "prompt": [3, 4, 5], "max_tokens": 24, "temperature": 0}
    text = front.json("POST", "/v1/completions", body)[1]["choices"][0]["text"]
    # Whatever the model says mid-way (not a byte JSON had to replace: the worker sees bytes).
    at = next(i for i in range(len(text) // 2, len(text) - 1) if "\ufffd" not in text[i:i + 2])
    stop = text[at:at + 2]
    out = front.json("POST", "/v1/completions", {**body, "stop": [stop]})[1]["choices"][0]
    assert out["finish_reason"] == "stop"
    assert out["text"] == text[:text.index(stop)]


def test_a_list_of_prompts_gives_a_choice_each(front, worker, model):
    prompts = ["first prompt", "the second", [7, 8, 9]]
    out = front.json("POST", "/v1/completions",
                     {"model": model, "prompt": prompts, "max_tokens": 5, "temperature": 0})[1]
    with worker.client() as c:
        want = [c.generate(p, max_tokens=5, temperature=0) for p in prompts]
    assert [ch["index"] for ch in out["choices"]] == [0, 1, 2]
    assert [ch["text"] for ch in out["choices"]] == [w.text for w in want]
    assert out["usage"]["prompt_tokens"] == sum(w.prompt_tokens for w in want)


def test_seeded_sampling_is_the_workers(front, worker, model):
    body = {"model": model, "prompt": [5, 6, 7], "max_tokens": 6, "temperature": 0.9,
            "top_p": 0.8, "seed": 1234}
    out = front.json("POST", "/v1/completions", body)[1]
    with worker.client() as c:
        want = c.generate([5, 6, 7], max_tokens=6, temperature=0.9, top_p=0.8, seed=1234)
    assert out["choices"][0]["text"] == want.text


def test_chat_uses_the_world_format(front, worker, model):
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi\n\nthere"},
                {"role": "assistant", "content": "Hello."},
                {"role": "user", "content": [{"type": "text", "text": "Again?"}]}]
    out = front.json("POST", "/v1/chat/completions",
                     {"model": model, "messages": messages, "max_tokens": 12, "temperature": 0})[1]
    prompt = ("System: Be brief.\n\nUser: Hi\nthere\n\nAssistant: Hello.\n\nUser: Again?"
              "\n\nAssistant:")
    with worker.client() as c:
        want = c.generate(prompt, max_tokens=12, temperature=0, stop=["\n\nUser:"])
    assert out["choices"][0]["message"] == {"role": "assistant", "content": want.text.lstrip(),
                                            "refusal": None}
    assert out["usage"]["prompt_tokens"] == want.prompt_tokens


def test_streams_are_sse_ending_in_done(front, model):
    body = {"model": model, "prompt": "abc", "max_tokens": 8, "temperature": 0}
    whole = front.json("POST", "/v1/completions", body)[1]
    events = front.events("/v1/completions", {**body, "stream": True})
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["choices"][0]["text"]
    assert chunks[-1]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
    assert len({c["id"] for c in chunks}) == 1


def test_embeddings_float_and_base64_equal_the_workers_embed(front, worker, model):
    texts = ["one", "two words", "three words here"]
    floats = front.json("POST", "/v1/embeddings", {"model": model, "input": texts})[1]
    b64 = front.json("POST", "/v1/embeddings",
                     {"model": model, "input": texts, "encoding_format": "base64"})[1]
    with worker.client() as c:
        want = np.array(c.embed(texts))
    got_f = np.array([d["embedding"] for d in floats["data"]], dtype=np.float32)
    got_b = np.stack([np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f4")
                      for d in b64["data"]])
    assert np.array_equal(got_f, want) and np.array_equal(got_b, want)
    assert [d["index"] for d in floats["data"]] == [0, 1, 2]
    one = front.json("POST", "/v1/embeddings", {"model": model, "input": "one"})[1]
    assert np.array_equal(np.array(one["data"][0]["embedding"], dtype=np.float32), want[0])


def test_embeddings_past_the_workers_batch_limit_are_batched(front, worker, model):
    texts = [f"text number {i}" for i in range(40)]  # the worker takes 16 at a time
    out = front.json("POST", "/v1/embeddings", {"model": model, "input": texts})[1]
    with worker.client() as c:
        want = np.concatenate([np.array(c.embed(texts[i:i + 16])) for i in range(0, 40, 16)])
    assert np.array_equal(np.array([d["embedding"] for d in out["data"]], dtype=np.float32), want)


def test_a_saved_state_continues_the_prompt(front, model):
    head, tail = [11, 12, 13, 14], [15, 16]
    status, saved = front.json("POST", "/v1/states", {"model": model, "prompt": head})
    assert status == 200, saved
    assert saved["prompt_tokens"] == len(head) and saved["dtype"] == "float32"
    assert len(base64.b64decode(saved["state"])) == 4 * int(np.prod(saved["shape"]))
    body = {"model": model, "max_tokens": 8, "temperature": 0}
    from_state = front.json("POST", "/v1/completions",
                            {**body, "prompt": tail, "state": saved["state"]})[1]
    whole = front.json("POST", "/v1/completions", {**body, "prompt": head + tail})[1]
    assert from_state["choices"][0]["text"] == whole["choices"][0]["text"]
    # return_state hands back the state after the generation.
    out = front.json("POST", "/v1/completions",
                     {**body, "prompt": head, "return_state": True})[1]
    assert len(base64.b64decode(out["state"])) == len(base64.b64decode(saved["state"]))


def test_bad_states_are_400(front, model):
    body = {"model": model, "prompt": [1, 2], "max_tokens": 2}
    assert_openai_error(*front.json("POST", "/v1/completions", {**body, "state": "!!!!"}), 400,
                        param="state")
    short = base64.b64encode(np.zeros(8, dtype="<f4").tobytes()).decode()
    assert_openai_error(*front.json("POST", "/v1/completions", {**body, "state": short}), 400,
                        code="bad_state")


@pytest.mark.parametrize("raw,code", [(b"{not json", "invalid_json"), (b"[1, 2]", "invalid_json"),
                                      (b"", "invalid_json")])
def test_malformed_bodies_are_400(front, raw, code):
    assert_openai_error(*json_of(front.request("POST", "/v1/completions", raw=raw)), 400,
                        code=code)


def json_of(r):
    status, _, data = r
    return status, json.loads(data)


def test_a_body_over_the_limit_is_413(front, model):
    body = {"model": model, "prompt": "x" * (2 << 20)}
    assert_openai_error(*front.json("POST", "/v1/completions", body), 413,
                        code="request_too_large")


@pytest.mark.parametrize("field,value,param", [
    ("temperature", 3, "temperature"), ("temperature", "hot", "temperature"),
    ("top_p", 0, "top_p"), ("max_tokens", 0, "max_tokens"), ("max_tokens", 10 ** 9, "max_tokens"),
    ("n", 2, "n"), ("stop", [1], "stop"), ("seed", -1, "seed"), ("stream", "yes", "stream"),
    ("frobnicate", 1, "frobnicate"), ("prompt", {"a": 1}, "prompt"), ("prompt", [-1], "prompt"),
])
def test_bad_fields_are_400_naming_the_field(front, model, field, value, param):
    body = {"model": model, "prompt": "hi", "max_tokens": 2, field: value}
    assert_openai_error(*front.json("POST", "/v1/completions", body), 400, param=param)


def test_unknown_or_missing_models(front):
    assert_openai_error(*front.json("POST", "/v1/completions", {"model": "gpt-4", "prompt": "x"}),
                        404, code="model_not_found", param="model")
    assert_openai_error(*front.json("POST", "/v1/embeddings", {"input": "x"}), 400, param="model")


@pytest.mark.parametrize("messages", [[], "hi", [{"role": "tool", "content": "x"}],
                                      [{"role": "user"}],
                                      [{"role": "user", "content": [{"type": "image_url"}]}]])
def test_bad_messages_are_400(front, model, messages):
    assert_openai_error(*front.json("POST", "/v1/chat/completions",
                                    {"model": model, "messages": messages}), 400)


def test_worker_errors_keep_their_meaning(front, model):
    # 5000 tokens: over the worker's --max-tokens 4096.
    err = assert_openai_error(*front.json("POST", "/v1/completions",
                                          {"model": model, "prompt": [1] * 5000}), 400)
    assert err["code"] == "too_large"
    err = assert_openai_error(*front.json("POST", "/v1/embeddings",
                                          {"model": model, "input": [[10 ** 8]]}), 400)
    assert err["code"] == "bad_token"


def test_unknown_paths_are_openai_errors(front):
    assert_openai_error(*json_of(front.request("GET", "/v1/nothing")), 404, code="not_found")


def test_metrics_are_prometheus_text(front, model):
    front.json("POST", "/v1/completions", {"model": model, "prompt": "x", "max_tokens": 1})

    def generates() -> float:
        status, headers, data = front.request("GET", "/metrics")
        assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = data.decode()
        sample = re.compile(r'^[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? -?[0-9.e+-]+$')
        for line in text.splitlines():
            assert line.startswith("# HELP ") or line.startswith("# TYPE ") or \
                sample.match(line), line
        m = re.search(r'^rwkvd_requests_total\{op="generate"\} (\S+)$', text, re.M)
        assert "# TYPE rwkvd_request_latency_ms summary" in text
        return float(m.group(1))

    before = generates()
    front.json("POST", "/v1/completions", {"model": model, "prompt": "x", "max_tokens": 1})
    assert generates() == before + 1

    def responses(code: int) -> float:
        text = front.request("GET", "/metrics")[2].decode()
        m = re.search(rf'^rwkvd_http_responses_total\{{code="{code}"\}} (\S+)$', text, re.M)
        return float(m.group(1)) if m else 0

    n404 = responses(404)
    front.request("GET", "/v1/nowhere")
    assert responses(404) == n404 + 1 and responses(200) > 0


def test_a_dropped_stream_stops_its_generation(front, worker, model):
    # 16000 tokens take this model ~18 s on 2 cores; the generation must end within 5 s.
    body = {"model": model, "prompt": "go", "max_tokens": 16000, "temperature": 1, "stream": True}
    before = worker.stats()["clients"]
    u = urlparse(front.url)
    s = socket.create_connection((u.hostname, u.port))
    data = json.dumps(body).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              + f"Authorization: Bearer {API_KEY}\r\nContent-Length: {len(data)}\r\n\r\n".encode()
              + data)
    got = b""
    while b"data: " not in got:  # it is generating
        more = s.recv(4096)
        assert more, got
        got += more
    assert worker.stats()["active_sequences"] == 1
    s.close()
    deadline = time.time() + 5
    while worker.stats()["active_sequences"] != 0:
        assert time.time() < deadline, "the generation went on after its client left"
        time.sleep(0.1)
    # Its connection was closed (not left to fill up: that would be "stalled", seconds later).
    after = worker.stats()["clients"]
    assert after.get("gone", 0) > before.get("gone", 0), after
    assert after.get("stalled", 0) == before.get("stalled", 0), after
    assert front.json("GET", "/health")[0] == 200


def test_no_worker_is_503_in_seconds(tmp_path):
    f = Front(f"ipc://{tmp_path}/none.sock", "--timeout", "1", api_key=None)
    try:
        t = time.time()
        status, body = f.json("GET", "/health")
        assert status == 503 and body["status"] == "unavailable"
        assert_openai_error(*f.json("GET", "/v1/models"), 503, code="worker_unavailable")
        assert time.time() - t < 10
    finally:
        f.stop()


def test_a_remote_address_needs_allow_remote(worker):
    with pytest.raises(RuntimeError, match="not a loopback address"):
        Front(worker.endpoint, "--host", "0.0.0.0")
