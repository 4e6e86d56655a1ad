"""Case 13 end to end on real files: `gpudoctor check` finds the kernel running the wrong Python,
`gpudoctor fix jupyter.kernel-argv` repoints it through the fix engine, jupyter_client (for real)
lists the new argv, and `gpudoctor fix --undo` restores kernel.json byte for byte.

The case's "system Python with the wrong torch" is a bare venv (no torch, no ipykernel) and the
terminal is this test venv (torch 2.13.0, ipykernel): the GPU side of the case is covered by the
facts-fixture tests in test_jupyter.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpudoctor.cli import main

CASE13 = Path(__file__).resolve().parent / "fixtures" / "cases" / "13-kernel-argv-system-python"


def run(capsys, *args):
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out, err = capsys.readouterr()
    return info.value.code, out, err


def listed_argv(env: dict, name: str) -> list:
    code = (
        "import json, sys; from jupyter_client.kernelspec import KernelSpecManager as K; "
        "print(json.dumps(K().get_kernel_spec(sys.argv[1]).argv))"
    )
    out = subprocess.run([sys.executable, "-c", code, name], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.mark.slow
def test_case13_fixed_through_gpudoctor_fix_and_undone_byte_for_byte(tmp_path, isolated_home, monkeypatch, capsys):
    bare = tmp_path / "system-python"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    bare_python = str(bare / "bin" / "python")
    kfile = isolated_home / ".local" / "share" / "jupyter" / "kernels" / "train-venv" / "kernel.json"
    kfile.parent.mkdir(parents=True)
    original = (CASE13 / "kernel.json").read_bytes().replace(b"/usr/bin/python3", bare_python.encode())
    kfile.write_bytes(original)
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX", "JUPYTER_PATH", "JUPYTER_DATA_DIR"):
        monkeypatch.delenv(var, raising=False)
    env = dict(os.environ)

    code, out, _ = run(capsys, "check", "jupyter.kernels", "--format", "json")
    assert code == 1
    doc = json.loads(out)
    finding = [f for f in doc["findings"] if f["target"] == "kernel:train-venv"][0]
    assert finding["status"] == "fail" and bare_python in finding["summary"]
    assert "jupyter.kernel-argv" in finding["fixes"]
    assert listed_argv(env, "train-venv")[0] == bare_python

    # exit 0: written, and the re-run of jupyter.kernels no longer fails
    code, out, err = run(capsys, "fix", "jupyter.kernel-argv", "--set", "kernel=train-venv", "--yes")
    assert code == 0, out + err
    new = json.loads(kfile.read_text())
    assert new["argv"][0] == sys.executable
    assert new["argv"][1:] == json.loads(original)["argv"][1:]
    assert list(new) == list(json.loads(original))  # key order kept
    assert kfile.read_text() == original.decode().replace(bare_python, sys.executable)  # indentation kept
    assert listed_argv(env, "train-venv")[0] == sys.executable  # jupyter_client sees the new argv

    code, out, err = run(capsys, "fix", "--undo")
    assert code == 0, out + err
    assert kfile.read_bytes() == original
    assert listed_argv(env, "train-venv")[0] == bare_python


def _kernel(home: Path, name: str, python: str, one_line: bool = False) -> Path:
    kfile = home / ".local" / "share" / "jupyter" / "kernels" / name / "kernel.json"
    kfile.parent.mkdir(parents=True)
    argv = [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    if one_line:
        text = (
            '{\n "argv": '
            + json.dumps(argv)
            + ',\n "display_name": "'
            + name
            + '",\n "language": "python",\n "env": {"OMP_NUM_THREADS": "4"}\n}\n'
        )
    else:
        text = json.dumps({"argv": argv, "display_name": name, "language": "python"}, indent=1)
    kfile.write_text(text)
    return kfile


@pytest.mark.slow
def test_fix_all_repairs_every_broken_kernel_and_keeps_one_line_arrays(tmp_path, isolated_home, monkeypatch, capsys):
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX", "JUPYTER_PATH", "JUPYTER_DATA_DIR"):
        monkeypatch.delenv(var, raising=False)
    gone = str(tmp_path / "deleted-venv" / "bin" / "python")
    a = _kernel(isolated_home, "alpha", gone)
    b = _kernel(isolated_home, "beta", gone, one_line=True)
    before_b = b.read_text()
    code, out, err = run(capsys, "fix", "--all", "--yes")
    assert code == 0, out + err
    assert json.loads(a.read_text())["argv"][0] == sys.executable
    assert b.read_text() == before_b.replace(gone, sys.executable)  # one plan per kernel.json, form kept
    assert out.count("jupyter.kernel-argv: kernel") == 2


def test_set_python_must_exist_have_ipykernel_and_keys_must_be_known(tmp_path, isolated_home, monkeypatch, capsys):
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX", "JUPYTER_PATH", "JUPYTER_DATA_DIR"):
        monkeypatch.delenv(var, raising=False)
    _kernel(isolated_home, "alpha", str(tmp_path / "gone" / "bin" / "python"))
    code, _, err = run(capsys, "fix", "jupyter.kernel-argv", "--set", "python=/nonexistent/bin/python", "--yes")
    assert code == 2 and "--set python=/nonexistent/bin/python: no such interpreter" in err
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    code, _, err = run(capsys, "fix", "jupyter.kernel-argv", "--set", f"python={bare}/bin/python", "--yes")
    assert code == 2 and f"First run `{bare}/bin/python -m pip install ipykernel`" in err
    code, _, err = run(capsys, "fix", "jupyter.kernel-argv", "--set", "pyhton=/usr/bin/python3", "--yes")
    assert code == 2 and "--set pyhton: no fix reads that option" in err


def test_set_python_of_a_uv_venv_without_ipykernel_names_uvs_installer(tmp_path, isolated_home, monkeypatch, capsys):
    """A venv made by `uv venv` has no pip: the refusal's command is `uv pip install --python`.
    Twin (the test above): a venv made by `python -m venv` gets pip's command."""
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX", "JUPYTER_PATH", "JUPYTER_DATA_DIR"):
        monkeypatch.delenv(var, raising=False)
    _kernel(isolated_home, "alpha", str(tmp_path / "gone" / "bin" / "python"))
    uvenv = tmp_path / "uv env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(uvenv)], check=True)
    with open(uvenv / "pyvenv.cfg", "a") as fh:
        fh.write("uv = 0.5.11\n")
    code, _, err = run(capsys, "fix", "jupyter.kernel-argv", "--set", f"python={uvenv}/bin/python", "--yes")
    assert code == 2 and f"First run `uv pip install --python '{uvenv}/bin/python' ipykernel`" in err, err
