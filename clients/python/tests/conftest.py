"""A real `tunehub server` on loopback for the client's tests.

The binary is TUNEHUB_BIN (tests/tests/python_client.rs, which runs this suite under `cargo
test`, builds it and sets it). Without it the server's tests are skipped with a note, and fail
under CI=true, where nothing may be skipped.
"""

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

TOKEN = "python-test-token"


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


def skip_or_fail(why: str) -> None:
    if in_ci():
        pytest.fail(f"{why}, and CI must run this test", pytrace=False)
    pytest.skip(why)


@dataclass
class Server:
    process: subprocess.Popen
    addr: str
    token: str
    scheme: str = "http"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.addr}"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def tunehub_bin() -> str:
    path = os.environ.get("TUNEHUB_BIN")
    if not path:
        skip_or_fail("TUNEHUB_BIN (the tunehub binary) is not set")
    if not Path(path).is_file():
        pytest.fail(f"TUNEHUB_BIN={path} is not a file", pytrace=False)
    return path


def start_server(directory: Path, *extra: str, scheme: str = "http") -> Server:
    """`tunehub server` on a free loopback port with a SQLite file in `directory`, once it
    says where it listens. Jobs are claimed quickly (as the Rust end-to-end tests do)."""
    env = {k: v for k, v in os.environ.items() if not (k.startswith("TUNEHUB_") or k == "RUST_LOG")}
    cmd = [
        tunehub_bin(),
        "server",
        "--listen",
        "127.0.0.1:0",
        "--db",
        str(directory / "tunehub.db"),
        "--token",
        TOKEN,
        "--instance",
        "python-tests",
        "--poll-ms",
        "100",
        *extra,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    # The first line on stdout is `listening on ADDR`; EOF if the server could not start.
    line = proc.stdout.readline().strip()
    # Nothing more is read from stdout: closed, as the Rust tests drop theirs.
    proc.stdout.close()
    if not line.startswith("listening on "):
        proc.kill()
        proc.wait()
        pytest.fail(
            f"tunehub server did not start (first line {line!r}; its log is above)", pytrace=False
        )
    return Server(proc, line.removeprefix("listening on "), TOKEN, scheme)


@pytest.fixture(autouse=True)
def no_client_settings(monkeypatch, tmp_path_factory):
    """No test reads the developer's settings: `Client()` resolves its server, token and CA
    from the environment and ~/.config/tunehub/config.toml (tunehub.config)."""
    for var in ("TUNEHUB_SERVER", "TUNEHUB_TOKEN", "TUNEHUB_CA_CERT", "TUNEHUB_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config")))


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    s = start_server(tmp_path_factory.mktemp("server"))
    yield s
    s.stop()


@pytest.fixture(scope="session")
def openssl():
    path = shutil.which("openssl")
    if path is None:
        skip_or_fail("openssl is not installed")
    return path
