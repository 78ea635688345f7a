"""The text to score: read (.gz decompressed) and tokenized in a child interpreter."""
from __future__ import annotations

import gzip
import os
import sys

import numpy as np

def read_text(path: str) -> str:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
        return fh.read()


def tokenize_in_child(model_path: str, text_path: str, max_chars: int | None = None):
    """(int32 token ids of the text file, BOS id if the tokenizer adds one) from a child interpreter.

    Encoding a whole text is one BPE run over it in `tokenizers`, whose heap glibc cannot hand back
    afterwards (it stays fragmented even with the tokenizer dropped), where the model's weights would
    then stack on top of it (docs/PERFORMANCE.md#decoder-memory).  A child process's heap goes with
    the child, so the scoring process holds the weights, the KV cache and Python only; the child
    peaks before the weights are read."""
    import json
    import subprocess

    import pylowbit

    root = os.path.dirname(os.path.dirname(os.path.abspath(pylowbit.__file__)))
    code = (f"import sys; sys.path.insert(0, {root!r})\n"  # this pylowbit, not one on the child's path
            "from pylowbit.eval.text import _tokenize_child; sys.exit(_tokenize_child(*sys.argv[1:]))")
    argv = [sys.executable, "-c", code, os.fspath(model_path), os.fspath(text_path), str(max_chars or 0)]
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head, sep, data = r.stdout.partition(b"\n")
    if r.returncode != 0 or not sep:
        lines = r.stderr.decode("utf-8", "replace").strip().splitlines()
        msg = lines[-1] if lines else f"the tokenizer process exited with status {r.returncode}"
        raise (OSError if msg.startswith("OSError: ") else ValueError)(msg.split(": ", 1)[-1])
    info = json.loads(head)
    tokens = np.frombuffer(data, np.int32).copy()
    if len(tokens) != info["n"]:
        raise RuntimeError(f"the tokenizer process sent {len(tokens)} of {info['n']} tokens")
    return tokens, info["bos"]


def _tokenize_child(model_path: str, text_path: str, max_chars: str) -> int:
    """tokenize_in_child's other end: a JSON line, then the ids as raw int32 on stdout; an error is
    one 'Type: message' line on stderr and status 1."""
    import json

    from ..gguf import GGUFFile
    from ..model import TextTokenizer

    try:
        with GGUFFile(model_path) as f:
            tok = TextTokenizer(f)
            text = read_text(text_path)
            if int(max_chars):
                text = text[: int(max_chars)]
            ids = np.asarray(tok.encode(text, add_special=True), np.int32)
            bos = tok.bos_id if tok.add_bos else None
    except (ValueError, OSError) as e:  # ModelError and GGUFError are ValueErrors
        print(f"{'OSError' if isinstance(e, OSError) else 'ValueError'}: {e}", file=sys.stderr)
        return 1
    out = sys.stdout.buffer
    out.write(json.dumps({"n": len(ids), "bos": bos}).encode() + b"\n")
    out.write(ids.tobytes())
    out.flush()
    return 0
