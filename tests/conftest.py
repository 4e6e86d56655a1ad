"""Shared fixtures. Every test runs with HOME, XDG dirs and pip/Jupyter config
pointed into a temporary directory (autouse), so no test can read or write the
developer's real configuration; the guard fails loudly if one tries."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
CASES = FIXTURES / "cases"


#: Mirror probes may reach only loopback servers in tests (module/session fixtures included).
os.environ["GPUDOCTOR_LOOPBACK_ONLY"] = "1"


_XDG = (
    ("XDG_CONFIG_HOME", ".config"),
    ("XDG_DATA_HOME", ".local/share"),
    ("XDG_STATE_HOME", ".local/state"),
    ("XDG_CACHE_HOME", ".cache"),
)


@pytest.fixture(scope="session", autouse=True)
def isolated_session_home(tmp_path_factory):
    """HOME, XDG_* and TMPDIR point into a temporary directory for the WHOLE session, set up
    before any module- or session-scoped fixture runs, so that even those never read or write
    the developer's configuration, caches or fix journal (the per-test ``isolated_home``
    then gives each test a fresh one)."""
    home = tmp_path_factory.mktemp("session-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(home))
        for var, sub in _XDG:
            mp.setenv(var, str(home / sub))
        for var in list(os.environ):
            if var.startswith(("PIP_CONFIG_FILE", "JUPYTER_", "UV_", "CONDARC", "GPUDOCTOR_")):
                mp.delenv(var, raising=False)
        mp.setenv("GPUDOCTOR_LOOPBACK_ONLY", "1")
        yield home


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory, monkeypatch):
    """A fresh HOME and XDG dirs for every test; config env vars cleared."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for var, sub in _XDG:
        monkeypatch.setenv(var, str(home / sub))
    for var in list(os.environ):
        if var.startswith(("PIP_CONFIG_FILE", "JUPYTER_", "UV_", "CONDARC", "GPUDOCTOR_")):
            monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GPUDOCTOR_LOOPBACK_ONLY", "1")  # no test may probe a real mirror
    yield home


@pytest.fixture
def python() -> str:
    """The test interpreter (has torch 2.13.0 CPU installed by the test extra)."""
    return sys.executable


@pytest.fixture(autouse=True)
def private_tmpdir(monkeypatch):
    """A fresh, short temporary directory per test (``TMPDIR`` for subprocesses, ``tempfile.tempdir``
    in process), removed afterwards: crash logs of tests that provoke exit 3
    (``gpudoctor-crash-*.log``, written with :mod:`tempfile`) and other scratch files never pile up
    in /tmp. Short (``/tmp/gdt-XXXXXXXX``) so AF_UNIX socket paths made under it stay valid; mode
    1777 like /tmp itself."""
    import shutil
    import tempfile

    path = tempfile.mkdtemp(prefix="gdt-")
    os.chmod(path, 0o1777)  # like /tmp: tests that drop privileges (setpriv nobody) can use it too
    monkeypatch.setenv("TMPDIR", path)
    monkeypatch.setattr(tempfile, "tempdir", path)
    yield Path(path)
    monkeypatch.undo()
    shutil.rmtree(path, ignore_errors=True)


def pytest_terminal_summary(terminalreporter):
    """The break-it matrix's figures (tests/robustness), at the end of a run that ran it."""
    figures = getattr(sys.modules.get("hostile"), "FIGURES", None)
    if figures:
        terminalreporter.write_sep("=", "break-it matrix")
        terminalreporter.write_line(", ".join(f"{k}: {v}" for k, v in figures.items()))
