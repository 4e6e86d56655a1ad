"""The wheel is the product: what it must carry to work outside this checkout.

Builds the real wheel with the project's build backend (hatchling, in process,
no network) and reads it back as a zip: every module, the data tables, the
published schemas, and the entry points declared in pyproject.toml (the
built-in checks and fixes are found only through them). ``.ci/run`` also
installs the wheel into a fresh venv without torch and runs it.
"""

from __future__ import annotations

import configparser
import sys
import zipfile
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10
    import tomli as tomllib

from gpudoctor import __version__

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "gpudoctor"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    from hatchling.builders.wheel import WheelBuilder

    out = tmp_path_factory.mktemp("dist")
    paths = list(WheelBuilder(str(ROOT)).build(directory=str(out), versions=["standard"]))
    assert len(paths) == 1 and Path(paths[0]).name == f"gpudoctor-{__version__}-py3-none-any.whl", paths
    return zipfile.ZipFile(paths[0])


def _shipped(pattern: str) -> set[str]:
    return {p.relative_to(PACKAGE.parent).as_posix() for p in PACKAGE.glob(pattern) if "__pycache__" not in p.parts}


def test_wheel_carries_every_module_table_and_schema(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    modules, tables, schemas = _shipped("**/*.py"), _shipped("data/*.toml"), _shipped("schemas/*.json")
    # facts, report, explain, watch; the sitecustomize `gpudoctor watch` puts on the job's PYTHONPATH
    assert len(tables) >= 5 and len(schemas) == 4 and "gpudoctor/probe/_script.py" in modules
    assert "gpudoctor/_watch_site/sitecustomize.py" in modules
    assert not (modules | tables | schemas) - names, sorted((modules | tables | schemas) - names)
    # nothing from the checkout's tests, fixtures or venv leaks into it
    assert not [n for n in names if n.startswith(("tests/", ".venv/", "src/")) or "__pycache__" in n]


def test_wheel_declares_the_console_script_and_every_plugin(wheel: zipfile.ZipFile) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    ep = configparser.ConfigParser(delimiters=("=",))
    ep.optionxform = str  # keep the names' case
    ep.read_string(wheel.read(f"gpudoctor-{__version__}.dist-info/entry_points.txt").decode())
    assert ep["console_scripts"]["gpudoctor"].strip() == project["scripts"]["gpudoctor"]
    for group in ("gpudoctor.checks", "gpudoctor.fixes"):
        declared = project["entry-points"][group]
        assert len(declared) >= 7
        assert {k.strip('"'): v.strip() for k, v in ep[group].items()} == declared, group


def test_wheel_metadata_names_the_version_and_runtime_dependencies(wheel: zipfile.ZipFile) -> None:
    meta = wheel.read(f"gpudoctor-{__version__}.dist-info/METADATA").decode()
    assert f"\nVersion: {__version__}\n" in meta
    assert "Requires-Python: >=3.10" in meta
    requires = [line for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    runtime = [r for r in requires if "extra ==" not in r]
    assert any(r.startswith("Requires-Dist: click") for r in runtime)
    assert not any("torch" in r for r in runtime), "torch must stay out of gpudoctor's own dependencies"
