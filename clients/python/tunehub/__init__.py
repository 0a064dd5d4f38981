"""tunehub's Python client: the gRPC API of a tunehub server, and its kernels as callables.

Layout: `client` (`Client`, its `Records`), `config` (where `Client()` connects: arguments,
environment, the command line's configuration file), `workloads` (op specs and text forms as
Workload messages), `kernel` (`build`: a Kernel compiled and called on numpy arrays), `model`
(`Model`: a model `tunehub build` compiled, called on a dict of arrays), `errors`,
and `_proto` (the stubs generated from proto/tunehub/v1/tunehub.proto; its messages are `pb`).
The package is typed (PEP 561: `py.typed`).
"""

from . import config, kernel
from .model import Model
from ._proto import tunehub_pb2 as pb
from .client import SCHEDULERS, STATES, Client, Records, state_name, write_pack
from .config import ConfigError
from .errors import KernelBuildError, ModelError, TunehubError
from .workloads import expr, key, op, shape_range

__version__ = "0.1.0"

__all__ = [
    "SCHEDULERS",
    "STATES",
    "Client",
    "ConfigError",
    "KernelBuildError",
    "Model",
    "ModelError",
    "Records",
    "TunehubError",
    "config",
    "expr",
    "kernel",
    "key",
    "op",
    "pb",
    "shape_range",
    "state_name",
    "write_pack",
]
