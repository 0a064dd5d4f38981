"""`Model(dir)`: a model `tunehub build` compiled (libNAME.so, NAME.weights, manifest.json),
loaded with ctypes and called on numpy arrays.

    m = tunehub.Model("out/resnet")
    outputs = m({"input": x})          # a dict of float32 arrays by output name
    m.set_num_threads(2)

Inputs are given by name, each of the manifest's shape (any float array: it is converted to
contiguous float32); outputs come back as new arrays. No alignment is required: the library
reads a 64-byte-aligned input where it is and copies any other in. One `Model` runs one call at a time (it owns its scratch
memory): create one per thread to run concurrently.
"""

from __future__ import annotations

import ctypes
import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from .errors import ModelError

__all__ = ["Model"]

_FORMAT = 1


class Model:
    """A compiled model: callable on a dict of numpy arrays."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = os.fspath(directory)
        path = os.path.join(self.directory, "manifest.json")
        try:
            with open(path, encoding="utf-8") as f:
                self.manifest: dict[str, Any] = json.load(f)
        except (OSError, ValueError) as e:
            raise ModelError(f"{path}: not a built model ({e})") from e
        if self.manifest.get("format") != _FORMAT:
            raise ModelError(f"{path}: manifest format {self.manifest.get('format')}, expected {_FORMAT}")
        library = self.manifest.get("library")
        if not library:
            raise ModelError(f"{self.directory} was built with --no-compile: no library to run")
        self.name: str = self.manifest["name"]
        self._lib = ctypes.CDLL(os.path.join(self.directory, library))

        def fn(s: str) -> Any:
            return getattr(self._lib, f"{self.name}_{s}")

        self._create = fn("create")
        self._create.restype = ctypes.c_void_p
        self._create.argtypes = [ctypes.c_char_p]
        self._run = fn("run")
        self._run.restype = ctypes.c_int
        self._run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self._destroy = fn("destroy")
        self._destroy.restype = None
        self._destroy.argtypes = [ctypes.c_void_p]
        self._threads = fn("set_num_threads")
        self._threads.restype = None
        self._threads.argtypes = [ctypes.c_int]
        last_error = fn("last_error")
        last_error.restype = ctypes.c_char_p
        weights = os.path.join(self.directory, self.manifest["weights"])
        self._model = self._create(weights.encode())
        if not self._model:
            raise ModelError(f"{weights}: {last_error().decode(errors='replace')}")
        self.inputs: list[dict[str, Any]] = self.manifest["inputs"]
        self.outputs: list[dict[str, Any]] = self.manifest["outputs"]

    def set_num_threads(self, n: int) -> None:
        """OpenMP threads of every kernel of the library (every Model of it)."""
        self._threads(max(1, int(n)))

    def __call__(self, inputs: Mapping[str, npt.ArrayLike]) -> dict[str, npt.NDArray[np.float32]]:
        names = [i["name"] for i in self.inputs]
        unknown = sorted(set(inputs) - set(names))
        missing = [n for n in names if n not in inputs]
        if unknown or missing:
            raise ModelError(f"inputs {names} are needed; missing {missing}, unknown {unknown}")
        arrays = []
        for spec in self.inputs:
            a = np.ascontiguousarray(inputs[spec["name"]], dtype=np.float32)
            if list(a.shape) != list(spec["shape"]):
                raise ModelError(f"input {spec['name']!r} is {list(a.shape)}, the model takes {spec['shape']}")
            arrays.append(a)
        outs = [np.empty(o["shape"], dtype=np.float32) for o in self.outputs]
        ins = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
        ptrs = (ctypes.c_void_p * len(outs))(*[o.ctypes.data for o in outs])
        if self._run(self._model, ins, ptrs) != 0:
            raise ModelError(f"{self.name}_run failed")
        return {o["name"]: a for o, a in zip(self.outputs, outs)}

    def close(self) -> None:
        """Frees the model (also done when it is collected)."""
        if getattr(self, "_model", None):
            self._destroy(self._model)
            self._model = None

    def __del__(self) -> None:
        self.close()
