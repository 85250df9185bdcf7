#!/usr/bin/env python3
"""CI smoke test of `rwkvd bench`: runs it with --quick --repeats 1 on a small fixture model and
fails if any expected figure is missing from the JSON, or is not a finite positive number with
min <= median <= max. Registered with ctest (tests/CMakeLists.txt) as `bench_smoke`, with
--device gpu when the build has the Vulkan engine, else cpu.

    tests/bench/bench_smoke.py --rwkvd build/tools/rwkvd [--device cpu] [--fixtures DIR]

Exits 77 (ctest: skipped) when the fixtures are missing, unless RWKVD_REQUIRE_FIXTURES=1.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODEL = "rwkv7/tiny-rwkv7-834K.f32.gguf"
TEXT = "tokenizer/bench_email.txt"

# Every figure `rwkvd bench --quick` must report. Keep in step with tools/bench_engine.cpp and
# tools/bench_client.cpp: a figure that disappears fails CI.
ENGINE_FIGURES = [
    "load.first_token_ms",
    "load.usable_ms",
    "load.resident_ms",
    "tokenize.email_us",
    "prefill.64.tok_s",
    "prefill.256.tok_s",
    "gen.b1.tok_s",
    "gen.b8.tok_s",
    "gen.b32.tok_s",
    "gen.b256.tok_s",
    "doc_state.engine_ms",
    "embed.email_engine_ms",
    "field_analysis.engine_ms",
    "embed.engine_single.docs_s",
    "embed.engine_coalesced.docs_s",
]
CLIENT_FIGURES = [
    "load.process_ready_ms",
    "load.process_first_token_ms",
    "doc_state.client_ms",
    "doc_state.client_fetch_ms",
    "doc_state.client_inline_ms",
    "doc_state.client_inline_fetch_ms",
    "embed.email_client_ms",
    "field_analysis.client_ms",
    "field_analysis.one_client_ms",
    "field_analysis.shared_clients_ms",
    "embed.client_coalesced.docs_s",
    "embed.client_coalesced.batch_mean",
    "embed.client_many.docs_s",
    "embed.client_single.docs_s",
    "embed.client_single.batch_mean",
]
EXPECTED = ENGINE_FIGURES + CLIENT_FIGURES


def fixtures_root(arg: str | None) -> Path:
    return Path(arg or os.environ.get("RWKVD_FIXTURES") or REPO.parent / "shared" / "fixtures")


def check(result: dict, repeats: int) -> list[str]:
    problems = []
    figures = result.get("figures", {})
    for name in EXPECTED:
        f = figures.get(name)
        if f is None:
            problems.append(f"missing figure {name}")
            continue
        for key in ("unit", "min", "median", "max", "samples"):
            if key not in f:
                problems.append(f"{name}: no '{key}'")
        if any(k not in f for k in ("min", "median", "max", "samples")):
            continue
        vals = [f["min"], f["median"], f["max"], *f["samples"]]
        if not all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in vals):
            problems.append(f"{name}: not finite positive numbers: {f}")
        elif not f["min"] <= f["median"] <= f["max"]:
            problems.append(f"{name}: min <= median <= max does not hold: {f}")
        if len(f["samples"]) != repeats:
            problems.append(f"{name}: {len(f['samples'])} samples for --repeats {repeats}")
    client = result.get("client", {})
    hist = client.get("embed_batch_histograms", {})
    for mode in ("coalesced", "single"):
        h = hist.get(mode, {}).get("batch_sequences", {})
        if not h.get("le") or not h.get("count"):
            problems.append(f"no batch-size histogram for embeds {mode}: {hist.get(mode)}")
    single_requests = hist.get("single", {}).get("batch_requests", {}).get("le", {})
    if set(single_requests) != {"1"}:
        problems.append(f"--no-coalesce worker ran requests together: {single_requests}")
    if client.get("doc_state_via_ring") is not True:
        problems.append("doc_state.client_ms did not go through the shared-memory ring")
    if client.get("doc_state_ring_equals_inline") is not True:
        problems.append("the state through the ring differs from the inline one")
    if client.get("field_tokens_match_engine") is False:  # near-ties may differ: a warning
        print("WARN: the worker's field answers differ from the engine's greedy tokens",
              file=sys.stderr)
    if not result.get("quality_hash"):
        problems.append("no quality_hash")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rwkvd", required=True, help="the rwkvd binary")
    ap.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--fixtures", default=None)
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()

    root = fixtures_root(args.fixtures)
    model, text = root / MODEL, root / TEXT
    for p in (model, text):
        if not p.exists():
            msg = f"fixture missing: {p}"
            if os.environ.get("RWKVD_REQUIRE_FIXTURES") == "1":
                print(msg + " (RWKVD_REQUIRE_FIXTURES=1)", file=sys.stderr)
                return 1
            print(msg + ", skipping", file=sys.stderr)
            return 77

    with tempfile.TemporaryDirectory(prefix="rwkvd-bench-smoke-") as tmp:
        out, md = Path(tmp) / "bench.json", Path(tmp) / "bench.md"
        cmd = [args.rwkvd, "bench", "--model", str(model), "--text", str(text),
               "--device", args.device,
               "--quick", "--repeats", str(args.repeats), "--threads", "2",
               "--out", str(out), "--markdown", str(md)]
        print("+", " ".join(cmd), flush=True)
        t0 = time.time()
        proc = subprocess.run(cmd, timeout=300)
        took = time.time() - t0
        print(f"rwkvd bench took {took:.1f} s")
        if proc.returncode != 0:
            print(f"rwkvd bench exited with {proc.returncode}", file=sys.stderr)
            return 1
        result = json.loads(out.read_text())
        problems = check(result, args.repeats)
        table = md.read_text()
        for name in EXPECTED:
            if f"| {name} |" not in table:
                problems.append(f"{name} missing from the markdown table")
    for p in problems:
        print("FAIL:", p, file=sys.stderr)
    if problems:
        return 1
    print(f"bench smoke: all {len(EXPECTED)} figures present ({args.device})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
