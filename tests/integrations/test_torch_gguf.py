"""pylowbit.torch.load_gguf: a llama GGUF file as a transformers model of pylowbit.torch layers, and
`pylowbit bench --vs torch`, which runs it beside pylowbit's own decoder on the same file."""
import numpy as np
import pytest
import torch

from pylowbit import benchmark
from pylowbit.bench_models import synthetic_model
from pylowbit.model import load_model
import pylowbit.torch as pt


@pytest.fixture(scope="module", autouse=True)
def cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("PYLOWBIT_CACHE", str(tmp_path_factory.mktemp("gguf-cache")))
    yield
    mp.undo()


@pytest.mark.parametrize("fmt", ["tq2_0", "i2_s", "tq1_0"])
def test_logits_equal_pylowbit_decoder(fmt):
    """Same kernels, same activation rule, attn_q / attn_k rows put back in transformers' RoPE
    order: the logits of every position equal the decoder's up to float rounding."""
    path = synthetic_model("tiny", fmt)
    tokens = [5, 17, 33, 2, 9, 100, 7]
    decoder = load_model(path, ctx=32, threads=1)
    model = pt.load_gguf(path)
    assert all(type(m) is not torch.nn.Linear for m in model.modules())
    assert model._pylowbit_holds_threads  # every linear is pylowbit's: quantize_'s "auto" holds
    assert sum(isinstance(m, pt.Linear) for m in model.modules()) == 7 * model.config.num_hidden_layers + 1
    # repack (load_gguf's default): one copy a layer, the packed bytes in place of the file's
    for m in model.modules():
        if isinstance(m, pt.Linear) and m.format == fmt:
            assert m.weight.numel() == 0 and m.repacked_nbytes > 0
            assert not any(p.nbytes for p in m.packed_matrices())
    with torch.no_grad():
        got = model(torch.tensor([tokens])).logits[0].numpy()
    for i in range(len(tokens)):  # the decoder one token at a time, with its cache
        want = np.asarray(decoder.forward([tokens[i]], pos=i) if i else decoder.forward(tokens[:1], pos=0))
        assert np.abs(got[i] - want).max() <= 1e-4 * np.abs(want).max(), i
    with torch.no_grad():  # greedy generation through transformers' generate()
        out = model.generate(torch.tensor([tokens]), max_new_tokens=4, do_sample=False,
                             pad_token_id=0, eos_token_id=None)
    assert out.shape == (1, len(tokens) + 4)


def test_refuses_other_architectures():
    with pytest.raises(ValueError, match="llama-architecture"):
        pt.load_gguf(synthetic_model("qwen35-tiny", "tq2_0"))


def test_bench_vs_torch_rows():
    rows, info = benchmark.run(preset="tiny", types="tq2_0", threads=[1], n_prompt=8, n_gen=2, reps=2,
                               vs="torch")
    assert info["vs"] == "torch"
    assert sorted((r.engine, r.test) for r in rows) == [("pylowbit", "pp8"), ("pylowbit", "tg2"),
                                                         ("torch", "pp8"), ("torch", "tg2")]
    for r in rows:
        assert r.tokens_per_s > 0 and len(r.samples) == 2
        if r.engine == "pylowbit":
            torch_row = next(o for o in rows if o.engine == "torch" and o.test == r.test)
            assert r.vs_torch == pytest.approx(r.tokens_per_s / torch_row.tokens_per_s)
            assert r.vs_llama_cpp is None
