"""tunehub's Python client: the gRPC API of a tunehub server, and its kernels as callables.

Layout: `client` (`Client`, its `Records`), `workloads` (op specs and text forms as Workload
messages), `kernel` (`build`: a Kernel compiled and called on numpy arrays), `errors`, and
`_proto` (the stubs generated from proto/tunehub/v1/tunehub.proto; its messages are `pb`).
"""

from . import kernel
from ._proto import tunehub_pb2 as pb
from .client import Client, Records, write_pack
from .errors import KernelBuildError, TunehubError
from .workloads import expr, key, op, shape_range

__version__ = "0.1.0"

__all__ = [
    "Client",
    "KernelBuildError",
    "Records",
    "TunehubError",
    "expr",
    "kernel",
    "key",
    "op",
    "pb",
    "shape_range",
    "write_pack",
]
