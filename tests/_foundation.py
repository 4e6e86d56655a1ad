"""Shared helpers for the foundation tests: a bare venv and fake ``torch`` packages.

Imported by the test modules (``from _foundation import ...``); the fixtures
are session-scoped because creating a venv costs a second or two.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CUDNN_ERROR = "libcudnn.so.8: cannot open shared object file: No such file or directory"


@pytest.fixture(scope="session")
def bare_python(tmp_path_factory) -> str:
    """A real venv without pip and without torch (``python -m venv --without-pip``)."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    assert python.exists()
    return str(python)


def fake_torch(directory: Path, body: str) -> str:
    """Create ``directory/torch/__init__.py`` with ``body``; returns ``directory`` for PYTHONPATH."""
    pkg = directory / "torch"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(body)
    return str(directory)


@pytest.fixture(scope="session")
def cudnn_broken_torch(tmp_path_factory) -> str:
    """PYTHONPATH entry with a ``torch`` whose import raises the classic missing-cuDNN OSError."""
    return fake_torch(tmp_path_factory.mktemp("torch-cudnn"), f"raise OSError({CUDNN_ERROR!r})\n")


@pytest.fixture(scope="session")
def hanging_torch(tmp_path_factory) -> str:
    """PYTHONPATH entry with a ``torch`` whose import hangs (as a wedged CUDA init does)."""
    return fake_torch(tmp_path_factory.mktemp("torch-hang"), "import time\ntime.sleep(120)\n")


def env_with(**extra: str) -> dict:
    """The current environment plus ``extra``."""
    env = dict(os.environ)
    env.update(extra)
    return env


_SCRIPT = Path(sys.executable).with_name("gpudoctor")
#: argv prefix that runs the installed CLI: the console script next to the interpreter, else ``-m``
GPUDOCTOR = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "gpudoctor"]


def run_gpudoctor(*args: str, env: dict | None = None, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    """Run the installed ``gpudoctor`` console script (stdout/stderr captured as text, i.e. piped)."""
    return subprocess.run(
        [*GPUDOCTOR, *args], capture_output=True, text=True, env=env or env_with(), timeout=timeout, **kw
    )


def validator(name: str):
    """A jsonschema validator for a published schema, resolving the $refs between the files."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    from gpudoctor.schemas import published_schema

    schemas = {n: published_schema(n) for n in ("facts.schema.json", "report.schema.json", "explain.schema.json")}
    registry = Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in schemas.values())
    schema = schemas[name]
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, registry=registry)
