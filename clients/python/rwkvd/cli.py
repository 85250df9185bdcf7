"""`python -m rwkvd` (console script `rwkvd-client`): the client commands of the C++ CLI
(`rwkvd generate|embed|tokenize-remote|state|stats`), with the same options and output, for
machines that have the Python package but not the binary.

    python -m rwkvd generate --text "Once upon a time" --max-tokens 40 --seed 1
    python -m rwkvd embed --text one --text two --normalize
    python -m rwkvd tokenize --text "Hello"          # or --tokens 1,2,3 --decode
    python -m rwkvd state --text "A prompt" --out state.f32
    python -m rwkvd stats [--info]
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, List, Optional, Sequence

import numpy as np

from .client import Client, Prompt
from .errors import InvalidArgument, RwkvdError


def _token_list(s: str) -> List[int]:
    out = []
    for item in s.split(","):
        if not item:
            continue
        if not item.isdigit() or int(item) > 2**31 - 1:
            raise InvalidArgument(f"bad token id {item!r}")
        out.append(int(item))
    return out


def _prompt(a: argparse.Namespace) -> Prompt:
    if a.tokens:
        return _token_list(a.tokens)
    if a.text:
        return a.text
    raise InvalidArgument("give --text or --tokens")


def _connect(a: argparse.Namespace) -> Client:
    return Client(a.endpoint, timeout=a.timeout, use_shm=not a.no_shm, server_key=a.server_key)


def _dump(v: Any) -> str:
    return json.dumps(v, indent=2, ensure_ascii=False,
                      default=lambda b: f"<{len(b)} bytes>" if isinstance(b, bytes) else str(b))


def _write_f32(path: str, arr: np.ndarray) -> None:
    with open(path, "wb") as f:
        f.write(np.ascontiguousarray(arr, dtype="<f4").tobytes())


def cmd_generate(a: argparse.Namespace) -> None:
    opts = dict(max_tokens=a.max_tokens, temperature=a.temperature, top_p=a.top_p,
                top_k=a.top_k, presence_penalty=a.presence_penalty,
                frequency_penalty=a.frequency_penalty, stop=a.stop, seed=a.seed)
    with _connect(a) as c:
        if a.json:
            g = c.generate(_prompt(a), **opts)
            print(_dump({"tokens": g.tokens, "text": g.text, "finish_reason": g.finish_reason,
                         "seed": g.seed, "prompt_tokens": g.prompt_tokens,
                         "completion_tokens": g.completion_tokens}))
            return
        for chunk in c.generate(_prompt(a), stream=True, **opts):
            sys.stdout.write(chunk.text)
            sys.stdout.flush()
            if chunk.result is not None:
                g = chunk.result
        sys.stdout.write("\n")
        print(f"[{g.finish_reason}, {g.completion_tokens} tokens, seed {g.seed}]", file=sys.stderr)


def cmd_embed(a: argparse.Namespace) -> None:
    inputs: List[Prompt] = list(a.text or [])
    if a.tokens:
        inputs.append(_token_list(a.tokens))
    if not inputs:
        raise InvalidArgument("embed: give --text or --tokens")
    with _connect(a) as c:
        e = c.embed(inputs, normalize=a.normalize)
        if a.out:
            _write_f32(a.out, e)
            print(f"wrote [{e.shape[0]}, {e.shape[1]}] float32 to {a.out}", file=sys.stderr)
            return
        print(json.dumps(e.tolist()))


def cmd_tokenize(a: argparse.Namespace) -> None:
    with _connect(a) as c:
        if a.decode:
            sys.stdout.write(c.detokenize(_token_list(a.tokens or "")))
            return
        if not a.text:
            raise InvalidArgument("tokenize: give --text (or --tokens with --decode)")
        print(json.dumps(c.tokenize(a.text)))


def cmd_state(a: argparse.Namespace) -> None:
    with _connect(a) as c, c.session() as s:
        s.feed(_prompt(a))
        st = s.state()
        ring = c._ring
        where = ("shared memory" if ring is not None
                 and np.shares_memory(st, np.frombuffer(ring.mm, dtype=np.uint8)) else "inline")
        print(f"state [{', '.join(str(d) for d in st.shape)}] ({where})", file=sys.stderr)
        if a.out:
            _write_f32(a.out, st)


def cmd_stats(a: argparse.Namespace) -> None:
    with _connect(a) as c:
        print(_dump(c.info() if a.info else c.stats()))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m rwkvd",
                                description="Client commands of a running rwkvd worker")
    sub = p.add_subparsers(dest="command", required=True)

    def command(name: str, help: str, prompt: bool, aliases: Sequence[str] = ()):
        c = sub.add_parser(name, help=help, description=help, aliases=list(aliases))
        c.add_argument("--endpoint", help="worker endpoint (default: $RWKVD_ENDPOINT or the "
                                          "per-user ipc socket)")
        c.add_argument("--timeout", type=float, default=120.0,
                       help="seconds to wait for a reply (default 120)")
        c.add_argument("--no-shm", action="store_true",
                       help="take tensors inline instead of through shared memory")
        c.add_argument("--server-key", help="the worker's CURVE public key, for tcp to another "
                                            "host's worker (default: $RWKVD_SERVER_KEY, else "
                                            "this user's own worker's)")
        if prompt:
            c.add_argument("--text", help="input text")
            c.add_argument("--tokens", help="input token ids, comma separated")
        return c

    g = command("generate", "Generate text through a running worker", True)
    g.add_argument("--max-tokens", type=int, default=16)
    g.add_argument("--temperature", type=float, default=1.0)
    g.add_argument("--top-p", type=float, default=1.0)
    g.add_argument("--top-k", type=int, default=0)
    g.add_argument("--presence-penalty", type=float, default=0.0)
    g.add_argument("--frequency-penalty", type=float, default=0.0)
    g.add_argument("--stop", action="append", help="stop string (repeatable)")
    g.add_argument("--seed", type=int)
    g.add_argument("--json", action="store_true",
                   help="print the whole result as JSON instead of streaming text")
    g.set_defaults(run=cmd_generate)

    e = command("embed", "Embed texts (or --tokens) through a running worker", False)
    e.add_argument("--text", action="append", help="input text (repeatable)")
    e.add_argument("--tokens", help="one input as comma-separated token ids")
    e.add_argument("--normalize", action="store_true", help="L2-normalise each embedding")
    e.add_argument("--out", help="write raw float32 [n, n_embd] here instead of JSON")
    e.set_defaults(run=cmd_embed)

    t = command("tokenize", "Tokenize (or --decode) with a running worker", True,
                aliases=["tokenize-remote"])
    t.add_argument("--decode", action="store_true", help="decode --tokens to text")
    t.set_defaults(run=cmd_tokenize)

    s = command("state", "The state after a prompt, from a running worker", True)
    s.add_argument("--out", help="write raw float32 [n_layer, head_size+2, n_embd] here")
    s.set_defaults(run=cmd_state)

    st = command("stats", "Print a running worker's stats (or --info) as JSON", False)
    st.add_argument("--info", action="store_true", help="model, device, memory and limits instead")
    st.set_defaults(run=cmd_stats)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    a = _parser().parse_args(argv)
    try:
        a.run(a)
    except RwkvdError as e:
        print(f"rwkvd: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 1
    return 0
