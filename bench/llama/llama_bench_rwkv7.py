#!/usr/bin/env python3
"""Performance anchors: llama.cpp (prebuilt libllama from npm node-llama-cpp 3.22.1) running an
RWKV-7 GGUF with full GPU offload, driven through its C API with ctypes.

One process = one (library build, model). Writes one JSON with every figure plus the llama.cpp
log lines that tell which backend ran. Measured (page cache warm, mmap on):

  load      llama_model_load_from_file + llama_init_from_model, done twice; the 2nd is the figure
  prefill   one llama_decode of 512 tokens (n_batch = n_ubatch = 512), last-token logits only;
            1 warm-up + N timed, median
  gen       128 single-token llama_decode calls of one sequence, greedy argmax on the CPU between
            them; 1 warm-up (--gen-warmup steps, 128 by default) + N timed, median. "loop" = wall time of the whole loop,
            "decode" = sum of llama_decode + llama_synchronize only
  doc       854 tokens of bench_email.txt decoded as 512 + 342 (n_batch 512) from a clear state,
            then llama_state_seq_get_size / llama_state_seq_get_data (and _set_data back) timed
            separately; round trip checked (next-token logits after set_data == without)
  embed     same 854 tokens with llama_set_embeddings(ctx, true), last-token embedding read
            (llama_get_embeddings_ith(ctx, -1), copied out) - ms, median
  par8      new context n_seq_max = 8; 1 warm-up + N timed runs of 128 steps, each one llama_decode of 8 tokens (one per
            sequence, all with logits), greedy per sequence; aggregate tokens/s, median

Struct offsets (this build, checked against llama.h of the bundled source and the defaults the
library returns): llama_model_params: int32 n_gpu_layers @16 (default -1 = all), split_mode @20,
load_mode @24 (default -1 AUTO; we set 1 = MMAP), lazy_mode @28. llama_context_params: uint32
n_ctx, n_batch, n_ubatch, n_seq_max @0..15.
"""
from __future__ import annotations

import argparse
import ctypes as C
import json
import os
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))
from llama_ref import LOG_CB, Llama, LlamaBatch  # noqa: E402

LOAD_MODE_MMAP = 1


def now():
    return time.perf_counter()


def med(xs):
    return float(statistics.median(xs)) if xs else None


def smi():
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.used,memory.total,clocks.sm,clocks.mem",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        return r.stdout.strip() or r.stderr.strip()
    except Exception as e:  # noqa: BLE001
        return f"nvidia-smi failed: {e}"


class Bench:
    def __init__(self, lib_dir: str, n_threads: int):
        t0 = now()
        self.llm = Llama(lib_dir)
        self.t_backend_init = now() - t0
        L, g = self.llm.L, self.llm.g
        # replace the log callback: keep every line, and echo warnings/errors (and their
        # continuation lines) to stderr at once, so a crash inside ggml still shows its reason
        self._echo = False

        def _log(level, text, ud):
            s = text.decode("utf-8", "replace") if text else ""
            self.llm.logs.append(s)
            if level in (3, 4) or (level == 5 and self._echo):
                self._echo = True
                sys.stderr.write(s)
                sys.stderr.flush()
            elif level != 5:
                self._echo = False
        self._log_cb = LOG_CB(_log)
        L.llama_log_set(self._log_cb, None)
        for fn, res, args in [
            ("llama_synchronize", None, [C.c_void_p]),
            ("llama_state_seq_get_size", C.c_size_t, [C.c_void_p, C.c_int32]),
            ("llama_state_seq_get_data", C.c_size_t, [C.c_void_p, C.c_void_p, C.c_size_t, C.c_int32]),
            ("llama_state_seq_set_data", C.c_size_t, [C.c_void_p, C.c_void_p, C.c_size_t, C.c_int32]),
            ("llama_model_size", C.c_uint64, [C.c_void_p]),
            ("llama_model_n_params", C.c_uint64, [C.c_void_p]),
        ]:
            f = getattr(L, fn)
            f.restype, f.argtypes = res, args
        for fn, res, args in [
            ("ggml_backend_dev_count", C.c_size_t, []),
            ("ggml_backend_dev_get", C.c_void_p, [C.c_size_t]),
            ("ggml_backend_dev_name", C.c_char_p, [C.c_void_p]),
            ("ggml_backend_dev_description", C.c_char_p, [C.c_void_p]),
            ("ggml_backend_dev_memory", None, [C.c_void_p, C.POINTER(C.c_size_t), C.POINTER(C.c_size_t)]),
        ]:
            f = getattr(g, fn)
            f.restype, f.argtypes = res, args
        self.L, self.g = L, g
        self.n_threads = n_threads

    # ---- devices / memory ------------------------------------------------------------------
    def devices(self):
        out = []
        for i in range(self.g.ggml_backend_dev_count()):
            d = self.g.ggml_backend_dev_get(i)
            fr, tot = C.c_size_t(0), C.c_size_t(0)
            self.g.ggml_backend_dev_memory(d, C.byref(fr), C.byref(tot))
            out.append({"name": self.g.ggml_backend_dev_name(d).decode(),
                        "desc": self.g.ggml_backend_dev_description(d).decode(),
                        "free_MiB": fr.value / 2**20, "total_MiB": tot.value / 2**20})
        return out

    # ---- model / context -------------------------------------------------------------------
    def load_model(self, path: str):
        mp = self.L.llama_model_default_params()
        n_gpu_layers, split_mode, load_mode, lazy_mode = struct.unpack_from("<iiii", mp.b, 16)
        assert n_gpu_layers < 0 and split_mode == 1 and load_mode == -1 and lazy_mode == 1, \
            ("unexpected llama_model_params defaults", n_gpu_layers, split_mode, load_mode, lazy_mode)
        struct.pack_into("<i", mp.b, 16, 999)             # n_gpu_layers: all
        struct.pack_into("<i", mp.b, 24, LOAD_MODE_MMAP)  # mmap on
        m = self.L.llama_model_load_from_file(path.encode(), mp)
        if not m:
            raise RuntimeError("llama_model_load_from_file failed:\n" + "".join(self.llm.logs[-40:]))
        return m

    def new_ctx(self, model, n_batch=512, n_ubatch=512, n_seq_max=1, n_ctx=4096):
        cp = self.L.llama_context_default_params()
        struct.pack_into("<4I", cp.b, 0, n_ctx, n_batch, n_ubatch, n_seq_max)
        ctx = self.L.llama_init_from_model(model, cp)
        if not ctx:
            raise RuntimeError("llama_init_from_model failed:\n" + "".join(self.llm.logs[-40:]))
        self.L.llama_set_n_threads(ctx, self.n_threads, self.n_threads)
        return ctx

    def clear(self, ctx):
        self.L.llama_memory_clear(self.L.llama_get_memory(ctx), True)

    # ---- batches ---------------------------------------------------------------------------
    def make_batch(self, n, n_seq=1):
        b = self.L.llama_batch_init(n, 0, n_seq)
        return b

    @staticmethod
    def fill(b, toks, pos0, seq=0, want_last=True, seqs=None):
        b.n_tokens = len(toks)
        for j, t in enumerate(toks):
            b.token[j] = int(t)
            b.pos[j] = pos0 + j if seqs is None else pos0
            b.n_seq_id[j] = 1
            b.seq_id[j][0] = seq if seqs is None else seqs[j]
            b.logits[j] = 0
        if want_last:
            b.logits[len(toks) - 1] = 1

    def decode(self, ctx, b):
        rc = self.L.llama_decode(ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}:\n" + "".join(self.llm.logs[-20:]))

    def decode_sync(self, ctx, b):
        t0 = now()
        self.decode(ctx, b)
        self.L.llama_synchronize(ctx)
        return now() - t0


def tokenize(bench: Bench, model, text: bytes):
    vocab = bench.L.llama_model_get_vocab(model)
    buf = (C.c_int32 * (len(text) + 16))()
    n = bench.L.llama_tokenize(vocab, text, len(text), buf, len(buf), False, False)
    assert n > 0, n
    return list(buf[:n])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib-dir", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--label", default="")
    ap.add_argument("--text", required=True, help="bench_email.txt")
    ap.add_argument("--out", required=True, help="JSON result path")
    ap.add_argument("--log", default=None, help="full llama.cpp log path")
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--prefill", type=int, default=512)
    ap.add_argument("--par", type=int, default=8)
    ap.add_argument("--gen-warmup", type=int, default=128, help="steps of the untimed warm-up run (gen and par8)")
    ap.add_argument("--skip", default="", help="comma list of parts to skip: gen,doc,embed,par")
    ap.add_argument("--require-dev", default="", help="abort unless a ggml device name starts with this (Vulkan, CUDA)")
    args = ap.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    R = {"label": args.label, "model": os.path.basename(args.model), "lib_dir": args.lib_dir,
         "model_file_MiB": os.path.getsize(args.model) / 2**20, "threads": args.threads, "reps": args.reps}
    res_path = Path(args.out)

    def flush():
        R["log_highlights"] = [s.rstrip() for s in B.llm.logs if any(k in s for k in (
            "ggml_vulkan", "Vulkan", "CUDA", "using device", "offload", "buffer size", "graph splits", "graph nodes",
            "compute capability", "load_tensors", "llama_context", "system_info", "loaded ", "warning", "error",
            "failed", "memory_recurrent", "n_seq_max", "n_ctx", "load_mode", "mmap", "direct", "splits"))][:400]
        res_path.write_text(json.dumps(R, indent=1))
        if args.log:
            Path(args.log).write_text("".join(B.llm.logs))

    B = Bench(args.lib_dir, args.threads)
    R["backend_init_s"] = B.t_backend_init
    R["devices_before"] = B.devices()
    if args.require_dev and not any(d["name"].startswith(args.require_dev) for d in R["devices_before"]):
        R["error"] = f"no {args.require_dev} device; devices: {R['devices_before']}"
        flush()
        raise SystemExit(R["error"])
    R["smi_before"] = smi()
    try:
        R["system_info"] = B.L.llama_print_system_info().decode()
    except Exception:  # noqa: BLE001
        pass

    # ---- 1. load, twice --------------------------------------------------------------------
    loads = []
    for i in range(2):
        t0 = now()
        model = B.load_model(args.model)
        t1 = now()
        ctx = B.new_ctx(model)
        t2 = now()
        loads.append({"model_load_ms": (t1 - t0) * 1e3, "ctx_init_ms": (t2 - t1) * 1e3, "total_ms": (t2 - t0) * 1e3})
        if i == 0:
            B.L.llama_free(ctx)
            B.L.llama_model_free(model)
    R["load"] = loads
    R["model_size_bytes"] = int(B.L.llama_model_size(model))
    R["model_n_params"] = int(B.L.llama_model_n_params(model))
    n_vocab = B.L.llama_vocab_n_tokens(B.L.llama_model_get_vocab(model))
    n_embd = B.L.llama_model_n_embd(model)
    R["n_vocab"], R["n_embd"] = n_vocab, n_embd
    R["devices_after_load"] = B.devices()
    R["smi_after_load"] = smi()
    flush()

    toks = tokenize(B, model, open(args.text, "rb").read())
    R["doc_tokens"] = len(toks)

    def logits_last(c, i=-1):
        p = B.L.llama_get_logits_ith(c, i)
        assert p, "null logits"
        return np.ctypeslib.as_array(p, (n_vocab,))

    # ---- 2. prefill --------------------------------------------------------------------------
    P = args.prefill
    bP = B.make_batch(P)
    B.fill(bP, toks[:P], 0)
    times = []
    R.setdefault("t_phase", {})["prefill"] = time.time()
    for r in range(args.reps + 1):
        B.clear(ctx)
        t = B.decode_sync(ctx, bP)
        am = int(logits_last(ctx).argmax())
        if r:
            times.append(t)
    R["prefill"] = {"n_tokens": P, "ms": [x * 1e3 for x in times], "median_ms": med(times) * 1e3,
                    "tok_per_s": P / med(times), "argmax_last": am}
    flush()

    # ---- 3. generation -----------------------------------------------------------------------
    b1 = B.make_batch(1)
    if "gen" not in skip:
        loops, decs, seqs = [], [], []
        R.setdefault("t_phase", {})["gen"] = time.time()
        for r in range(args.reps + 1):
            n = args.gen if r else args.gen_warmup
            B.clear(ctx)
            tok = toks[0]
            out = []
            dsum = 0.0
            t0 = now()
            for i in range(n):
                B.fill(b1, [tok], i)
                dsum += B.decode_sync(ctx, b1)
                tok = int(logits_last(ctx).argmax())
                out.append(tok)
            t = now() - t0
            if r:
                loops.append(t)
                decs.append(dsum)
                seqs.append(out)
        R["gen"] = {"n_tokens": args.gen, "loop_ms": [x * 1e3 for x in loops], "decode_ms": [x * 1e3 for x in decs],
                    "tok_per_s_loop": args.gen / med(loops), "tok_per_s_decode": args.gen / med(decs),
                    "ms_per_tok_loop": med(loops) * 1e3 / args.gen, "first_tokens": seqs[0][:8],
                    "deterministic": all(s == seqs[0] for s in seqs)}
        flush()

    # ---- 4. doc state ------------------------------------------------------------------------
    bA = B.make_batch(512)
    chunks = [toks[i:i + 512] for i in range(0, len(toks), 512)]

    def decode_doc(c):
        t0 = now()
        for k, ch in enumerate(chunks):
            B.fill(bA, ch, k * 512, want_last=(k == len(chunks) - 1))
            B.decode(c, bA)
        B.L.llama_synchronize(c)
        return now() - t0

    if "doc" not in skip:
        rows = []
        for r in range(args.reps + 1):
            B.clear(ctx)
            td = decode_doc(ctx)
            t0 = now()
            sz = B.L.llama_state_seq_get_size(ctx, 0)
            t1 = now()
            buf = np.empty(sz, np.uint8)
            t2 = now()
            got = B.L.llama_state_seq_get_data(ctx, buf.ctypes.data, sz, 0)
            t3 = now()
            assert got == sz, (got, sz)
            if r:
                rows.append({"decode_ms": td * 1e3, "get_size_ms": (t1 - t0) * 1e3, "get_data_ms": (t3 - t2) * 1e3,
                             "bytes": int(sz)})
        # round trip: next token after the doc, with and without restoring the copied state
        nxt = toks[0]
        B.fill(b1, [nxt], len(toks))
        B.decode(ctx, b1)
        ref = logits_last(ctx).copy()
        B.clear(ctx)
        t0 = now()
        ok = B.L.llama_state_seq_set_data(ctx, buf.ctypes.data, sz, 0)
        B.L.llama_synchronize(ctx)
        t_set = now() - t0
        B.fill(b1, [nxt], len(toks))
        B.decode(ctx, b1)
        back = logits_last(ctx).copy()
        R["doc_state"] = {"n_tokens": len(toks), "runs": rows,
                          "decode_median_ms": med([x["decode_ms"] for x in rows]),
                          "get_size_median_ms": med([x["get_size_ms"] for x in rows]),
                          "get_data_median_ms": med([x["get_data_ms"] for x in rows]),
                          "state_bytes": int(sz), "set_data_ms": t_set * 1e3, "set_data_rc": int(ok),
                          "roundtrip_max_abs_logit_diff": float(np.abs(ref - back).max())}
        flush()

    # ---- 5. embeddings -----------------------------------------------------------------------
    if "embed" not in skip:
        B.L.llama_set_embeddings(ctx, True)
        times, e = [], None
        for r in range(args.reps + 1):
            B.clear(ctx)
            t0 = now()
            for k, ch in enumerate(chunks):
                B.fill(bA, ch, k * 512, want_last=(k == len(chunks) - 1))
                B.decode(ctx, bA)
            p = B.L.llama_get_embeddings_ith(ctx, -1)
            assert p, "null embeddings"
            e = np.ctypeslib.as_array(p, (n_embd,)).copy()
            t = now() - t0
            if r:
                times.append(t)
        # llama.cpp outputs every token of the batch when embeddings are on (output_all):
        # check that the first token of the last chunk has an embedding row too
        p0 = B.L.llama_get_embeddings_ith(ctx, 0)
        all_out = bool(p0)
        B.L.llama_set_embeddings(ctx, False)
        R["embed"] = {"n_tokens": len(toks), "ms": [x * 1e3 for x in times], "median_ms": med(times) * 1e3,
                      "embd_norm": float(np.linalg.norm(e)), "finite": bool(np.isfinite(e).all()),
                      "all_tokens_output": all_out}
        flush()

    R["devices_after_ctx1"] = B.devices()
    R["smi_after_ctx1"] = smi()
    B.L.llama_free(ctx)

    # ---- 6. parallel sequences ---------------------------------------------------------------
    if "par" not in skip and args.par > 1:
        S = args.par
        t0 = now()
        ctx8 = B.new_ctx(model, n_seq_max=S, n_ctx=4096 * S)
        t_ctx8 = now() - t0
        bS = B.make_batch(S, 1)
        loops = []
        R.setdefault("t_phase", {})["par"] = time.time()
        for r in range(args.reps + 1):
            n = args.gen if r else args.gen_warmup
            B.clear(ctx8)
            cur = [toks[s] for s in range(S)]
            t0 = now()
            for i in range(n):
                bS.n_tokens = S
                for s in range(S):
                    bS.token[s] = cur[s]
                    bS.pos[s] = i
                    bS.n_seq_id[s] = 1
                    bS.seq_id[s][0] = s
                    bS.logits[s] = 1
                B.decode(ctx8, bS)
                for s in range(S):
                    cur[s] = int(np.ctypeslib.as_array(B.L.llama_get_logits_ith(ctx8, s), (n_vocab,)).argmax())
            t = now() - t0
            if r:
                loops.append(t)
        R["par"] = {"n_seq": S, "steps": args.gen, "ctx_init_ms": t_ctx8 * 1e3, "loop_ms": [x * 1e3 for x in loops],
                    "agg_tok_per_s": S * args.gen / med(loops), "ms_per_step": med(loops) * 1e3 / args.gen}
        R["smi_after_par"] = smi()
        B.L.llama_free(ctx8)
        flush()

    B.L.llama_model_free(model)
    R.setdefault("t_phase", {})["end"] = time.time()
    R["done"] = True
    flush()
    print(json.dumps({k: R.get(k) for k in ("label", "load", "prefill", "gen", "doc_state", "embed", "par")}))


if __name__ == "__main__":
    main()
