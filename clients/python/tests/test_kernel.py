"""`tunehub.kernel.build` on a Kernel made by hand in the Query API's contract (a matmul with a
packed weight, as the server describes one), compiled with the real C compiler and compared
with numpy. The end-to-end test (test_end_to_end.py) builds the server's own kernels."""

import pickle

import numpy as np
import pytest

from tunehub import KernelBuildError, kernel, pb

M, K, N = 5, 7, 3
SYM = "test_matmul_5x7x3"

# B is read transposed (N x K) and zero-padded to 4 columns, as a pack function would lay it
# out; the kernel counts pointers that are not 64-byte aligned, so a test can see the copies.
SOURCE = f"""
#include <stdint.h>
static int threads = 2;
int misaligned = 0;
void {SYM}_set_num_threads(int n) {{ threads = n > 0 ? n : 1; }}
int {SYM}_threads(void) {{ return threads; }}
static void check(const void* p) {{ if ((uintptr_t)p % 64) misaligned++; }}
void {SYM}_pack_B(const float* restrict src, float* restrict dst) {{
  for (int j = 0; j < {N}; ++j)
    for (int k = 0; k < 8; ++k)
      dst[j * 8 + k] = k < {K} ? src[k * {N} + j] : 0.0f;
}}
void {SYM}(const float* restrict A, const float* restrict Bp, float* restrict C) {{
  check(A); check(Bp); check(C);
  for (int i = 0; i < {M}; ++i)
    for (int j = 0; j < {N}; ++j) {{
      float s = 0.0f;
      for (int k = 0; k < {K}; ++k) s += A[i * {K} + k] * Bp[j * 8 + k];
      C[i * {N} + j] = s;
    }}
}}
"""


def arg(name, role, shape, pack=""):
    strides = [int(np.prod(shape[d + 1 :])) for d in range(len(shape))]
    return pb.KernelArg(
        name=name,
        role=role,
        dtype="float32",
        shape=shape,
        strides=strides,
        alignment=64,
        pack_function=pack,
        packed_elements=N * 8 if pack else 0,
        layout="packed" if pack else "row-major",
    )


def hand_kernel(**over):
    k = pb.Kernel(
        symbol=SYM,
        source=SOURCE,
        args=[
            arg("A", "input", [M, K]),
            arg("B", "weight", [K, N], pack=f"{SYM}_pack_B"),
            arg("C", "output", [M, N]),
        ],
        cflags=["-O2", "-std=c11", "-Wall", "-Werror"],
        ldflags=["-lm"],
        compiler="cc",
        threads=2,
        set_num_threads=f"{SYM}_set_num_threads",
    )
    for f, v in over.items():
        setattr(k, f, v)
    return k


@pytest.fixture(scope="module")
def built():
    return kernel.build(hand_kernel())


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((M, K), dtype=np.float32),
        rng.standard_normal((K, N), dtype=np.float32),
    )


def misaligned(built):
    import ctypes

    return ctypes.c_int.in_dll(built.library, "misaligned").value


def test_matches_numpy_and_returns_an_aligned_output(built):
    a, b = inputs()
    c = built(a, b)
    assert c.shape == (M, N) and c.dtype == np.float32
    assert c.ctypes.data % 64 == 0
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_misaligned_and_strided_arrays_are_copied_to_aligned_buffers(built):
    a, b = inputs(1)
    # A float32 array one element into an aligned buffer: 4 bytes past a 64-byte boundary.
    base = kernel.aligned_empty((M * K + 1,), 64)
    a_off = base[1:].reshape(M, K)
    a_off[...] = a
    assert a_off.ctypes.data % 64 != 0
    # Not C-contiguous: the transpose of a (N, K) array.
    b_t = np.ascontiguousarray(b.T).T
    assert not b_t.flags.c_contiguous
    out_base = kernel.aligned_empty((M * N + 1,), 64)
    out = out_base[1:].reshape(M, N)
    before = misaligned(built)
    c = built(a_off, b_t, out=out)
    assert c is out
    assert misaligned(built) == before, "the kernel saw a misaligned pointer"
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)


def test_a_weight_packed_once_is_reused(built):
    a, b = inputs(2)
    packed = built.pack("B", b)
    assert packed.data.shape == (N * 8,)
    np.testing.assert_array_equal(packed.data.reshape(N, 8)[:, :K], b.T)
    np.testing.assert_allclose(built(a, packed), a @ b, rtol=1e-5, atol=1e-5)
    # A plain array is packed on every call: a changed weight gives the new answer.
    b[0, 0] += 1.0
    np.testing.assert_allclose(built(a, b), a @ b, rtol=1e-5, atol=1e-5)


def test_shapes_dtypes_and_arity_are_checked(built):
    a, b = inputs()
    with pytest.raises(TypeError, match="float32"):
        built(a.astype(np.float64), b)
    with pytest.raises(ValueError, match=r"shape \(7, 5\)"):
        built(a.T.copy(), b)
    with pytest.raises(TypeError, match="takes 2 arrays"):
        built(a)
    with pytest.raises(TypeError, match="numpy array"):
        built(a.tolist(), b)
    with pytest.raises(ValueError, match="read-only"):
        ro = np.empty((M, N), np.float32)
        ro.flags.writeable = False
        built(a, b, out=ro)
    with pytest.raises(ValueError, match="no packed weight 'A'"):
        built.pack("A", a)


def test_set_num_threads_reaches_the_kernel(built):
    import ctypes

    get = built.library[f"{SYM}_threads"]
    get.restype = ctypes.c_int
    assert built.threads == 2
    built.set_num_threads(3)
    assert get() == 3
    with pytest.raises(ValueError):
        built.set_num_threads(0)


def test_a_kernel_without_a_thread_setter_says_so():
    k = kernel.build(hand_kernel(set_num_threads=""))
    with pytest.raises(RuntimeError, match="cannot be set"):
        k.set_num_threads(2)


def test_compiler_errors_carry_the_command_and_output():
    with pytest.raises(KernelBuildError) as e:
        kernel.build(hand_kernel(source=SOURCE + "\nthis is not C;\n"))
    assert "-fPIC" in e.value.command and "-shared" in e.value.command
    assert "error" in e.value.output


def test_an_empty_kernel_is_refused():
    with pytest.raises(ValueError, match="omit_kernel"):
        kernel.build(pb.Kernel())


def test_messages_pickle_under_the_package_module():
    k = hand_kernel()
    assert pickle.loads(pickle.dumps(k)) == k
