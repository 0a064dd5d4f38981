"""`build(kernel)`: a Kernel of the Query API (`BestResponse.kernel`, `TopKResponse.kernels`,
`PackResponse.kernels`) compiled into a shared library and wrapped as a Python callable over
numpy arrays.

The library is built the way the record was measured: `kernel.compiler` (or `cc`) with
`kernel.cflags` plus `-fPIC -shared`, linked with `kernel.ldflags` (OpenMP, the vector math
library, libm), then loaded with ctypes.

Calling convention of the returned `CompiledKernel`:

* positional arguments: one numpy array per input and weight of `kernel.args`, in their order
  (outputs left out); each must have the argument's dtype (float32, or uint8, int8 and int32 for
  an integer kernel) and exactly its shape;
* outputs: allocated (64-byte aligned) and returned, one array, or a tuple when the kernel has
  several; or passed as `out=` (an array, or a sequence of arrays in order), filled in place
  and returned;
* an array that is not C-contiguous or not aligned as the argument requires
  (`KernelArg.alignment`) is copied into an aligned buffer first (for an output: computed into
  one and copied back), so any array works and aligned ones cost no copy
  (`aligned_empty` makes them);
* a weight the kernel reads packed (`KernelArg.pack_function`) is packed on every call, which
  is always correct but costs a pass over the weight; for a constant weight, pack it once with
  `CompiledKernel.pack(name, array)` and pass the returned `PackedWeight` in its place.
"""

from __future__ import annotations

import ctypes
import math
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ._proto import tunehub_pb2 as pb
from .errors import KernelBuildError

__all__ = ["build", "CompiledKernel", "PackedWeight", "aligned_empty"]

# numpy's names, as KernelArg.dtype spells them: float32, and the integer kernels' types
# (`dtype=u8i8` / `i8i8` op specs: 8-bit data and weights, int32 bias and result; with
# `out_dtype=u8` / `i8` an 8-bit result, a float32 scale per channel and an 8-bit zero point).
_DTYPES: dict[str, Any] = {
    "float32": np.float32,
    "uint8": np.uint8,
    "int8": np.int8,
    "int32": np.int32,
}
# A numpy array of any dtype (checked when called).
Array = npt.NDArray[Any]


def aligned_empty(
    shape: Sequence[int], alignment: int = 64, dtype: npt.DTypeLike = np.float32
) -> Array:
    """An uninitialised C-contiguous array whose data starts on an `alignment`-byte boundary
    (over-allocated bytes, viewed from the first aligned one)."""
    dtype = np.dtype(dtype)
    alignment = max(int(alignment), dtype.alignment)
    nbytes = math.prod(shape) * dtype.itemsize
    raw = np.empty(nbytes + alignment, dtype=np.uint8)
    offset = (-raw.ctypes.data) % alignment
    out: Array = raw[offset : offset + nbytes].view(dtype).reshape(tuple(shape))
    return out


def build(kernel: pb.Kernel, cc: str | None = None) -> CompiledKernel:
    """Compiles `kernel` (a `pb.Kernel`) and returns it as a callable (see the module's doc).

    `cc`: the compiler command to use instead of `kernel.compiler` (e.g. "clang"); either may
    carry arguments ("ccache gcc"). Raises `KernelBuildError` when the compiler fails, and
    ValueError for a Kernel this module cannot call (no symbol, a dtype other than float32,
    uint8, int8 or int32, a layout other than dense)."""
    if not kernel.symbol or not kernel.source:
        raise ValueError("the Kernel has no symbol or source (was it asked with omit_kernel?)")
    for a in kernel.args:
        _arg_dtype(a)
        if list(a.strides) and list(a.strides) != _row_major(a.shape):
            raise ValueError(
                f"argument {a.name}: strides {list(a.strides)} are not dense row-major"
            )
    compiler = shlex.split(cc or kernel.compiler or os.environ.get("CC", "cc"))
    workdir = tempfile.mkdtemp(prefix="tunehub-kernel-")
    try:
        src = os.path.join(workdir, f"{kernel.symbol}.c")
        lib = os.path.join(workdir, f"lib{kernel.symbol}.so")
        with open(src, "w", encoding="utf-8") as f:
            f.write(kernel.source)
        cmd = [*compiler, *kernel.cflags, "-fPIC", "-shared", "-o", lib, src, *kernel.ldflags]
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            raise KernelBuildError(cmd, done.stdout)
        # Once loaded, the library stays mapped after its file is removed.
        library = ctypes.CDLL(lib, mode=ctypes.RTLD_LOCAL)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return CompiledKernel(kernel, library)


class PackedWeight:
    """A weight already in the packed layout of one kernel's argument (`CompiledKernel.pack`):
    pass it in the weight's place to skip packing on each call."""

    def __init__(self, symbol: str, name: str, data: Array):
        self.symbol = symbol
        self.name = name
        self.data = data


class CompiledKernel:
    """A built kernel: call it with numpy arrays (see the module's doc).

    Attributes: `symbol`, `kernel` (the message it was built from), `inputs` and `outputs`
    (its KernelArgs, in call order), `library` (the loaded ctypes library)."""

    def __init__(self, kernel: pb.Kernel, library: ctypes.CDLL):
        self.kernel = kernel
        self.symbol = kernel.symbol
        self.library = library
        self.inputs = [a for a in kernel.args if a.role != "output"]
        self.outputs = [a for a in kernel.args if a.role == "output"]
        self._fn = self._function(kernel.symbol, [ctypes.c_void_p] * len(kernel.args))
        self._packers = {
            a.name: self._function(a.pack_function, [ctypes.c_void_p, ctypes.c_void_p])
            for a in self.inputs
            if a.pack_function
        }
        self._set_threads = (
            self._function(kernel.set_num_threads, [ctypes.c_int])
            if kernel.set_num_threads
            else None
        )

    @property
    def threads(self) -> int:
        """The thread count the kernel was measured with."""
        return int(self.kernel.threads)

    def set_num_threads(self, n: int) -> None:
        """Threads of the kernel's parallel loops for later calls (`<symbol>_set_num_threads`)."""
        if self._set_threads is None:
            raise RuntimeError(
                f"{self.symbol}: the kernel's thread count cannot be set at run time"
            )
        if int(n) < 1:
            raise ValueError(f"thread count {n}: at least 1")
        self._set_threads(int(n))

    def pack(self, name: str, array: Array) -> PackedWeight:
        """Packs the weight argument `name` once (its pack function, into an aligned buffer)."""
        arg = next((a for a in self.inputs if a.name == name), None)
        if arg is None or name not in self._packers:
            packed = sorted(self._packers)
            raise ValueError(f"{self.symbol}: no packed weight {name!r} (packed weights: {packed})")
        src = self._ready(arg, array)
        dst = aligned_empty((int(arg.packed_elements),), arg.alignment, _arg_dtype(arg))
        self._packers[name](src.ctypes.data, dst.ctypes.data)
        return PackedWeight(self.symbol, name, dst)

    def __call__(
        self,
        *arrays: Array | PackedWeight,
        out: Array | Sequence[Array] | None = None,
    ) -> Array | tuple[Array, ...]:
        if len(arrays) != len(self.inputs):
            names = ", ".join(a.name for a in self.inputs)
            raise TypeError(
                f"{self.symbol} takes {len(self.inputs)} arrays ({names}), got {len(arrays)}"
            )
        given = dict(zip((a.name for a in self.inputs), arrays, strict=True))
        outs = self._outputs(out)
        # Kept alive until the call returns: the pointers below point into them.
        buffers: list[Array] = []
        for a in self.kernel.args:
            if a.role == "output":
                buffers.append(outs[a.name][1])
                continue
            v = given[a.name]
            if isinstance(v, PackedWeight):
                if v.symbol != self.symbol or v.name != a.name:
                    raise ValueError(f"{a.name}: a weight packed for {v.symbol}'s {v.name}")
                buffers.append(v.data)
            elif a.name in self._packers:
                buffers.append(self.pack(a.name, v).data)
            else:
                buffers.append(self._ready(a, v))
        self._fn(*(b.ctypes.data for b in buffers))
        results = []
        for a in self.outputs:
            user, buf = outs[a.name]
            if user is not buf:
                np.copyto(user, buf)
            results.append(user)
        return results[0] if len(results) == 1 else tuple(results)

    def _outputs(self, out: Array | Sequence[Array] | None) -> dict[str, tuple[Array, Array]]:
        # Per output: (the array returned, the buffer the kernel writes).
        if out is None:
            return {
                a.name: (buf, buf)
                for a in self.outputs
                for buf in [aligned_empty(tuple(a.shape), a.alignment, _arg_dtype(a))]
            }
        given = (out,) if isinstance(out, np.ndarray) else tuple(out)
        if len(given) != len(self.outputs):
            raise TypeError(
                f"{self.symbol} has {len(self.outputs)} outputs, `out` gives {len(given)}"
            )
        pairs = {}
        for a, arr in zip(self.outputs, given, strict=True):
            self._check(a, arr)
            if not arr.flags.writeable:
                raise ValueError(f"{a.name}: the output array is read-only")
            pairs[a.name] = (
                arr,
                arr if self._usable(a, arr) else aligned_empty(arr.shape, a.alignment, arr.dtype),
            )
        return pairs

    def _ready(self, arg: pb.KernelArg, array: Array) -> Array:
        """`array` checked, as a C-contiguous aligned array (itself, or an aligned copy)."""
        self._check(arg, array)
        if self._usable(arg, array):
            return array
        copy = aligned_empty(array.shape, arg.alignment, array.dtype)
        np.copyto(copy, array)
        return copy

    @staticmethod
    def _check(arg: pb.KernelArg, array: object) -> None:
        if not isinstance(array, np.ndarray):
            raise TypeError(f"{arg.name}: a numpy array is expected, not {type(array).__name__}")
        want = np.dtype(_arg_dtype(arg))
        if array.dtype != want:
            raise TypeError(f"{arg.name}: dtype {array.dtype}, the kernel takes {want}")
        if tuple(array.shape) != tuple(arg.shape):
            raise ValueError(
                f"{arg.name}: shape {tuple(array.shape)}, the kernel takes {tuple(arg.shape)}"
            )

    @staticmethod
    def _usable(arg: pb.KernelArg, array: Array) -> bool:
        return bool(array.flags.c_contiguous) and array.ctypes.data % max(arg.alignment, 1) == 0

    def _function(self, name: str, argtypes: list[Any]) -> Callable[..., None]:
        try:
            f = getattr(self.library, name)
        except AttributeError:
            raise ValueError(f"the kernel's library has no function {name!r}") from None
        f.argtypes = argtypes
        f.restype = None
        fn: Callable[..., None] = f
        return fn


def _arg_dtype(arg: pb.KernelArg) -> Any:
    dtype = arg.dtype or "float32"
    if dtype not in _DTYPES:
        raise ValueError(
            f"argument {arg.name}: dtype {dtype!r} is not supported ({', '.join(_DTYPES)})"
        )
    return _DTYPES[dtype]


def _row_major(shape: Sequence[int]) -> list[int]:
    strides: list[int] = []
    n = 1
    for d in reversed(list(shape)):
        strides.append(n)
        n *= d
    return strides[::-1]
