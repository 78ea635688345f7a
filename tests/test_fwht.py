"""Walsh-Hadamard transform: dense-matrix equality, involution, fused signs / blocks / quantization,
every ISA variant bit-exact against scalar, and clear errors on bad input."""
import numpy as np
import pytest
import scipy.linalg

import pylowbit as lb
from pylowbit import _fwht, _lowbit

VARIANTS = lb.isa_supported()

# Hadamard matrices of order 12, 20, 28 from N. J. A. Sloane's library (the ones MLX uses), written
# out here independently of the C tables so a typo there cannot hide.
H12 = """+-++++++++++ --+-+-+-+-+- +++-++----++ +---+--+-++- +++++-++---- +-+---+--+-+ ++--+++-++--
+--++---+--+ ++----+++-++ +--+-++---+- ++++----+++- +-+--+-++---"""
H20 = """+----+----++--++-++- -+----+---+++---+-++ --+----+---+++-+-+-+ ---+----+---+++++-+-
----+----++--++-++-+ -+++++-----+--+++--+ +-+++-+---+-+--+++-- ++-++--+---+-+--+++-
+++-+---+---+-+--+++ ++++-----++--+-+--++ --++-+-++-+-----++++ ---++-+-++-+---+-+++
+---++-+-+--+--++-++ ++---++-+----+-+++-+ -++---++-+----+++++- -+--+--++-+----+----
+-+-----++-+----+--- -+-+-+---+--+----+-- --+-+++------+----+- +--+--++------+----+"""
H28 = """+------++----++-+--+-+--++-- -+-----+++-----+-+--+-+--++- --+-----+++---+-+-+----+--++
---+-----+++---+-+-+-+--+--+ ----+-----+++---+-+-+++--+-- -----+-----++++--+-+--++--+-
------++----++-+--+-+--++--+ --++++-+-------++--+++-+--+- ---++++-+-----+-++--+-+-+--+
+---+++--+----++-++--+-+-+-- ++---++---+----++-++--+-+-+- +++---+----+----++-++--+-+-+
++++--------+-+--++-++--+-+- -++++--------+++--++--+--+-+ -+-++-++--++--+--------++++-
+-+-++--+--++--+--------++++ -+-+-++--+--++--+----+---+++ +-+-+-++--+--+---+---++---++
++-+-+-++--+------+--+++---+ -++-+-+-++--+------+-++++--- +-++-+---++--+------+-++++--
-++--++-+-++-+++----++------ +-++--++-+-++-+++-----+----- ++-++---+-+-++-+++-----+----
-++-++-+-+-+-+--+++-----+--- --++-++++-+-+----+++-----+-- +--++-+-++-+-+----+++-----+-
++--++-+-++-+-+----++------+"""
HM = {m: np.array([[1 if c == "+" else -1 for c in row] for row in txt.split()], dtype=np.float64)
      for m, txt in ((12, H12), (20, H20), (28, H28))}

MAX_DENSE = 1 << 14
POW2_SIZES = [1 << k for k in range(1, 15)]
M_SIZES = [m << k for m in (12, 20, 28) for k in range(0, 12) if (m << k) <= MAX_DENSE]



def sylvester_rows(n, r0, r1):
    """Rows r0..r1 of the Sylvester matrix, H[r][c] = (-1)^popcount(r & c), as float64."""
    r = np.arange(r0, r1, dtype=np.uint64)[:, None]
    c = np.arange(n, dtype=np.uint64)[None, :]
    return 1.0 - 2.0 * (np.bitwise_count(r & c) & 1)


def dense_transform(x, n):
    """x (rows, n) times the dense normalized Hadamard matrix of size n, in float64, chunked."""
    x64 = x.astype(np.float64)
    if n & (n - 1) == 0:
        if n <= 4096:
            return x64 @ scipy.linalg.hadamard(n).T / np.sqrt(n)
        out = np.empty_like(x64)
        for r0 in range(0, n, 1024):
            out[:, r0:r0 + 1024] = x64 @ sylvester_rows(n, r0, r0 + 1024).T
        return out / np.sqrt(n)
    m = next(m for m in (12, 20, 28) if n % m == 0 and (n // m) & (n // m - 1) == 0)
    H = np.kron(HM[m], scipy.linalg.hadamard(n // m))  # element a * 2^k + b <-> (a, b)
    return x64 @ H.T / np.sqrt(n)


def bits(a):
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


# ---- the matrices ----------------------------------------------------------------------------

@pytest.mark.parametrize("m", [12, 20, 28])
def test_order_m_matrices_are_hadamard(m):
    H = HM[m]
    np.testing.assert_array_equal(H @ H.T, m * np.eye(m))
    # H_12 is symmetric (an involution once normalized); H_20 and H_28 are not (inverse = transpose)
    assert np.array_equal(H, H.T) == (m == 12)


def test_sylvester_rows_match_scipy():
    np.testing.assert_array_equal(sylvester_rows(4096, 0, 4096), scipy.linalg.hadamard(4096))


# ---- equality with the dense matrix (default variant) -----------------------------------------

@pytest.mark.parametrize("n", POW2_SIZES + M_SIZES)
def test_matches_dense_hadamard_float32(n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((3, n)).astype(np.float32)
    y = lb.fwht(x)
    ref = dense_transform(x, n)
    rel = np.linalg.norm(y - ref) / np.linalg.norm(ref)
    assert rel <= 1e-5, (n, rel)
    assert y.dtype == np.float32 and y.shape == x.shape


@pytest.mark.parametrize("n", [2, 8, 64, 1024, 12, 40, 224, 28 * 64])
def test_matches_dense_hadamard_float64(n):
    x = np.random.default_rng(n).standard_normal((2, n))
    np.testing.assert_allclose(lb.fwht(x), dense_transform(x, n), rtol=1e-12, atol=1e-12)


def test_unnormalized():
    x = np.random.default_rng(1).standard_normal(256).astype(np.float32)
    y = lb.fwht(x, normalize=False)
    np.testing.assert_allclose(y, scipy.linalg.hadamard(256) @ x.astype(np.float64), rtol=1e-5,
                               atol=1e-4)


@pytest.mark.parametrize("n", [2, 4, 1024, 1 << 16, 1 << 20, 12, 12 * 256])
def test_involution(n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    np.testing.assert_allclose(lb.fwht(lb.fwht(x)), x, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", [20, 20 * 64, 28, 28 * 128])
def test_orthogonal_non_symmetric_sizes(n):
    """m = 20, 28: the normalized transform is orthogonal (norm kept, inverse = transpose)."""
    x = np.random.default_rng(n).standard_normal((2, n))
    y = lb.fwht(x)
    np.testing.assert_allclose(np.linalg.norm(y, axis=1), np.linalg.norm(x, axis=1), rtol=1e-12)
    m = 20 if n % 20 == 0 else 28
    Ht = np.kron(HM[m].T, scipy.linalg.hadamard(n // m)) / np.sqrt(n)
    np.testing.assert_allclose(y @ Ht.T, x, atol=1e-10)


def test_large_sizes_against_numpy_fwht():
    """2^20 and 2^21 (beyond the dense range) against a float64 reshape-based transform."""
    for n in (1 << 20, 1 << 21):
        x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        ref = x.astype(np.float64)
        h = 1
        while h < n:
            v = ref.reshape(-1, 2, h)
            ref = np.stack([v[:, 0] + v[:, 1], v[:, 0] - v[:, 1]], axis=1).reshape(-1)
            h *= 2
        ref /= np.sqrt(n)
        rel = np.linalg.norm(lb.fwht(x) - ref) / np.linalg.norm(ref)
        assert rel <= 1e-5


# ---- blocks, signs, order, out, threads -------------------------------------------------------

@pytest.mark.parametrize("block", [2, 16, 128, 1024, 12, 96, 20, 28 * 4])
def test_block_is_per_slice_transform(block):
    rng = np.random.default_rng(block)
    n = block * 6
    x = rng.standard_normal((2, n)).astype(np.float32)
    y = lb.fwht(x, block=block)
    for b in range(6):
        sl = slice(b * block, (b + 1) * block)
        np.testing.assert_array_equal(y[:, sl], lb.fwht(np.ascontiguousarray(x[:, sl])))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_signs_and_inverse_order(dtype):
    rng = np.random.default_rng(7)
    n, block = 3 * 1024, 1024
    x = rng.standard_normal((4, n)).astype(dtype)
    s = rng.choice([-1.0, 1.0], n).astype(dtype)
    y = lb.fwht(x, block=block, signs=s)  # H(s * x)
    np.testing.assert_array_equal(y, lb.fwht(x * s, block=block))
    z = lb.fwht(y, block=block, signs=s, order="rotate-then-signs")  # s * H(y) = x
    np.testing.assert_allclose(z, x, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(z, lb.fwht(y, block=block) * s)


def test_signs_accept_lists_and_other_dtypes():
    x = np.ones(4, np.float32)
    np.testing.assert_array_equal(lb.fwht(x, signs=[1, -1, 1, -1]),
                                  lb.fwht(x, signs=np.array([1, -1, 1, -1], np.int8)))


def test_out_and_in_place():
    x = np.random.default_rng(3).standard_normal((5, 64)).astype(np.float32)
    y = lb.fwht(x)
    x0 = x.copy()
    o = np.empty_like(x)
    assert lb.fwht(x, out=o) is o
    np.testing.assert_array_equal(o, y)
    np.testing.assert_array_equal(x, x0)  # untouched when out is another array
    assert lb.fwht(x, out=x) is x
    np.testing.assert_array_equal(x, y)


def test_non_contiguous_input_and_nd():
    rng = np.random.default_rng(4)
    big = rng.standard_normal((4, 3, 256)).astype(np.float32)
    x = big[:, :, ::2]  # strided view, shape (4, 3, 128)
    np.testing.assert_array_equal(lb.fwht(x), lb.fwht(np.ascontiguousarray(x)))
    assert lb.fwht(x).shape == (4, 3, 128)


def test_threads_do_not_change_bits():
    x = np.random.default_rng(5).standard_normal((512, 1024)).astype(np.float32)
    np.testing.assert_array_equal(bits(lb.fwht(x, threads=1)), bits(lb.fwht(x, threads=2)))


def test_empty_batch():
    assert lb.fwht(np.zeros((0, 8), np.float32)).shape == (0, 8)


# ---- every variant against scalar -------------------------------------------------------------

def variant_cases():
    rng = np.random.default_rng(11)
    for n in [1 << k for k in range(1, 21)] + [m << k for m in (12, 20, 28) for k in (0, 1, 3, 5, 8)]:
        rows = 3 if n <= 4096 else 1
        yield n, None, rng.standard_normal((rows, n)).astype(np.float32)
    for block, n in [(2, 64), (8, 40), (64, 640), (1024, 3072), (96, 96 * 5), (28 * 32, 28 * 64)]:
        yield n, block, rng.standard_normal((7, n)).astype(np.float32)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_variant_bit_exact_vs_scalar(variant, dtype, isa):
    rng = np.random.default_rng(12)
    for n, block, x in variant_cases():
        x = x.astype(dtype)
        s = rng.choice([-1.0, 1.0], n).astype(dtype)
        for kw in ({}, {"signs": s}, {"signs": s, "order": "rotate-then-signs"},
                   {"normalize": False}):
            isa("scalar")
            ref = lb.fwht(x, block=block, **kw)
            isa(variant)
            got = lb.fwht(x, block=block, **kw)
            assert np.array_equal(bits(got), bits(ref)), (variant, n, block, kw)


@pytest.mark.parametrize("variant", VARIANTS)
def test_fused_quantize_equals_unfused(variant, isa):
    """fwht_quantize_act == quantize_act(fwht(...)) exactly, in every variant, and the scalar
    transform feeds the same codes (the SIMD transforms are bit-exact)."""
    isa(variant)
    rng = np.random.default_rng(13)
    for n, block, group in [(1024, 1024, 128), (2048, 1024, 64), (3 * 1024, 1024, 32),
                            (256, 128, 256), (96 * 4, 96, 32), (64, 64, 16), (4096, 4096, 128),
                            (1 << 14, 1 << 14, 128)]:
        x = (rng.standard_normal((2, n)) * rng.choice([1e-3, 1.0, 50.0], n)).astype(np.float32)
        x[0, :block] = 0  # an all-zero block: scale 0, codes 0
        s = rng.choice([-1.0, 1.0], n).astype(np.float32)
        for signs in (None, s):
            q, d, sm = lb.fwht_quantize_act(x, block, signs, group)
            isa("scalar")
            y = lb.fwht(x, block=block, signs=signs)
            isa(variant)
            for r in range(2):
                q_ref, d_ref, s_ref = _lowbit.quantize_act(np.ascontiguousarray(y[r]), group)
                np.testing.assert_array_equal(q[r], q_ref)
                np.testing.assert_array_equal(bits(d[r]), bits(d_ref))
                np.testing.assert_array_equal(sm[r], s_ref)
            assert q.dtype == np.int8 and d.dtype == np.float32 and sm.dtype == np.int32


def test_fused_quantize_matches_a8_model():
    # group 64: A8 (128 is I2_S's one-scale-per-row P2 rule, modelled in test_kernels.emulate_a8)
    rng = np.random.default_rng(14)
    x = rng.standard_normal(2048).astype(np.float32)
    q, d, s = lb.fwht_quantize_act(x, 1024, None, 64)
    y = lb.fwht(x, block=1024).reshape(-1, 64)
    amax = np.abs(y).max(axis=1)
    np.testing.assert_array_equal(d, amax / np.float32(127))
    inv = (np.float32(127) / amax).astype(np.float32)
    prod = (y * inv[:, None]).astype(np.float32)
    np.testing.assert_array_equal(q.reshape(-1, 64),
                                  np.clip(np.sign(prod) * np.floor(np.abs(prod) + 0.5), -127, 127))
    np.testing.assert_array_equal(s, q.reshape(-1, 64).sum(axis=1))



def test_fused_quantize_into_preallocated_outputs():
    """out=(q, d, s) is filled in place and returned as given, with the allocating call's values
    (stale contents are overwritten, nothing past the arrays is touched)."""
    rng = np.random.default_rng(15)
    x = rng.standard_normal((3, 2048)).astype(np.float32)
    s = rng.choice([-1.0, 1.0], 2048).astype(np.float32)
    want = lb.fwht_quantize_act(x, 1024, s, 128)
    q = np.full((3, 2048), 99, np.int8)
    d = np.full((3, 16), np.nan, np.float32)
    sm = np.full((3, 16), -7, np.int32)
    out = (q, d, sm)
    got = lb.fwht_quantize_act(x, 1024, s, 128, out=out)
    assert got is out
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    big = np.full(3 * 2048 + 64, 5, np.int8)  # a view: the tail past it must stay untouched
    lb.fwht_quantize_act(x, 1024, s, 128, out=(big[:3 * 2048].reshape(3, 2048), d, sm))
    np.testing.assert_array_equal(big[:3 * 2048].reshape(3, 2048), want[0])
    assert (big[3 * 2048:] == 5).all()


def test_fused_quantize_bad_outputs():
    x = np.zeros(256, np.float32)
    q, d, s = np.empty(256, np.int8), np.empty(2, np.float32), np.empty(2, np.int32)
    with pytest.raises(TypeError, match="tuple"):
        lb.fwht_quantize_act(x, 256, None, 128, out=[q, d, s])
    with pytest.raises(TypeError, match="tuple"):
        lb.fwht_quantize_act(x, 256, None, 128, out=(q, d))
    with pytest.raises(TypeError, match="out q has dtype int16"):
        lb.fwht_quantize_act(x, 256, None, 128, out=(q.astype(np.int16), d, s))
    with pytest.raises(TypeError, match="out s has dtype float32"):
        lb.fwht_quantize_act(x, 256, None, 128, out=(q, d, d))
    with pytest.raises(TypeError, match="out d must be a numpy array"):
        lb.fwht_quantize_act(x, 256, None, 128, out=(q, [0.0, 0.0], s))
    with pytest.raises(ValueError, match=r"out d has shape \(4,\), expected \(2,\)"):
        lb.fwht_quantize_act(x, 256, None, 128, out=(q, np.empty(4, np.float32), s))
    with pytest.raises(ValueError, match="out q has shape"):
        lb.fwht_quantize_act(x, 256, None, 128, out=(q.reshape(2, 128), d, s))
    with pytest.raises(ValueError, match="out q must be a writeable C-contiguous"):
        lb.fwht_quantize_act(x, 256, None, 128, out=(np.empty(512, np.int8)[::2], d, s))
    ro = np.empty(2, np.int32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="out s must be a writeable"):
        lb.fwht_quantize_act(x, 256, None, 128, out=(q, d, ro))

# ---- bad input --------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 3, 6, 36, 1000, 44, 9 * 1024])
def test_unsupported_size(n):
    with pytest.raises(ValueError, match="not a supported Hadamard size"):
        lb.fwht(np.zeros(n, np.float32))


def test_bad_block():
    x = np.zeros((2, 1024), np.float32)
    with pytest.raises(ValueError, match="not a supported Hadamard size"):
        lb.fwht(x, block=100)
    with pytest.raises(ValueError, match="not a multiple of block"):
        lb.fwht(x, block=2048)
    with pytest.raises(ValueError, match="not a multiple of block"):
        lb.fwht(np.zeros(1000, np.float32), block=12)
    with pytest.raises(ValueError, match="not a supported Hadamard size"):
        lb.fwht(x, block=0)


def test_bad_signs_shape():
    x = np.zeros(16, np.float32)
    with pytest.raises(ValueError, match="length 16"):
        lb.fwht(x, signs=np.ones(8, np.float32))
    with pytest.raises(ValueError, match="length 16"):
        lb.fwht(x, signs=np.ones((2, 16), np.float32))


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bad_sign_values(variant, dtype, isa):
    """Every variant's sign check, with the bad value in the SIMD chains, the one-vector tail and
    the scalar tail."""
    isa(variant)
    n = 12 * 7  # 84: not a multiple of 32, so the check has a tail
    x = np.zeros(n, dtype)
    for pos in (0, 5, 31, 63, 70, 80, 83):
        for bad in (0.5, 0.0, -0.0, 2.0, -1.0000001, np.nan, np.inf):
            s = np.ones(n, dtype)
            s[pos] = bad
            with pytest.raises(ValueError, match=r"only \+1 and -1"):
                lb.fwht(x, block=12, signs=s)
            if dtype == np.float32:
                with pytest.raises(ValueError, match=r"only \+1 and -1"):
                    lb.fwht_quantize_act(x, 12, s, 12)
    s = np.where(np.arange(n) % 3, 1.0, -1.0).astype(dtype)
    lb.fwht(x, block=12, signs=s)  # all +-1: accepted


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float16, np.complex64, bool])
def test_bad_dtype(dtype):
    with pytest.raises(TypeError, match="float32 or float64"):
        lb.fwht(np.zeros(8, dtype))


def test_bad_arguments():
    x = np.zeros(8, np.float32)
    with pytest.raises(TypeError):
        lb.fwht([1.0, 2.0])
    with pytest.raises(ValueError, match="order"):
        lb.fwht(x, order="backwards")
    with pytest.raises(ValueError, match="threads"):
        lb.fwht(x, threads=0)
    with pytest.raises(ValueError, match="at least one dimension"):
        lb.fwht(np.array(1.0, np.float32))
    with pytest.raises(TypeError, match="dtype"):
        lb.fwht(x, out=np.zeros(8, np.float64))
    with pytest.raises(ValueError, match="shape"):
        lb.fwht(x, out=np.zeros(16, np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        lb.fwht(x, out=np.zeros(16, np.float32)[::2])
    with pytest.raises(TypeError, match="float32"):
        lb.fwht_quantize_act(np.zeros(64), 64, None, 32)
    with pytest.raises(ValueError, match="group"):
        lb.fwht_quantize_act(np.zeros(64, np.float32), 64, None, 48)
    with pytest.raises(ValueError, match="not a supported Hadamard size"):
        lb.fwht_quantize_act(np.zeros(72, np.float32), 36, None, 8)


def test_supported_size_helper():
    assert _fwht.is_supported_size(1 << 20) and _fwht.is_supported_size(28 * 1024)
    assert not _fwht.is_supported_size(1) and not _fwht.is_supported_size(36)
