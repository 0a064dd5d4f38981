"""The checked-in stubs are exactly what generate.sh makes from the repository's proto: a proto
change without regenerated stubs fails here."""

import filecmp
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from conftest import skip_or_fail

HERE = Path(__file__).resolve().parent.parent
STUBS = ["tunehub_pb2.py", "tunehub_pb2.pyi", "tunehub_pb2_grpc.py"]


def test_stubs_match_the_proto(tmp_path):
    if importlib.util.find_spec("grpc_tools") is None:
        skip_or_fail("grpcio-tools is not installed (pip install ./clients/python[test])")
    env = dict(os.environ, PYTHON=sys.executable)
    done = subprocess.run(
        ["bash", str(HERE / "generate.sh"), str(tmp_path)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    stale = [
        f
        for f in STUBS
        if not filecmp.cmp(tmp_path / f, HERE / "tunehub" / "_proto" / f, shallow=False)
    ]
    assert not stale, f"{stale} differ from proto/: run clients/python/generate.sh"
