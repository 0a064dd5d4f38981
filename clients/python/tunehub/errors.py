"""The errors the client raises."""

from __future__ import annotations

import grpc


class TunehubError(Exception):
    """A call the server refused or that failed on the way: its gRPC status code (a
    `grpc.StatusCode`, e.g. NOT_FOUND for a workload with no record) and the server's message."""

    def __init__(self, code: grpc.StatusCode, message: str, method: str = ""):
        self.code = code
        self.message = message
        self.method = method
        where = f"{method}: " if method else ""
        super().__init__(f"{where}{code.name}: {message}")

    @classmethod
    def from_rpc(cls, err: grpc.RpcError, method: str) -> "TunehubError":
        # Every RpcError raised by a call is also a grpc.Call, which carries the status.
        code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
        details = err.details() if hasattr(err, "details") else str(err)
        return cls(code, details or "", method)


class KernelBuildError(Exception):
    """The C compiler refused a kernel: the command line and the compiler's output."""

    def __init__(self, command: list[str], output: str):
        self.command = command
        self.output = output
        super().__init__(f"{' '.join(command)} failed:\n{output}")


class ModelError(Exception):
    """A built model (`Model`) that cannot be loaded, or a call with inputs it does not take."""
