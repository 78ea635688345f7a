"""atheris fuzz target: the GGUF reader and the decoder's loading path (model, rotation, tokenizer), one
forward step, a tokenizer round trip and the chat template.

Every input must either load or raise one of pylowbit's clear errors (GGUFError, ModelError,
HadamardError and the ValueError/TypeError of argument checks); anything else - another exception,
a crash, a hang, a huge allocation - is a finding.  The loading is the same as the file rows of
tests/test_malformed.py (`load` there), plus the calls `pylowbit run --chat` makes next.

    python fuzz/make_corpus.py fuzz/corpus
    nice python fuzz/fuzz_gguf.py fuzz/corpus -max_total_time=600 -rss_limit_mb=3072 -max_len=200000 \\
        -print_final_stats=1
"""
import os
import sys
import tempfile

import atheris

with atheris.instrument_imports(include=["pylowbit"]):
    from pylowbit.gguf import GGUFFile
    from pylowbit.model import TextTokenizer, load_model
    from pylowbit.model import tokenizer

tokenizer.CHAT_TEMPLATE_SECONDS = 0.5  # a mutated template that loops ends quickly (and still counts as refused)

# UnicodeDecodeError is a ValueError, but one that escaped unwrapped names no GGUF field: a finding.
EXPECTED = (ValueError, TypeError)
PATH = os.path.join(tempfile.gettempdir(), f"pylowbit-fuzz-{os.getpid()}.gguf")


def one_input(data: bytes) -> None:
    with open(PATH, "wb") as f:
        f.write(data)
    try:
        with GGUFFile(PATH) as g:
            for t in g.tensors.values():
                t.data[-1:].tobytes()  # touch the last byte of every tensor: in bounds?
        model = load_model(PATH, ctx=8, threads=1, notice=None)
        model.forward([1], pos=0)
        tok = TextTokenizer(model.file)
        tok.decode(tok.encode("Hello, world! 123"))
        if tok.chat_template:
            tok.apply_chat_template([{"role": "user", "content": "Hi"}])
    except UnicodeDecodeError:
        raise
    except EXPECTED:
        pass


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
