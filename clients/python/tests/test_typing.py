"""The package is typed (PEP 561: tunehub/py.typed ships in the wheel) and passes `mypy
--strict` with pyproject's [tool.mypy] settings: a public function without annotations, or
one whose annotations lie, fails here."""

import importlib.util
import subprocess
import sys
from pathlib import Path

from conftest import skip_or_fail

HERE = Path(__file__).resolve().parent.parent


def test_py_typed_is_shipped():
    assert (HERE / "tunehub" / "py.typed").is_file()
    assert '"tunehub" = ["py.typed"]' in (HERE / "pyproject.toml").read_text()


def test_the_package_passes_mypy_strict(tmp_path):
    if importlib.util.find_spec("mypy") is None:
        skip_or_fail("mypy is not installed (pip install ./clients/python[test])")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache")],
        cwd=HERE,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
