"""TLS: a server with a certificate speaks TLS only; a Client trusting its CA (a path, or the
PEM bytes) gets in. Certificates made with the `openssl` command: a CA and a leaf for
127.0.0.1."""

import subprocess

import grpc
import pytest
from conftest import start_server

from tunehub import Client, TunehubError


def make_certs(openssl, d):
    def run(*args):
        done = subprocess.run([openssl, *args], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr

    (d / "leaf.ext").write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=tunehub test CA",
        "-keyout",
        str(d / "ca.key"),
        "-out",
        str(d / "ca.pem"),
    )
    run(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        str(d / "key.pem"),
        "-out",
        str(d / "leaf.csr"),
    )
    run(
        "x509",
        "-req",
        "-in",
        str(d / "leaf.csr"),
        "-CA",
        str(d / "ca.pem"),
        "-CAkey",
        str(d / "ca.key"),
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        str(d / "leaf.ext"),
        "-out",
        str(d / "cert.pem"),
    )


@pytest.fixture(scope="module")
def tls_server(openssl, tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    make_certs(openssl, d)
    s = start_server(
        d, "--tls-cert", str(d / "cert.pem"), "--tls-key", str(d / "key.pem"), scheme="https"
    )
    yield s, d
    s.stop()


def test_a_client_trusting_the_ca_gets_in(tls_server):
    s, d = tls_server
    with Client(s.url, token=s.token, ca_cert=d / "ca.pem", timeout=30) as c:
        assert c.jobs() == []
    with Client(s.url, token=s.token, ca_cert=(d / "ca.pem").read_bytes(), timeout=30) as c:
        assert c.jobs() == []


def test_plain_http_to_a_tls_server_fails(tls_server):
    s, _ = tls_server
    with Client(f"http://{s.addr}", token=s.token, timeout=10) as c:
        with pytest.raises(TunehubError) as e:
            c.jobs()
        assert e.value.code == grpc.StatusCode.UNAVAILABLE


def test_urls_are_checked():
    for bad in ["127.0.0.1:50051", "ftp://host:1", "http://host:1/path"]:
        with pytest.raises(ValueError, match="bad server URL"):
            Client(bad)
    with pytest.raises(ValueError, match="https"):
        Client("http://127.0.0.1:1", ca_cert=b"pem")
