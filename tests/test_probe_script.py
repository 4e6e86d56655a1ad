"""The one probe script (``probe/_script.py``): Python 3.6 source, two levels, the same keys.

Real child interpreters run the file at each level (the test venv's real torch 2.13.0 CPU build
for the full level); the light level is watched from inside the child (its ``sys.modules``).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest

from gpudoctor.collect.jupyter import LISTER_SCRIPT
from gpudoctor.facts.targets import ProbeFacts
from gpudoctor.kernel_launch import probe_code
from gpudoctor.probe import LEVELS, MARKER, PROBE_SCRIPT, parse_probe_output, probe_argv

HEADER = set(
    "probe_version executable python_version implementation prefix base_prefix is_venv is_conda venv_creator include_dir env "
    "level torch site_packages mapped_libraries cudnn libcuda toolchain triton cuda_driver distributions duration_ms".split()
)
KEYS = {"light": HEADER, "full": HEADER | {"limits", "compile_caches", "frameworks"}}
#: top-level modules of the GPU frameworks (and what they pull in) the light level must never import
FRAMEWORK_MODULES = (
    "torch",
    "triton",
    "numpy",
    "tensorflow",
    "jax",
    "jaxlib",
    "cupy",
    "onnxruntime",
    "ctranslate2",
    "paddle",
    "tensorrt",
)

#: stdlib names added after 3.6 (module attributes, str methods, keyword arguments), with the version
NEWER_NAMES = {
    "capture_output": "3.7",
    "text": "3.7",  # subprocess.run(text=...)
    "nullcontext": "3.7",
    "isascii": "3.7",
    "fromisoformat": "3.7",
    "time_ns": "3.7",
    "monotonic_ns": "3.7",
    "perf_counter_ns": "3.7",
    "register_at_fork": "3.7",
    "removeprefix": "3.9",
    "removesuffix": "3.9",
    "cached_property": "3.8",
    "prod": "3.8",
    "shlex_join": "3.8",
    "topological_sort": "3.9",
}
NEWER_MODULES = {
    "importlib.metadata": "3.8",
    "importlib.resources": "3.7",
    "contextvars": "3.7",
    "dataclasses": "3.7",
    "graphlib": "3.9",
    "zoneinfo": "3.9",
    "tomllib": "3.11",
}


def too_new(source: str) -> list[str]:
    """What in ``source`` an interpreter older than 3.7 rejects: syntax the 3.6 grammar refuses
    (walrus, ``f"{x=}"``, positional-only parameters...), ``from __future__ import annotations``,
    imports of 3.7+ modules, and the 3.7+ stdlib names of :data:`NEWER_NAMES`."""
    try:
        tree = ast.parse(source, feature_version=(3, 6))
    except SyntaxError as exc:
        return [f"syntax: {exc.msg} (line {exc.lineno})"]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.module == "__future__" and any(a.name == "annotations" for a in node.names):
                found.append("from __future__ import annotations (3.7)")
            for a in node.names:
                full = f"{node.module}.{a.name}"
                for mod in (node.module or "", full):
                    if mod in NEWER_MODULES:
                        found.append(f"import {mod} ({NEWER_MODULES[mod]})")
        elif isinstance(node, ast.Import):
            found += [f"import {a.name} ({NEWER_MODULES[a.name]})" for a in node.names if a.name in NEWER_MODULES]
        elif isinstance(node, ast.Attribute) and node.attr in NEWER_NAMES:
            found.append(f".{node.attr} ({NEWER_NAMES[node.attr]})")
        elif isinstance(node, ast.keyword) and node.arg in NEWER_NAMES:
            found.append(f"{node.arg}= ({NEWER_NAMES[node.arg]})")
    return found


@pytest.mark.parametrize("script", [PROBE_SCRIPT, LISTER_SCRIPT], ids=["probe", "kernelspec-lister"])
def test_the_probe_is_python_3_6_source(script):
    """Both scripts run in the target's (or Jupyter server's) interpreter, which can be old."""
    assert too_new(script.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "snippet,offence",
    [
        ("if (n := 1):\n    pass\n", "syntax"),
        ('x = 1\ny = f"{x=}"\n', "syntax"),
        ("def f(a, /):\n    return a\n", "syntax"),
        ("from __future__ import annotations\n", "from __future__ import annotations"),
        ("import subprocess\nsubprocess.run(['x'], capture_output=True)\n", "capture_output="),
        ("from importlib import metadata\n", "import importlib.metadata"),
        ("import dataclasses\n", "import dataclasses"),
        ("p = 'a.so (deleted)'.removesuffix(' (deleted)')\n", ".removesuffix"),
    ],
)
def test_the_grammar_check_catches_what_3_6_rejects(snippet, offence):
    found = too_new(snippet)
    assert found and found[0].startswith(offence), found
    # the 3.6 twin of the same intent passes
    assert too_new("import subprocess\nsubprocess.run(['x'], stdout=subprocess.PIPE)\n") == []


def _run(argv, code=None):
    """Run the probe in a child (``code``: a wrapper run instead of the script) and parse both documents."""
    proc = subprocess.run(
        argv if code is None else [sys.executable, "-c", code], capture_output=True, text=True, timeout=180
    )
    assert MARKER in proc.stdout, proc.stderr
    start = proc.stdout.rfind(MARKER, 0, proc.stdout.rfind(MARKER))
    raw = json.loads(proc.stdout[start + len(MARKER) : proc.stdout.rfind(MARKER)])
    return raw, parse_probe_output(proc.stdout), proc


@pytest.mark.parametrize("level", LEVELS)
def test_each_level_prints_its_keys_and_decodes(level):
    raw, facts, _proc = _run(probe_argv(sys.executable, level))
    assert set(raw) == KEYS[level]
    assert isinstance(facts, ProbeFacts) and facts.level == level and facts.executable == sys.executable
    assert raw["cuda_driver"] and "unavailable" not in raw["cuda_driver"]  # the driver API section ran at both
    if level == "full":  # the real torch 2.13.0 CPU build of the test venv, imported
        assert facts.torch.import_tried and facts.torch.import_ok and facts.torch.version
        (fw,) = facts.frameworks  # torch's own libraries, tested in this process after its import
        assert fw.name == "torch" and fw.loads and all(r.ok and "/torch/lib/" in r.path for r in fw.loads)
    else:
        assert not facts.torch.import_tried and facts.torch.version == raw["torch"]["version"]


_MODULES = (
    "import json, runpy, sys\n"
    "sys.argv = [{script!r}] + {args!r}\n"
    "runpy.run_path({script!r}, run_name='__main__')\n"
    "sys.stdout.write('\\n@@modules@@' + json.dumps(sorted(sys.modules)) + '@@modules@@\\n')\n"
)


def _modules_after(level):
    code = _MODULES.format(script=str(PROBE_SCRIPT), args=probe_argv("python", level)[2:])
    raw, _facts, proc = _run([], code)
    text = proc.stdout
    return raw, set(json.loads(text.split("@@modules@@")[1]))


def test_the_light_level_imports_no_framework_and_the_full_level_does():
    pytest.importorskip("torch")
    raw, modules = _modules_after("light")
    assert raw["level"] == "light" and raw["torch"]["installed"]
    assert not {m.split(".")[0] for m in modules} & set(FRAMEWORK_MODULES), sorted(modules)
    assert "email" not in modules  # distribution metadata is read as text (importlib.metadata imports email)
    raw, modules = _modules_after("full")
    assert raw["level"] == "full" and "torch" in modules


def test_an_unknown_level_is_a_one_line_error():
    proc = subprocess.run(
        [sys.executable, str(PROBE_SCRIPT), "--level", "heavy"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode != 0 and MARKER not in proc.stdout
    assert proc.stderr.strip().splitlines() == ["gpudoctor probe: unknown level 'heavy' (known: light, full)"]


def test_inside_a_kernel_main_runs_the_full_level_with_the_driver_section():
    """A Jupyter kernel executes the source without its file and with the kernel's own argv."""
    code = "import sys\nsys.argv = ['ipykernel_launcher.py', '-f', 'kernel-1.json']\n" + probe_code()
    raw, facts, _proc = _run([], code)
    assert facts.level == "full" and facts.torch.import_tried
    assert "unavailable" not in raw["cuda_driver"]


def test_the_working_directory_shadows_nothing_and_nothing_is_written(tmp_path):
    """The loader puts the script's directory first on sys.path (as ``python SCRIPT`` does), not the
    working directory: a ``torch`` folder where gpudoctor is started (a PyTorch checkout) is not
    imported; and the target writes no byte-code next to the script (even where it could)."""
    import os
    import shutil

    pytest.importorskip("torch")
    pkg = tmp_path / "work" / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("import os\nos._exit(3)\n")
    copy = tmp_path / "probe" / "_script.py"
    copy.parent.mkdir()
    shutil.copy(PROBE_SCRIPT, copy)
    argv = [str(copy) if a == str(PROBE_SCRIPT) else a for a in probe_argv(sys.executable, "full")]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=pkg.parent, env=env, timeout=180)
    facts = parse_probe_output(proc.stdout)
    assert facts.torch.import_ok and facts.torch.location != str(pkg)
    assert sorted(p.name for p in copy.parent.iterdir()) == ["_script.py"]


@pytest.mark.parametrize("creator", ["uv", "virtualenv", None])
def test_the_probe_says_what_made_the_venv(tmp_path, creator):
    """``uv venv`` writes ``uv = X.Y.Z`` into pyvenv.cfg and installs no pip: the kernel checks
    then say ``uv pip install``; a plain ``python -m venv`` is the twin."""
    import venv

    venv.EnvBuilder(with_pip=False, symlinks=True).create(tmp_path / "env")
    cfg = tmp_path / "env" / "pyvenv.cfg"
    if creator:
        cfg.write_text(cfg.read_text() + f"{creator} = 1.2.3\n")
    python = str(tmp_path / "env" / "bin" / "python")
    raw, facts, _proc = _run(probe_argv(python, "light"))
    assert raw["venv_creator"] == (creator or "venv") and facts.venv_creator == (creator or "venv")
    host, _facts, _p = _run(probe_argv(sys.executable, "light"))
    assert host["venv_creator"] == ("venv" if sys.prefix != sys.base_prefix else None)
