"""A plain numpy float64 forward pass, written separately from pylowbit.model, to check it.

Weights are decoded here from the byte layouts of docs/FORMATS.md (gguf-py for the types it knows), not
through pylowbit's codecs.  Activation quantization of the kernels (int8 in llama.cpp's groups and
rounding: Q8_K / Q8_0 / P2 / A8 per weight type, see _ACT and _codes) is emulated where the kernels do it,
so the remaining difference is float rounding.
"""

import math

import numpy as np

from pylowbit.gguf import GGUFFile

# activation (group, rule) per weight type (lowbit_act_group, lowbit_quantize_act_for): llama.cpp's Q8_K
# for TQ1_0/TQ2_0/Q4_K/Q6_K, Q8_K's rule per 128-group for PQ2_0/PTQ1_0, bitnet.cpp's S8 for I2_S
# (P2 with lb.set_i2s_act_scale("pow2"): Ref(i2s_rule="p2")), Q8_0 for the rest
_ACT = {"q8_0": (32, "q8_0"), "q2_0": (32, "q8_0"), "q1_0": (32, "q8_0"), "pq2_0": (128, "q8_k"),
        "ptq1_0": (128, "q8_k"), "tq1_0": (256, "q8_k"), "tq2_0": (256, "q8_k"), "i2_s": (128, "s8"),
        "q5_0": (32, "q8_0"), "q4_k": (256, "q8_k"), "q6_k": (256, "q8_k")}


def _f16(b):
    return np.ascontiguousarray(b).view("<f2").astype(np.float64)


def _trits(b, n):
    """Trits 0..n-1 of each byte: ((uint8)(b * 3^k) * 3) >> 8."""
    b = b.astype(np.uint16)
    return np.stack([(((b * 3 ** k) & 0xFF) * 3) >> 8 for k in range(n)], axis=-2)  # (..., n, bytes)


def decode(t) -> np.ndarray:
    raw = np.asarray(t.data)
    n = t.n_elements
    if t.fmt == "f32":
        return raw.view("<f4").astype(np.float64).reshape(t.shape)
    if t.fmt == "f16":
        return raw.view("<f2").astype(np.float64).reshape(t.shape)
    if t.fmt == "bf16":  # the upper half of a float32
        return (raw.view("<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64).reshape(t.shape)
    if t.fmt in ("q8_0", "tq1_0", "tq2_0", "q4_k", "q5_0", "q6_k", "q4_0"):
        from gguf import GGMLQuantizationType
        from gguf.quants import dequantize

        return dequantize(raw.reshape(-1), GGMLQuantizationType(t.type_id)).astype(np.float64).reshape(t.shape)
    if t.fmt in ("q2_0", "pq2_0"):
        g = 64 if t.fmt == "q2_0" else 128
        blk = raw.reshape(-1, 2 + g // 4)
        d = _f16(blk[:, :2])
        qs = blk[:, 2:]
        codes = np.stack([(qs >> (2 * k)) & 3 for k in range(4)], axis=-1).reshape(-1, g)  # j -> qs[j/4] >> 2(j%4)
        return ((codes.astype(np.float64) - 1) * d).reshape(t.shape)
    if t.fmt == "q1_0":  # 128 weights: fp16 d, then bit j % 8 of qs[j / 8]: set +d, clear -d
        blk = raw.reshape(-1, 18)
        d = _f16(blk[:, :2])
        bits = np.unpackbits(blk[:, 2:], axis=1, bitorder="little").astype(np.float64)
        return ((2 * bits - 1) * d).reshape(t.shape)
    if t.fmt == "ptq1_0":
        blk = raw.reshape(-1, 28)
        d = _f16(blk[:, 26:28])
        w = np.empty((blk.shape[0], 128))
        w[:, 0:80] = _trits(blk[:, 0:16], 5).reshape(-1, 80)  # weight 16n + m
        w[:, 80:120] = _trits(blk[:, 16:24], 5).reshape(-1, 40)  # 80 + 8n + m
        w[:, 120:128] = _trits(blk[:, 24:26], 4).reshape(-1, 8)  # 120 + 2n + h
        return ((w - 1) * d).reshape(t.shape)
    if t.fmt == "i2_s":
        codes = raw[: n // 4].reshape(-1, 32)
        scale = float(raw[n // 4: n // 4 + 4].view("<f4")[0])
        c = np.stack([(codes >> s) & 3 for s in (6, 4, 2, 0)], axis=1).reshape(-1, 128)  # p + 32k
        v = np.where(c == 3, 0.0, c.astype(np.float64) - 1.0)
        return (v * scale).reshape(t.shape)
    raise NotImplementedError(t.fmt)


TIE = 1e-3  # code-units distance from a rounding tie below which either rounding is right


def _codes(x: np.ndarray, group: int, rule: str):
    """The rules of formats.h: q8_k, q8_0 (fp16 d, x86 rounding), p2 (one power-of-two d for the
    row), s8 (bitnet.cpp's one 127 / max|x| for the row), else A8."""
    x32 = x.astype(np.float32).reshape(-1, group)
    amax = np.abs(x32).max(axis=1, keepdims=True)
    nz = amax > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        if rule == "p2":  # P2 (I2_S): the smallest power of two with 127 d >= max|x| of the row
            top = np.float64(np.abs(x32).max())
            m, e = np.frexp(top / 127)
            d = np.full_like(amax, 0 if top == 0 else np.ldexp(1.0, max(e - 1 if m == 0.5 else e, -126)))
            inv = np.where(d > 0, np.float32(1) / np.where(d > 0, d, 1), np.float32(0)).astype(np.float32)
        elif rule == "s8":  # S8 (I2_S, bitnet.cpp's quantize_row_i8_s): 127 / max|x| of the row
            inv = np.full_like(amax, np.float32(127.0 / max(float(np.abs(x32).max()), 1e-5)))
            d = (np.float32(1) / inv).astype(np.float32)
        elif rule == "q8_k":
            first = np.argmax(np.abs(x32) == amax, axis=1)[:, None]
            smax = np.take_along_axis(x32, first, axis=1)
            inv = np.where(nz, np.float32(-127) / np.where(nz, smax, 1), np.float32(0)).astype(np.float32)
            d = np.where(nz, np.float32(1) / np.where(nz, inv, 1), np.float32(0)).astype(np.float32)
        else:
            d = amax / np.float32(127)
            inv = np.where(amax > 0, np.float32(127) / amax, np.float32(0)).astype(np.float32)
            if rule == "q8_0":
                d = d.astype(np.float16).astype(np.float32)
    prod = x32 * inv
    if rule in ("q8_0", "q8_k"):
        q = np.clip(np.rint(prod), -127, 127)  # half to even
    else:
        q = np.clip(np.sign(prod) * np.floor(np.abs(prod) + np.float32(0.5)), -127, 127)  # roundf: half away
    return q, d, prod


def quantize_act(x: np.ndarray, group: int, rule: str, tie_break: np.ndarray | None = None, stats=None) -> np.ndarray:
    """The kernels' A8 activation rounding, done in float32 like the C reference, returned as float64.

    Values within TIE of a rounding tie can round either way depending on the last bit of float
    noise; tie_break (the activation the model under test actually fed its kernel) decides those,
    so that a legitimate coin flip does not masquerade as an error.  Everything else is independent."""
    q, d, prod = _codes(x, group, rule)
    if tie_break is not None:
        near = np.abs(np.abs(prod) - np.floor(np.abs(prod)) - 0.5) < TIE
        if near.any():
            qm, _, _ = _codes(tie_break, group, rule)
            q = np.where(near, qm, q)
            if stats is not None:
                stats["ties"] = stats.get("ties", 0) + int((qm[near] != _codes(x, group, rule)[0][near]).sum())
        if rule == "q8_0":  # Q8_0 rounds d to fp16: a d near an fp16 rounding tie is a coin flip too
            d32 = np.abs(x.astype(np.float32)).reshape(-1, group).max(axis=1, keepdims=True) / np.float32(127)
            flip = (d32 * np.float32(1 - 1e-5)).astype(np.float16) != (d32 * np.float32(1 + 1e-5)).astype(np.float16)
            if flip.any():
                _, dm, _ = _codes(tie_break, group, rule)
                d = np.where(flip, dm, d)
    return (q.astype(np.float64) * d.astype(np.float64)).reshape(x.shape)


def round_bf16(x, tie_break=None):
    """x rounded to 8 significant bits, ties to even (BF16's precision; activations are normal
    numbers), as float64.  Values within TIE of a tie take tie_break's rounding (see quantize_act)."""
    m, e = np.frexp(x.astype(np.float64))  # x = m * 2^e, 0.5 <= |m| < 1
    y = np.ldexp(np.rint(m * 256.0), e - 8)
    if tie_break is not None:
        frac = np.abs(m * 256.0) % 1.0
        near = np.abs(frac - 0.5) < TIE
        if near.any():
            y = np.where(near, round_bf16(tie_break), y)
    return y


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _silu(x):
    return x * _sigmoid(x)


def _l2(x, eps):
    """GDN's L2 norm over the last axis: x / sqrt(sum x^2 + eps)."""
    return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + eps)


def _softplus(x):
    return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))  # ggml: identity above 20


class Ref:
    def __init__(self, path, model_inputs: dict | None = None, gdn_head_map: str = "tiled",
                 act_quant: bool = True, i2s_rule: str = "s8"):
        """model_inputs: weight name -> (T, cols) float32 inputs the model under test gave that
        matmul, used only to break exact rounding ties (see quantize_act); rows are consumed in call
        order, across forward() calls.  gdn_head_map: qwen35's V head h reads K head h % H_k
        ("tiled", the GGUF order) -- "grouped" (h // r) is the wrong model, for tests that show
        the comparison can fail.  BF16 matmuls (qwen35's ssm_alpha / ssm_beta) take
        bf16-rounded activations, as llama.cpp's CPU backend (vec_dot_type BF16) and the decoder do.
        act_quant=False: no activation quantization at all (the float64 forward of the weights as
        stored); i2s_rule: I2_S's activation rule ("s8" bitnet.cpp's, "p2" the power-of-two one)."""
        self.act_quant, self.i2s_rule = act_quant, i2s_rule
        self.model_inputs = model_inputs or {}
        self.stats = {}
        self._row = 0  # tokens consumed so far: the first row of model_inputs the next call uses
        self._cache = {}
        self.f = f = GGUFFile(path)
        self.arch = a = f.get("general.architecture")
        m = lambda k, d=None: f.metadata.get(f"{a}.{k}", d)  # noqa: E731
        self.L, self.d, self.H = m("block_count"), m("embedding_length"), m("attention.head_count")
        self.Hkv, self.hd = m("attention.head_count_kv", self.H), m("attention.key_length", self.d // self.H)
        self.eps, self.base = m("attention.layer_norm_rms_epsilon"), m("rope.freq_base", 10000.0)
        self.window, self.pattern = m("attention.sliding_window", 0), m("attention.sliding_window_pattern", 6)
        self.hadamard = None
        if "prism.hadamard.block_size" in f.metadata:
            B = f.metadata["prism.hadamard.block_size"]
            signs = {}
            if f.metadata["prism.hadamard.sign_mode"] == "explicit":
                off = 0
                for w in f.metadata["prism.hadamard.sign_widths"]:
                    signs[int(w)] = np.asarray(f.metadata["prism.hadamard.sign_values"][off:off + w], np.float64)
                    off += w
            self.hadamard = (B, signs, set(f.metadata["prism.hadamard.weight_names"]),
                             set(f.metadata.get("prism.hadamard.inverse_weight_names", [])))
        if a == "qwen35":
            self._init_qwen35(m, gdn_head_map)

    def _init_qwen35(self, m, head_map):
        """Hyper-parameters of QWEN35.md section 1, read from the file."""
        self.rope_dim = m("rope.dimension_count", self.hd)
        self.sections = [int(v) for v in m("rope.dimension_sections")]
        self.attn_scale = m("attention.scale", 0.0) or 1.0 / math.sqrt(self.hd)
        self.K, self.dk = m("ssm.conv_kernel"), m("ssm.state_size")
        self.Hv, self.Hk = m("ssm.time_step_rank"), m("ssm.group_count")
        self.dv = m("ssm.inner_size") // self.Hv
        if f"{self.arch}.attention.recurrent_layers" in self.f.metadata:
            self.recurrent = [bool(v) for v in m("attention.recurrent_layers")]
        else:
            interval = m("full_attention_interval", 4)
            self.recurrent = [(i + 1) % interval != 0 for i in range(self.L)]
        r = self.Hv // self.Hk
        self.k_head = [h % self.Hk if head_map == "tiled" else h // r for h in range(self.Hv)]
        grouped = bool(self.f.metadata.get("prism.hadamard.gdn_v_grouped", False)) and self.hadamard is not None
        # P: grouped slot kappa * r + rho <- tiled slot rho * H_k + kappa, whole dv-wide head blocks
        self.v_perm = None
        if grouped:
            blocks = [rho * self.Hk + kappa for kappa in range(self.Hk) for rho in range(r)]
            self.v_perm = (np.array(blocks)[:, None] * self.dv + np.arange(self.dv)).reshape(-1)
        self.reset()

    def reset(self):
        """A new sequence: zero conv and delta-rule states, empty KV cache (model_inputs' row
        cursor is not rewound)."""
        self.pos = 0
        C = 2 * self.dk * self.Hk + self.dv * self.Hv
        self.conv = {i: np.zeros((self.K - 1, C)) for i in range(self.L) if self.recurrent[i]}
        self.S = {i: np.zeros((self.Hv, self.dk, self.dv)) for i in range(self.L) if self.recurrent[i]}  # S[h][i][j]
        self.kv = {i: (np.zeros((0, self.Hkv, self.hd)), np.zeros((0, self.Hkv, self.hd)))
                   for i in range(self.L) if not self.recurrent[i]}

    def W(self, name):
        if name not in self._cache:
            self._cache[name] = decode(self.f.tensor(name))
        return self._cache[name]

    def _rot(self, x, with_signs=True):
        """x' = H(s * x) with H the dense normalized Sylvester matrix (no fast transform here)."""
        B, signs, _, _ = self.hadamard
        s = signs.get(x.shape[-1], np.ones(x.shape[-1])) if with_signs else 1.0
        if "hadamard" not in self._cache:
            Hm = np.array([[1.0]])
            while Hm.shape[0] < B:
                Hm = np.block([[Hm, Hm], [Hm, -Hm]])
            self._cache["hadamard"] = Hm / math.sqrt(B)
        Hm = self._cache["hadamard"]
        y = (x * s).reshape(x.shape[0], -1, B) @ Hm.T
        return y.reshape(x.shape)

    def mm(self, x, name, tensor_name=None):
        t = self.f.tensor(tensor_name or name)
        if self.hadamard and (name in self.hadamard[2] or (tensor_name == "token_embd.weight"
                                                           and "token_embd.weight" in self.hadamard[3])):
            x = self._rot(x)
        if t.fmt == "bf16":  # llama.cpp's BF16 dot multiplies BF16-rounded activations
            tb = self.model_inputs.get(name)
            x = round_bf16(x.astype(np.float32), None if tb is None else tb[self._row:self._row + len(x)])
        if t.fmt in _ACT and self.act_quant:
            tb = self.model_inputs.get(name)
            group, rule = _ACT[t.fmt]
            rule = self.i2s_rule if t.fmt == "i2_s" else rule
            x = np.stack([quantize_act(r, group, rule, None if tb is None else tb[self._row + i], self.stats)
                          for i, r in enumerate(x)])
        return x @ self.W(t.name).T

    def norm(self, x, name):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * self.W(name)

    def rope(self, x, pos, base, neox):
        # x (T, heads, hd)
        hd = x.shape[-1]
        inv = base ** (-np.arange(0, hd, 2) / hd)
        ang = pos[:, None, None] * inv[None, None, :]
        c, s = np.cos(ang), np.sin(ang)
        y = x.copy()
        if neox:
            a, b = x[..., : hd // 2], x[..., hd // 2:]
            y[..., : hd // 2], y[..., hd // 2:] = a * c - b * s, a * s + b * c
        else:
            a, b = x[..., 0::2], x[..., 1::2]
            y[..., 0::2], y[..., 1::2] = a * c - b * s, a * s + b * c
        return y

    def logits(self, tokens):
        if self.arch == "qwen35":
            self.reset()
            return self.forward(tokens)
        a, T = self.arch, len(tokens)
        x = self.W("token_embd.weight")[tokens]
        if self.hadamard and "token_embd.weight" in self.hadamard[3]:
            B, signs, _, _ = self.hadamard
            x = self._rot(x, with_signs=False) * signs.get(self.d, 1.0)  # e = s * (H z)
        if a == "gemma3":
            x = x * math.sqrt(self.d)
        neox = a != "llama"
        pos = np.arange(T, dtype=np.float64)
        for il in range(self.L):
            p = f"blk.{il}."
            h = self.norm(x, p + "attn_norm.weight")
            q = self.mm(h, p + "attn_q.weight").reshape(T, self.H, self.hd)
            k = self.mm(h, p + "attn_k.weight").reshape(T, self.Hkv, self.hd)
            v = self.mm(h, p + "attn_v.weight").reshape(T, self.Hkv, self.hd)
            if a in ("qwen3", "gemma3"):
                q, k = self.norm(q, p + "attn_q_norm.weight"), self.norm(k, p + "attn_k_norm.weight")
            swa = a == "gemma3" and self.window and il % self.pattern < self.pattern - 1
            base = 10000.0 if swa else self.base
            q, k = self.rope(q, pos, base, neox), self.rope(k, pos, base, neox)
            out = np.zeros((T, self.H, self.hd))
            g = self.H // self.Hkv
            for hh in range(self.H):
                sc = q[:, hh] @ k[:, hh // g].T / math.sqrt(self.hd)
                i, j = np.meshgrid(np.arange(T), np.arange(T), indexing="ij")
                ok = (j <= i) & ((i - j < self.window) if swa else True)
                sc = np.where(ok, sc, -np.inf)
                pr = np.exp(sc - sc.max(axis=1, keepdims=True))
                out[:, hh] = (pr / pr.sum(axis=1, keepdims=True)) @ v[:, hh // g]
            o = out.reshape(T, -1)
            if a == "bitnet-b1.58":
                o = self.norm(o, p + "attn_sub_norm.weight")
            o = self.mm(o, p + "attn_output.weight")
            if a == "gemma3":
                o = self.norm(o, p + "post_attention_norm.weight")
            x = x + o
            h = self.norm(x, p + "ffn_norm.weight")
            gt, up = self.mm(h, p + "ffn_gate.weight"), self.mm(h, p + "ffn_up.weight")
            if a == "bitnet-b1.58":
                m = np.maximum(gt, 0) ** 2 * up
                m = self.norm(m, p + "ffn_sub_norm.weight")
            elif a == "gemma3":
                m = 0.5 * gt * (1 + np.tanh(math.sqrt(2 / math.pi) * (gt + 0.044715 * gt ** 3))) * up
            else:
                m = gt / (1 + np.exp(-gt)) * up
            o = self.mm(m, p + "ffn_down.weight")
            if a == "gemma3":
                o = self.norm(o, p + "post_ffw_norm.weight")
            x = x + o
        x = self.norm(x, "output_norm.weight")
        if "output.weight" in self.f.tensors:
            return self.mm(x, "output.weight")
        return self.mm(x, "output.weight", tensor_name="token_embd.weight")

    # ---- qwen35 (QWEN35.md section 3), one call continuing the sequence's state ---------------

    def forward(self, tokens):
        """qwen35 logits (T, V) of the next T tokens of the current sequence."""
        tokens = np.asarray(tokens, dtype=np.int64).reshape(-1)
        T = len(tokens)
        h = self.W("token_embd.weight")[tokens]
        if self.hadamard and "token_embd.weight" in self.hadamard[3]:
            B, signs, _, _ = self.hadamard
            h = self._rot(h, with_signs=False) * signs.get(self.d, 1.0)  # e = s * (H z)
        for il in range(self.L):
            p = f"blk.{il}."
            x = self.norm(h, p + "attn_norm.weight")
            r = h + (self._gdn(il, x) if self.recurrent[il] else self._attention(il, x))
            x2 = self.norm(r, p + "post_attention_norm.weight")
            gt, up = self.mm(x2, p + "ffn_gate.weight"), self.mm(x2, p + "ffn_up.weight")
            h = r + self.mm(_silu(gt) * up, p + "ffn_down.weight")
        x = self.norm(h, "output_norm.weight")
        out = self.mm(x, "output.weight") if "output.weight" in self.f.tensors else \
            self.mm(x, "output.weight", tensor_name="token_embd.weight")
        self.pos += T
        self._row += T
        return out

    def _gdn(self, il, x):
        """Gated DeltaNet, token by token in float64 (QWEN35.md 3.4)."""
        p = f"blk.{il}."
        T, d, Hk, Hv, dk = x.shape[0], self.dv, self.Hk, self.Hv, self.dk
        Dk = dk * Hk
        m = self.mm(x, p + "attn_qkv.weight")  # (T, C): q | k | v
        z = self.mm(x, p + "attn_gate.weight").reshape(T, Hv, d)
        beta = _sigmoid(self.mm(x, p + "ssm_beta.weight"))  # alpha / beta: never folded, unrotated x
        g = self.W(p + "ssm_a") * _softplus(self.mm(x, p + "ssm_alpha.weight") + self.W(p + "ssm_dt.bias"))
        # causal depthwise conv over the K-1 cached pre-conv inputs then the T new ones
        wconv = self.W(p + "ssm_conv1d.weight")  # (C, K): tap K-1 multiplies the current input
        window = np.vstack([self.conv[il], m])
        u = sum(window[i:i + T] * wconv[:, i] for i in range(self.K))
        self.conv[il] = window[T:]
        y = _silu(u)
        q = _l2(y[:, :Dk].reshape(T, Hk, dk), self.eps)
        k = _l2(y[:, Dk:2 * Dk].reshape(T, Hk, dk), self.eps)
        v = y[:, 2 * Dk:].reshape(T, Hv, d)
        S = self.S[il]
        o = np.empty((T, Hv, d))
        for t in range(T):
            for hh in range(Hv):
                kk, qq = k[t, self.k_head[hh]], q[t, self.k_head[hh]]
                S[hh] *= math.exp(g[t, hh])
                delta = beta[t, hh] * (v[t, hh] - S[hh].T @ kk)
                S[hh] += np.outer(kk, delta)
                o[t, hh] = S[hh].T @ qq / math.sqrt(dk)
        n = o / np.sqrt(np.mean(o * o, axis=-1, keepdims=True) + self.eps) * self.W(p + "ssm_norm.weight")
        flat = (n * _silu(z)).reshape(T, Hv * d)  # tiled head order
        if self.v_perm is not None:
            flat = flat[:, self.v_perm]  # P: ssm_out was folded in grouped order
        return self.mm(flat, p + "ssm_out.weight")

    def _rope_imrope(self, x, pos):
        """NEOX-style rotation of the first rope_dim dims; pair i turns by theta_i = p_c base^(-2i/n)
        with p_c the IMROPE component of the pair (text: (p, p, p, 0))."""
        n = self.rope_dim
        half = n // 2
        sect = sum(self.sections)
        comp = []
        for i in range(half):
            sector = i % sect
            c = next((c for c in range(3) if sector % 3 == c and sector < 3 * self.sections[c]), 3)
            comp.append(c)
        ppos = np.where(np.array(comp)[None, :] == 3, 0.0, pos[:, None])  # (T, half)
        ang = ppos * self.base ** (-2.0 * np.arange(half) / n)
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        y = x.copy()
        a, b = x[..., :half], x[..., half:n]
        y[..., :half], y[..., half:n] = a * c - b * s, a * s + b * c
        return y

    def _attention(self, il, x):
        """Gated attention with QK norm, partial RoPE, GQA and a KV cache (QWEN35.md 3.3)."""
        p = f"blk.{il}."
        T, H, Hkv, D = x.shape[0], self.H, self.Hkv, self.hd
        qg = self.mm(x, p + "attn_q.weight").reshape(T, H, 2 * D)  # per head: D query rows, D gate rows
        q, gate = qg[..., :D], qg[..., D:]
        k = self.mm(x, p + "attn_k.weight").reshape(T, Hkv, D)
        v = self.mm(x, p + "attn_v.weight").reshape(T, Hkv, D)
        q, k = self.norm(q, p + "attn_q_norm.weight"), self.norm(k, p + "attn_k_norm.weight")
        pos = np.arange(self.pos, self.pos + T, dtype=np.float64)
        q, k = self._rope_imrope(q, pos), self._rope_imrope(k, pos)
        K_all, V_all = (np.concatenate([c, n]) for c, n in zip(self.kv[il], (k, v)))
        self.kv[il] = (K_all, V_all)
        n_all = K_all.shape[0]
        visible = np.arange(n_all)[None, :] <= (self.pos + np.arange(T))[:, None]
        out = np.empty((T, H, D))
        group = H // Hkv
        for hh in range(H):
            sc = q[:, hh] @ K_all[:, hh // group].T * self.attn_scale
            sc = np.where(visible, sc, -np.inf)
            pr = np.exp(sc - sc.max(axis=1, keepdims=True))
            out[:, hh] = (pr / pr.sum(axis=1, keepdims=True)) @ V_all[:, hh // group]
        out *= _sigmoid(gate)
        return self.mm(out.reshape(T, H * D), p + "attn_output.weight")
