"""`Client()` takes its settings as the command line does: arguments, then TUNEHUB_SERVER,
TUNEHUB_TOKEN and TUNEHUB_CA_CERT, then the `[client]` table of the configuration file
(TUNEHUB_CONFIG, else $XDG_CONFIG_HOME/tunehub/config.toml), then the defaults. The conftest
clears those variables and points XDG_CONFIG_HOME at an empty directory for every test."""

import os
from pathlib import Path

import grpc
import pytest

from tunehub import Client, ConfigError, TunehubError, config


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_arguments_win_over_the_environment_over_the_file_over_defaults(tmp_path, monkeypatch):
    assert config.resolve() == config.ClientConfig(server="http://127.0.0.1:50051")
    f = write(
        tmp_path / "c.toml",
        '[client]\nserver = "http://file:1"\ntoken = "file-token"\nca_cert = "file.pem"\n'
        '[server]\ndb = "the server\'s business"\n',
    )
    monkeypatch.setenv("TUNEHUB_CONFIG", str(f))
    c = config.resolve()
    assert (c.server, c.token, c.ca_cert, c.file) == ("http://file:1", "file-token", "file.pem", f)
    monkeypatch.setenv("TUNEHUB_SERVER", "http://env:2")
    monkeypatch.setenv("TUNEHUB_TOKEN", "env-token")
    monkeypatch.setenv("TUNEHUB_CA_CERT", "env.pem")
    c = config.resolve()
    assert (c.server, c.token, c.ca_cert) == ("http://env:2", "env-token", "env.pem")
    c = config.resolve("http://arg:3", "arg-token", b"PEM")
    assert (c.server, c.token, c.ca_cert) == ("http://arg:3", "arg-token", b"PEM")
    # An empty variable counts as unset; an empty token argument means no token.
    monkeypatch.setenv("TUNEHUB_TOKEN", "")
    assert config.resolve().token == "file-token"
    assert config.resolve(token="").token == ""


def test_the_default_file_is_read_when_it_exists(tmp_path, monkeypatch):
    xdg = Path(os.environ["XDG_CONFIG_HOME"])
    assert config.default_config_path() == xdg / "tunehub" / "config.toml"
    assert config.resolve().file is None
    f = write(xdg / "tunehub" / "config.toml", '[client]\nserver = "http://xdg:4"\n')
    c = config.resolve()
    assert (c.server, c.file) == ("http://xdg:4", f)
    # TUNEHUB_CONFIG wins over it, and must exist when set (as on the command line).
    monkeypatch.setenv("TUNEHUB_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(ConfigError, match="cannot read the configuration file .*missing.toml"):
        config.resolve()
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.delenv("TUNEHUB_CONFIG")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert config.default_config_path() == tmp_path / ".config" / "tunehub" / "config.toml"


@pytest.mark.parametrize(
    "text, message",
    [
        ('[client]\nserver = "http://h:1"\nsevrer = "typo"\n', "unknown key `sevrer` in [client]"),
        ("[client]\ntoken = 5\n", "[client] token must be a string, not int"),
        ('client = "x"\n', "`client` must be a table"),
        ("[client\n", "configuration file"),
    ],
)
def test_a_bad_file_is_an_error_naming_what(tmp_path, text, message):
    f = write(tmp_path / "bad.toml", text)
    with pytest.raises(ConfigError) as e:
        config.resolve(config=f)
    assert message in str(e.value) and str(f) in str(e.value), e.value
    with pytest.raises(ConfigError):
        Client(config=f)


def test_client_with_no_arguments_connects_as_the_command_line_would(server, monkeypatch):
    xdg = Path(os.environ["XDG_CONFIG_HOME"])
    write(
        xdg / "tunehub" / "config.toml",
        f'[client]\nserver = "{server.url}"\ntoken = "{server.token}"\n',
    )
    with Client(timeout=60) as c:
        assert c.url == server.url
        c.jobs(limit=1)  # the token went with the call
    # The environment's token wins over the file's: a wrong one is refused.
    monkeypatch.setenv("TUNEHUB_TOKEN", "not-the-token")
    with Client(timeout=60) as c, pytest.raises(TunehubError) as e:
        c.jobs(limit=1)
    assert e.value.code == grpc.StatusCode.UNAUTHENTICATED, e.value
    # A CA certificate from the environment is for https URLs; an http one leaves it unused,
    # as the command line does. Given as an argument with an http URL, it is a mistake.
    monkeypatch.setenv("TUNEHUB_CA_CERT", "/nonexistent/ca.pem")
    with Client(token=server.token, timeout=60) as c:
        c.jobs(limit=1)
    with pytest.raises(ValueError, match="ca_cert is for an https:// URL"):
        Client(server.url, ca_cert=b"PEM")
