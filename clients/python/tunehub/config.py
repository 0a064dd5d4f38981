"""Where `Client()` connects, resolved as the `tunehub` command line resolves it.

Each setting comes from the first of: the argument given to `Client`, the environment
(`TUNEHUB_SERVER`, `TUNEHUB_TOKEN`, `TUNEHUB_CA_CERT`), the `[client]` table of the TOML
configuration file, the default (`http://127.0.0.1:50051`, no token, the system's roots). The
file is `TUNEHUB_CONFIG` when set (it must then exist), else
`$XDG_CONFIG_HOME/tunehub/config.toml` (`~/.config/tunehub/config.toml`) when that exists.

```toml
[client]
server = "https://tunehub.example:50051"
token = "s3cret"
ca_cert = "/etc/tunehub/ca.pem"
```

The `[client]` table takes these three keys only: any other is an error naming it, as the
command line refuses it. Other tables (the server's `[server]`) are left to their readers. An
empty environment variable counts as unset.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["DEFAULT_SERVER", "ConfigError", "ClientConfig", "default_config_path", "resolve"]

DEFAULT_SERVER = "http://127.0.0.1:50051"
CLIENT_KEYS = ("server", "token", "ca_cert")


class ConfigError(ValueError):
    """A configuration file that cannot be read or holds what the client does not take."""


@dataclass(frozen=True)
class ClientConfig:
    """The resolved settings. `ca_cert`: a PEM file's path, or the PEM bytes when given so to
    `Client`. `file`: the configuration file that was read, if any."""

    server: str
    token: str | None = None
    ca_cert: str | bytes | None = None
    file: Path | None = None


def default_config_path(env: Mapping[str, str] | None = None) -> Path:
    """`$XDG_CONFIG_HOME/tunehub/config.toml`, or `~/.config/tunehub/config.toml` (whether it
    exists or not)."""
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "tunehub" / "config.toml"


def config_path(env: Mapping[str, str] | None = None) -> Path | None:
    """The file to read: `TUNEHUB_CONFIG` when set, else the default path when it exists."""
    env = os.environ if env is None else env
    explicit = env.get("TUNEHUB_CONFIG")
    if explicit:
        return Path(explicit)
    default = default_config_path(env)
    return default if default.is_file() else None


def load_client_table(path: str | os.PathLike[str]) -> dict[str, str]:
    """The `[client]` table of a TOML file, checked: strings only, known keys only."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read the configuration file {p}: {e.strerror or e}") from None
    try:
        doc: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"configuration file {p}: {e}") from None
    table = doc.get("client", {})
    if not isinstance(table, dict):
        raise ConfigError(f"configuration file {p}: `client` must be a table ([client])")
    out: dict[str, str] = {}
    for k, v in table.items():
        if k not in CLIENT_KEYS:
            raise ConfigError(
                f"configuration file {p}: unknown key `{k}` in [client] "
                f"(expected one of {', '.join(CLIENT_KEYS)})"
            )
        if not isinstance(v, str):
            raise ConfigError(
                f"configuration file {p}: [client] {k} must be a string, not {type(v).__name__}"
            )
        out[k] = v
    return out


def resolve(
    server: str | None = None,
    token: str | None = None,
    ca_cert: str | os.PathLike[str] | bytes | None = None,
    *,
    config: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> ClientConfig:
    """Arguments, then the environment, then the file (`config`, else `config_path`), then the
    defaults. The file is read only when it is there to read (a missing `config` or
    `TUNEHUB_CONFIG` file is an error, as on the command line)."""
    env = os.environ if env is None else env
    path = Path(config) if config is not None else config_path(env)
    table = load_client_table(path) if path is not None else {}

    def pick(arg: Any, var: str, key: str) -> Any:
        if arg is not None:
            return arg
        return env.get(var) or table.get(key)

    ca = pick(ca_cert, "TUNEHUB_CA_CERT", "ca_cert")
    url = pick(server, "TUNEHUB_SERVER", "server")
    return ClientConfig(
        server=DEFAULT_SERVER if url is None else url,
        token=pick(token, "TUNEHUB_TOKEN", "token"),
        ca_cert=ca if isinstance(ca, (bytes, type(None))) else os.fspath(ca),
        file=path,
    )
