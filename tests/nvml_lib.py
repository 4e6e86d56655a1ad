"""Build the fake ``libnvidia-ml.so.1`` (tests/fake_nvml.c) with gcc for one test."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SOURCE = Path(__file__).with_name("fake_nvml.c")


def build_fake_nvml(directory: Path, **defines: int | str | bool) -> Path:
    """Compile the fake NVML into ``directory/libnvidia-ml.so.1`` with ``-DNAME=value``
    for each define (``True`` -> ``-DNAME``). Returns ``directory`` (for LD_LIBRARY_PATH).
    Skips the test when gcc is absent."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("gcc is not installed: the fake libnvidia-ml.so.1 cannot be built")
    directory.mkdir(parents=True, exist_ok=True)
    flags = []
    for name, value in defines.items():
        if value is True:
            flags.append(f"-D{name}")
        elif isinstance(value, str):
            flags.append(f'-D{name}="{value}"')
        else:
            flags.append(f"-D{name}={value}")
    out = directory / "libnvidia-ml.so.1"
    subprocess.run(
        [gcc, "-shared", "-fPIC", "-O0", "-o", str(out), str(SOURCE), *flags],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return directory
