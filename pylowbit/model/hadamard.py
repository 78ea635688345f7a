"""`prism.hadamard.*` folded rotations (docs/FORMATS.md): metadata validation and the activation transform.

A listed weight W was stored as W' = W S H (S = diag(signs), H = blockwise normalized Sylvester WHT),
so W x = W' (H S x): the decoder rotates the activation, x' = H(s * x), before each folded matmul.
An inverse-listed embedding table stores z = H(s * e); the lookup undoes it with e = s * (H z).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ..gguf import GGUFFile
from .config import ModelError

PREFIX = "prism.hadamard."
TRANSFORM = "normalized-sylvester-walsh-hadamard"
AXIS = "input-last-dimension"
_FOLDABLE = re.compile(r"^(blk\.\d+\.(attn_q|attn_k|attn_v|attn_qkv|attn_gate|attn_output|"
                       r"ffn_gate|ffn_up|ffn_down|ssm_out)\.weight|output\.weight)$")
_INVERSE_ALLOWED = {"token_embd.weight"}


class HadamardError(ModelError):
    pass


def fwht_numpy(x: np.ndarray, block: int, signs: np.ndarray | None = None, signs_first: bool = True) -> np.ndarray:
    """Blockwise normalized Sylvester-order WHT over the last axis (returns a new array)."""
    x = np.array(x, copy=True)
    if signs is not None and signs_first:
        x *= signs
    shape = x.shape
    n = shape[-1]
    y = x.reshape(-1, n // block, block)
    h = 1
    while h < block:
        y = y.reshape(y.shape[0], y.shape[1], block // (2 * h), 2, h)
        a, b = y[:, :, :, 0, :], y[:, :, :, 1, :]
        y = np.stack((a + b, a - b), axis=3)
        h *= 2
    y = y.reshape(shape) * (1.0 / np.sqrt(block)).astype(x.dtype)
    if signs is not None and not signs_first:
        y *= signs
    return y.astype(x.dtype, copy=False)


def _lb_fwht():
    try:
        from pylowbit.core import fwht as lb_fwht

        return lb_fwht
    except ImportError:  # pragma: no cover
        return None


def fwht(x: np.ndarray, block: int, signs: np.ndarray | None = None, signs_first: bool = True) -> np.ndarray:
    """The one place the decoder calls the transform: the C kernel when built, numpy otherwise."""
    f = _lb_fwht()
    if f is not None and x.dtype == np.float32:
        return f(np.ascontiguousarray(x), block=block, normalize=True, signs=signs,
                 order="signs-then-rotate" if signs_first else "rotate-then-signs")
    return fwht_numpy(x, block, signs, signs_first)


@dataclass
class Rotation:
    block: int
    signs: dict[int, np.ndarray | None] = field(default_factory=dict)  # input width -> +-1 (None: identity)
    weight_names: frozenset = frozenset()
    inverse_names: frozenset = frozenset()
    gdn_v_grouped: bool = False  # ssm_out was folded in grouped V-head order (QWEN35.md 7.3)

    def signs_for(self, width: int) -> np.ndarray | None:
        return self.signs.get(width)

    def rotate(self, x: np.ndarray) -> np.ndarray:
        """x' = H(s * x) over the last axis (before a folded matmul)."""
        return fwht(x, self.block, self.signs_for(x.shape[-1]), signs_first=True)

    def unrotate_embedding(self, z: np.ndarray) -> np.ndarray:
        """e = s * (H z) (after the lookup of an inverse-listed table)."""
        return fwht(z, self.block, self.signs_for(z.shape[-1]), signs_first=False)


def _key(f: GGUFFile, name: str, kind, required=True):
    k = PREFIX + name
    if k not in f.metadata:
        if required:
            raise HadamardError(f"{k}: missing (other prism.hadamard keys are present)")
        return None
    try:
        return f.get(k, kind)
    except ValueError as e:
        raise HadamardError(f"{k}: {e}") from None


def _str_list(f: GGUFFile, name: str, required: bool) -> list[str] | None:
    v = _key(f, name, list, required)
    if v is None:
        return None
    if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
        raise HadamardError(f"{PREFIX}{name}: must be an array of strings")
    if len(set(v)) != len(v):
        raise HadamardError(f"{PREFIX}{name}: lists a name twice")
    return v


# qwen35: which folded weights belong to which layer kind
_GDN_ONLY = ("attn_qkv", "attn_gate", "ssm_out")
_ATTENTION_ONLY = ("attn_q", "attn_k", "attn_v", "attn_output")


def parse_rotation(f: GGUFFile, cfg=None) -> Rotation | None:
    """Validate prism.hadamard.* metadata against the file (and, given the model's Config, against
    its layer kinds); None when the file has none."""
    if not any(k.startswith(PREFIX) for k in f.metadata):
        return None
    version = _key(f, "version", int)
    if version != 1:
        raise HadamardError(f"{PREFIX}version: unsupported version {version} (only 1 is defined)")
    block = _key(f, "block_size", int)
    if block < 2 or block & (block - 1):
        raise HadamardError(f"{PREFIX}block_size: {block} is not a power of two >= 2")
    transform = _key(f, "transform", str)
    if transform != TRANSFORM:
        raise HadamardError(f"{PREFIX}transform: {transform!r} is not {TRANSFORM!r}")
    axis = _key(f, "axis", str)
    if axis != AXIS:
        raise HadamardError(f"{PREFIX}axis: {axis!r} is not {AXIS!r}")
    mode = _key(f, "sign_mode", str)
    if mode not in ("identity", "explicit"):
        raise HadamardError(f"{PREFIX}sign_mode: {mode!r} is neither 'identity' nor 'explicit'")
    names = _str_list(f, "weight_names", True)
    if not names:
        raise HadamardError(f"{PREFIX}weight_names: empty list (a rotation folded into nothing)")
    inverse = _str_list(f, "inverse_weight_names", False) or []
    for n in names:
        if not _FOLDABLE.match(n):
            raise HadamardError(f"{PREFIX}weight_names: {n!r} is not a foldable weight")
        if n not in f.tensors:
            raise HadamardError(f"{PREFIX}weight_names: {n!r} is not a tensor of this file")
    for n in inverse:
        if n not in _INVERSE_ALLOWED:
            raise HadamardError(f"{PREFIX}inverse_weight_names: {n!r} is not allowed (only token_embd.weight)")
        if n not in f.tensors:
            raise HadamardError(f"{PREFIX}inverse_weight_names: {n!r} is not a tensor of this file")

    widths_needed = {f.tensors[n].shape[-1]: n for n in names + inverse}
    signs: dict[int, np.ndarray | None] = {}
    if mode == "explicit":
        widths = _key(f, "sign_widths", list)
        values = _key(f, "sign_values", list)
        widths = np.asarray(widths)
        values = np.asarray(values)
        if widths.ndim != 1 or widths.size == 0 or widths.dtype.kind not in "iu":
            raise HadamardError(f"{PREFIX}sign_widths: must be a non-empty integer array")
        if values.ndim != 1 or values.dtype.kind not in "iuf":
            raise HadamardError(f"{PREFIX}sign_values: must be a numeric array")
        widths = widths.tolist()  # python ints: a numpy sum of huge widths would wrap around
        if len(set(widths)) != len(widths):
            raise HadamardError(f"{PREFIX}sign_widths: a width is listed twice")
        for w in widths:
            if w <= 0 or w % block:
                raise HadamardError(f"{PREFIX}sign_widths: width {w} is not a positive multiple of block_size {block}")
        if values.size != sum(widths):
            raise HadamardError(f"{PREFIX}sign_values: {values.size} values, but sign_widths sum to {sum(widths)}")
        if not np.all((values == 1) | (values == -1)):
            raise HadamardError(f"{PREFIX}sign_values: values must all be +1 or -1")
        off = 0
        for w in widths:
            signs[w] = values[off:off + w].astype(np.float32)
            off += w
    for w, n in widths_needed.items():
        if w % block:
            raise HadamardError(f"{PREFIX}block_size: {n!r} has input width {w}, not a multiple of {block}")
        if mode == "explicit" and w not in signs:
            raise HadamardError(f"{PREFIX}sign_widths: no sign vector for width {w} (needed by {n!r})")
        if mode == "identity":
            signs[w] = None
    grouped = _gdn_v_grouped(f, cfg, names)
    return Rotation(block, signs, frozenset(names), frozenset(inverse), grouped)


def _gdn_v_grouped(f: GGUFFile, cfg, names: list[str]) -> bool:
    """prism.hadamard.gdn_v_grouped, and the per-layer-kind rules of a hybrid's folded weights."""
    grouped = _key(f, "gdn_v_grouped", bool, required=False)
    hybrid = cfg is not None and cfg.ssm is not None
    if grouped and not hybrid:
        raise HadamardError(f"{PREFIX}gdn_v_grouped: set, but the model has no Gated-DeltaNet layers")
    if not hybrid:
        return bool(grouped)
    for n in names:
        m = re.match(r"blk\.(\d+)\.([a-z_]+)\.weight$", n)
        if not m:
            continue
        il, kind = int(m.group(1)), m.group(2)
        if il >= cfg.n_layer:
            raise HadamardError(f"{PREFIX}weight_names: {n!r} names layer {il} of a {cfg.n_layer}-layer model")
        if kind in _GDN_ONLY and not cfg.is_recurrent(il):
            raise HadamardError(f"{PREFIX}weight_names: {n!r} is a Gated-DeltaNet weight in attention layer {il}")
        if kind in _ATTENTION_ONLY and cfg.is_recurrent(il):
            raise HadamardError(f"{PREFIX}weight_names: {n!r} is an attention weight in Gated-DeltaNet layer {il}")
    if grouped:
        s = cfg.ssm
        if s.n_v_heads % s.n_k_heads:
            raise HadamardError(f"{PREFIX}gdn_v_grouped: {s.n_v_heads} V heads are not a multiple of "
                                f"{s.n_k_heads} K heads")
        for n in names:
            if n.endswith(".ssm_out.weight") and f.tensors[n].shape[-1] % s.n_v_heads:
                raise HadamardError(f"{PREFIX}gdn_v_grouped: {n!r} has input width {f.tensors[n].shape[-1]}, "
                                    f"not a multiple of {s.n_v_heads} V heads")
    return bool(grouped)
