"""KL divergence of a model's next-token distributions against a base run, the llama-perplexity way.

A base run gives, for every scored token, the log-probabilities of the whole vocabulary (stored in
a base file, pylowbit.eval.base_file, or kept in memory as logits); a run of another model (or
another runtime) on the same token ids is scored against them: mean KLD, same top token,
Δp = p(next token) - p_base(next token), and the perplexity ratio.

The arithmetic follows llama-perplexity's in type (float32 per-token values, float64 sums), so the
statistics from a base file equal its printout.  In memory (kl_divergence_of_logits(base_logits,
logits, ...)) the base need not be compressed: then a model scored against itself gives exactly 0.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .base_file import (LOG_PROB_RANGE, _check_logits, _expf, _F, _top_and_lse, compress_log_probs,
                        decode_base_row, row_width)

def _mean_err(s: float, s2: float, n: int):
    """llama-perplexity's mean and standard error of the mean (0 for <= 10 values)."""
    if n < 1:
        return 0.0, 0.0
    f = s / n
    var = s2 / n - f * f
    return f, (math.sqrt(var / (n - 1)) if var > 0 and n > 10 else 0.0)


def _percentile(sorted_values: np.ndarray, fraction: float) -> float:
    """Linear interpolation between sorted values, in float32 as llama-perplexity does it."""
    fr = _F(fraction)
    if fr <= 0:
        return float(sorted_values[0])
    if fr >= 1:
        return float(sorted_values[-1])
    n = len(sorted_values)
    p = _F(fr * _F(n - 1))
    ip = int(p)
    p = _F(p - _F(ip))
    a, b = sorted_values[ip], sorted_values[min(ip + 1, n - 1)]
    return float(_F(_F(_F(1) - p) * a) + _F(p * b))


def _median(sorted_values: np.ndarray) -> float:
    n = len(sorted_values)
    if n % 2:
        return float(sorted_values[n // 2])
    return float(_F(0.5) * _F(sorted_values[n // 2] + sorted_values[n // 2 - 1]))


KLD_PERCENTILES = (0.999, 0.99, 0.95, 0.90, 0.10, 0.05, 0.01, 0.001)
DP_PERCENTILES = (0.999, 0.99, 0.95, 0.90, 0.75, 0.25, 0.10, 0.05, 0.01, 0.001)


@dataclass
class KLDStats:
    """llama-perplexity's KL-divergence statistics; probabilities as fractions (not %)."""
    n: int
    ppl: float
    ppl_err: float
    ppl_base: float
    ppl_base_err: float
    ln_ppl_cor: float  # correlation of the per-token log-likelihoods of the two runs
    ln_ppl_ratio: float  # mean ln(PPL(Q) / PPL(base))
    ln_ppl_ratio_err: float
    ppl_ratio: float
    ppl_ratio_err: float
    ppl_diff: float
    ppl_diff_err: float
    kld: float
    kld_err: float
    kld_max: float
    kld_median: float
    kld_min: float
    kld_percentiles: dict = field(default_factory=dict)  # fraction -> value
    dp_mean: float = 0.0
    dp_mean_err: float = 0.0
    dp_max: float = 0.0
    dp_median: float = 0.0
    dp_min: float = 0.0
    dp_percentiles: dict = field(default_factory=dict)
    dp_rms: float = 0.0
    dp_rms_err: float = 0.0
    same_top: float = 0.0
    same_top_err: float = 0.0

    def format(self) -> str:
        """The text llama-perplexity prints after a --kl-divergence run."""
        pct = lambda f: f"{100 * f:4.1f}%"  # noqa: E731
        lines = [
            "====== Perplexity statistics ======",
            f"Mean PPL(Q)                   : {self.ppl:10.6f} ± {self.ppl_err:10.6f}",
            f"Mean PPL(base)                : {self.ppl_base:10.6f} ± {self.ppl_base_err:10.6f}",
            f"Cor(ln(PPL(Q)), ln(PPL(base))): {100 * self.ln_ppl_cor:6.2f}%",
            f"Mean ln(PPL(Q)/PPL(base))     : {self.ln_ppl_ratio:10.6f} ± {self.ln_ppl_ratio_err:10.6f}",
            f"Mean PPL(Q)/PPL(base)         : {self.ppl_ratio:10.6f} ± {self.ppl_ratio_err:10.6f}",
            f"Mean PPL(Q)-PPL(base)         : {self.ppl_diff:10.6f} ± {self.ppl_diff_err:10.6f}",
            "",
            "====== KL divergence statistics ======",
            f"Mean    KLD: {self.kld:10.6f} ± {self.kld_err:10.6f}",
            f"Maximum KLD: {self.kld_max:10.6f}",
        ]
        for f in KLD_PERCENTILES[:4]:
            lines.append(f"{pct(f):<7s} KLD: {self.kld_percentiles[f]:10.6f}")
        lines.append(f"Median  KLD: {self.kld_median:10.6f}")
        for f in KLD_PERCENTILES[4:]:
            lines.append(f"{pct(f):<7s} KLD: {self.kld_percentiles[f]:10.6f}")
        lines += [f"Minimum KLD: {self.kld_min:10.6f}", "", "====== Token probability statistics ======",
                  f"Mean    Δp: {100 * self.dp_mean:6.3f} ± {100 * self.dp_mean_err:5.3f} %",
                  f"Maximum Δp: {100 * self.dp_max:6.3f}%"]
        for f in DP_PERCENTILES[:5]:
            lines.append(f"{pct(f):<7s} Δp: {100 * self.dp_percentiles[f]:6.3f}%")
        lines.append(f"Median  Δp: {100 * self.dp_median:6.3f}%")
        for f in DP_PERCENTILES[5:]:
            lines.append(f"{pct(f):<7s} Δp: {100 * self.dp_percentiles[f]:6.3f}%")
        lines += [f"Minimum Δp: {100 * self.dp_min:6.3f}%",
                  f"RMS Δp    : {100 * self.dp_rms:6.3f} ± {100 * self.dp_rms_err:5.3f} %",
                  f"Same top p: {100 * self.same_top:6.3f} ± {100 * self.same_top_err:5.3f} %"]
        return "\n".join(lines)

    def summary(self) -> str:
        return (f"mean KLD {self.kld:.6f} ± {self.kld_err:.6f}, 99 % KLD {self.kld_percentiles[0.99]:.6f}, "
                f"same top {100 * self.same_top:.3f} ± {100 * self.same_top_err:.3f} %, "
                f"RMS Δp {100 * self.dp_rms:.3f} %, PPL ratio {self.ppl_ratio:.6f} ± {self.ppl_ratio_err:.6f} "
                f"({self.n} tokens)")


class KLDAccumulator:
    """Per-token values of a run scored against a base, then KLDStats over all of them.

    add() takes the candidate's logits (T, vocab) and the tokens they predict, with the base as
    stored rows (`base_codes`, llama-perplexity's statistics) or as logits (`base_logits`, exact:
    identical logits give KLD 0)."""

    def __init__(self, n_vocab: int):
        self.n_vocab = n_vocab
        self._parts = []  # (kld float64, Δp float32, nll float32, nll_base float32, same-top bool)
        self._scratch = np.empty(n_vocab, _F)
        self._base = np.empty(n_vocab, _F)
        self._base_scratch = np.empty(n_vocab, _F)

    @property
    def count(self) -> int:
        return sum(len(p[0]) for p in self._parts)

    def add(self, logits, targets, base_codes=None, base_logits=None) -> None:
        x = _check_logits(logits, "logits")
        T, V = x.shape
        if V != self.n_vocab:
            raise ValueError(f"logits have {V} columns, the base has a vocabulary of {self.n_vocab}")
        if (base_codes is None) == (base_logits is None):
            raise ValueError("give the base either as stored rows (base_codes) or as logits (base_logits)")
        tgt = np.asarray(targets, np.int64).reshape(-1)
        if len(tgt) != T:
            raise ValueError(f"{T} rows of logits but {len(tgt)} target tokens")
        if T and (tgt.min() < 0 or tgt.max() >= V):
            raise ValueError(f"target token id out of range 0..{V - 1}")
        if base_codes is not None:
            base_codes = np.asarray(base_codes)
            if base_codes.dtype != np.uint16 or base_codes.shape != (T, row_width(V)):
                raise ValueError(f"base rows: expected uint16 {(T, row_width(V))}, got {base_codes.dtype} "
                                 f"{base_codes.shape}")
        else:
            base_logits = _check_logits(base_logits, "base_logits")
            if base_logits.shape != x.shape:
                raise ValueError(f"base logits {base_logits.shape} and logits {x.shape} differ in shape")
        kld = np.empty(T)
        dp, nll, nll_base = np.empty(T, _F), np.empty(T, _F), np.empty(T, _F)
        same = np.empty(T, bool)
        s, lb = self._scratch, self._base
        for i, row in enumerate(x):
            mx, imax, lse = _top_and_lse(row, s)
            t = tgt[i]
            nll[i] = _F(_F(mx + lse) - row[t])
            top = _F(mx + lse)  # log p = logit - top
            if base_codes is not None:
                decode_base_row(base_codes[i], V, lb)
                keep = lb > -LOG_PROB_RANGE
                lbk = lb[keep]
                # sum over kept tokens of p_base * (log p_base - log p), in llama-perplexity's order
                term = np.subtract(lbk, row[keep])
                term += top
            else:
                bmx, _, blse = _top_and_lse(base_logits[i], self._base_scratch)
                np.subtract(base_logits[i], _F(bmx + blse), out=lb)
                lbk = lb
                np.subtract(row, top, out=s)  # log p, computed as for the base: equal logits, equal values
                term = np.subtract(lbk, s)
            term *= _expf(lbk)
            kld[i] = term.sum(dtype=np.float64)
            nll_base[i] = -lb[t]
            same[i] = imax == int(lb.argmax())
            dp[i] = _F(_expf(-nll[i]) - _expf(-nll_base[i]))
        self._parts.append((kld, dp, nll, nll_base, same))

    def _values(self):
        return [np.concatenate([p[k] for p in self._parts]) for k in range(5)]

    def stats(self) -> KLDStats:
        kld, dp, nll, nll_b, same = self._values()
        n = len(kld)
        if n < 2:
            raise ValueError(f"KL-divergence statistics need at least 2 scored tokens, got {n}")
        f64 = np.float64
        # squares and cross products of float32 values are float32 products, as in llama-perplexity
        ln_q = _mean_err(nll.sum(dtype=f64), (nll * nll).sum(dtype=f64), n)
        ln_b = _mean_err(nll_b.sum(dtype=f64), (nll_b * nll_b).sum(dtype=f64), n)
        cov = 0.0 if n < 10 else ((nll * nll_b).sum(dtype=f64) / n - (nll.sum(dtype=f64) / n) *
                                   (nll_b.sum(dtype=f64) / n)) / (n - 1)
        ppl, ppl_b = math.exp(ln_q[0]), math.exp(ln_b[0])
        ppl_err, ppl_b_err = ppl * ln_q[1], ppl_b * ln_b[1]
        denom = ln_q[1] * ln_b[1]
        cor = cov / denom if denom else (1.0 if np.array_equal(nll, nll_b) else float("nan"))
        ratio = ln_q[0] - ln_b[0]
        ratio_err = math.sqrt(max(ln_q[1] ** 2 + ln_b[1] ** 2 - 2 * cov, 0.0))
        diff_err = math.sqrt(max(ppl_err ** 2 + ppl_b_err ** 2 - 2 * ppl * ppl_b * cov, 0.0))
        k_mean = _mean_err(kld.sum(), (kld * kld).sum(), n)
        dp2 = (dp * dp).astype(f64)  # float32 square, then float64 like llama-perplexity's p_diff2
        dp_mean = _mean_err(dp.sum(dtype=f64), dp2.sum(), n)
        mse = _mean_err(dp2.sum(), (dp2 * dp2).sum(), n)
        rms = math.sqrt(mse[0])
        top = float(same.sum()) / n
        ks, ds = np.sort(kld.astype(_F)), np.sort(dp)
        return KLDStats(
            n=n, ppl=ppl, ppl_err=ppl_err, ppl_base=ppl_b, ppl_base_err=ppl_b_err, ln_ppl_cor=cor,
            ln_ppl_ratio=ratio, ln_ppl_ratio_err=ratio_err, ppl_ratio=math.exp(ratio),
            ppl_ratio_err=math.exp(ratio) * ratio_err, ppl_diff=ppl - ppl_b, ppl_diff_err=diff_err,
            kld=k_mean[0], kld_err=k_mean[1], kld_max=float(ks[-1]), kld_median=_median(ks),
            kld_min=float(ks[0]), kld_percentiles={f: _percentile(ks, f) for f in KLD_PERCENTILES},
            dp_mean=dp_mean[0], dp_mean_err=dp_mean[1], dp_max=float(ds[-1]), dp_median=_median(ds),
            dp_min=float(ds[0]), dp_percentiles={f: _percentile(ds, f) for f in DP_PERCENTILES},
            dp_rms=rms, dp_rms_err=(0.5 / rms * mse[1] if rms else 0.0),
            same_top=top, same_top_err=math.sqrt(top * (1 - top) / (n - 1)))

    def running(self) -> str:
        """One progress line: the running PPL, ln ratio, mean KLD, RMS Δp and same-top rate."""
        kld, dp, nll, nll_b, same = self._values()
        n = len(kld)
        return (f"PPL {math.exp(nll.mean(dtype=np.float64)):9.4f}  ln(PPL(Q)/PPL(base)) "
                f"{nll.mean(dtype=np.float64) - nll_b.mean(dtype=np.float64):10.5f}  KLD {kld.mean():10.5f}  "
                f"Δp RMS {100 * math.sqrt(float(np.mean((dp * dp).astype(np.float64)))):6.3f} %  "
                f"same top {100 * same.sum() / n:6.3f} %")


def side_by_side(columns: dict) -> str:
    """The main statistics of several runs (name -> KLDStats) against one base, one column each."""
    rows = [
        ("Mean KLD", lambda s: f"{s.kld:.6f} ± {s.kld_err:.6f}"),
        ("Median KLD", lambda s: f"{s.kld_median:.6f}"),
        ("90 % KLD", lambda s: f"{s.kld_percentiles[0.90]:.6f}"),
        ("95 % KLD", lambda s: f"{s.kld_percentiles[0.95]:.6f}"),
        ("99 % KLD", lambda s: f"{s.kld_percentiles[0.99]:.6f}"),
        ("99.9 % KLD", lambda s: f"{s.kld_percentiles[0.999]:.6f}"),
        ("Maximum KLD", lambda s: f"{s.kld_max:.6f}"),
        ("Same top p", lambda s: f"{100 * s.same_top:.3f} ± {100 * s.same_top_err:.3f} %"),
        ("RMS Δp", lambda s: f"{100 * s.dp_rms:.3f} ± {100 * s.dp_rms_err:.3f} %"),
        ("99 % Δp", lambda s: f"{100 * s.dp_percentiles[0.99]:.3f} %"),
        ("1 % Δp", lambda s: f"{100 * s.dp_percentiles[0.01]:.3f} %"),
        ("Mean ln(PPL(Q)/PPL(base))", lambda s: f"{s.ln_ppl_ratio:.6f} ± {s.ln_ppl_ratio_err:.6f}"),
        ("Mean PPL(Q)/PPL(base)", lambda s: f"{s.ppl_ratio:.6f} ± {s.ppl_ratio_err:.6f}"),
        ("Cor(ln PPL(Q), ln PPL(base))", lambda s: f"{100 * s.ln_ppl_cor:.2f} %"),
        ("PPL(Q)", lambda s: f"{s.ppl:.4f} ± {s.ppl_err:.4f}"),
        ("PPL(base)", lambda s: f"{s.ppl_base:.4f} ± {s.ppl_base_err:.4f}"),
        ("scored tokens", lambda s: str(s.n)),
    ]
    names = list(columns)
    table = [[""] + names] + [[label] + [fmt(columns[n]) for n in names] for label, fmt in rows]
    widths = [max(len(r[c]) for r in table) for c in range(len(table[0]))]
    return "\n".join("  ".join(cell.ljust(w) if c == 0 else cell.rjust(w) for c, (cell, w) in
                                enumerate(zip(r, widths))).rstrip() for r in table)


def kl_divergence_of_logits(base_logits, logits, targets, compress: bool = False) -> KLDStats:
    """Statistics of `logits` (T, vocab) against `base_logits` (T, vocab), row i predicting
    targets[i].  compress=True scores against the base as llama-perplexity would store it."""
    base = _check_logits(base_logits, "base_logits")
    acc = KLDAccumulator(base.shape[1])
    if compress:
        acc.add(logits, targets, base_codes=compress_log_probs(base))
    else:
        acc.add(logits, targets, base_logits=base)
    return acc.stats()
