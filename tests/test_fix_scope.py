"""``gpudoctor fix --scope user|site|global`` edits only that scope's file, for every fix that edits one.

Each scenario puts a file in every scope the tool has (pip: ``/etc/pip.conf``,
``~/.config/pip/pip.conf``, ``$VIRTUAL_ENV/pip.conf``; uv: ``~/.config/uv/uv.toml``,
``/etc/uv/uv.toml``; conda: ``~/.condarc``, ``/etc/conda/.condarc``,
``$CONDA_PREFIX/.condarc``; apt: system only; Jupyter: the user data
directory, an environment's ``share/jupyter``), runs the fix with one scope
and asserts that the files of the other scopes keep their bytes. A scope the
tool does not have is refused, writing nothing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from tests.test_fix_verify import MIRROR, run_fix

from gpudoctor.testing import write_tree

# --------------------------------------------------------------------------- pip

PIP_FILES = {
    "global": "/etc/pip.conf",
    "user": "/home/user/.config/pip/pip.conf",
    "site": "/venv/pip.conf",
}
PIP_TEXT = "[global]\ntimeout = 30\n"


@pytest.mark.parametrize("scope", ["user", "site", "global"])
def test_pip_scope_edits_only_its_file(tmp_path, scope):
    root = write_tree(tmp_path / "r", {**dict.fromkeys(PIP_FILES.values(), PIP_TEXT), "/venv/bin/python": ""})
    out = run_fix(
        root, "pip.index-url", ["pip.config"], {"index-url": MIRROR, "scope": scope}, env={"VIRTUAL_ENV": "/venv"}
    )
    assert [(o.status, o.message) for o in out] == [("applied", "")]
    for s, path in PIP_FILES.items():
        text = (root / path.lstrip("/")).read_text()
        assert (text == PIP_TEXT) is (s != scope), (s, text)
    assert f"index-url = {MIRROR}" in (root / PIP_FILES[scope].lstrip("/")).read_text()


def test_pip_user_scope_leaves_a_broken_global_file_and_says_so(tmp_path):
    broken = "index-url = https://old.example.org/simple\n"  # no section header: pip cannot read it
    root = write_tree(tmp_path / "r", {"/etc/pip.conf": broken})
    out = run_fix(root, "pip.index-url", ["pip.config"], {"index-url": MIRROR, "scope": "user"})
    assert [o.status for o in out] == ["not-fixed"]
    assert out[0].message.startswith("/etc/pip.conf still stops pip (no section header")
    assert (root / "etc/pip.conf").read_text() == broken
    assert out[0].plan is not None and any("not repaired (--scope user)" in n for n in out[0].plan.notes)


def test_pip_without_scope_repairs_the_broken_global_file(tmp_path):
    broken = "index-url = https://old.example.org/simple\n"
    root = write_tree(tmp_path / "r", {"/etc/pip.conf": broken})
    out = run_fix(root, "pip.index-url", ["pip.config"], {"index-url": MIRROR})
    assert [o.status for o in out] == ["applied"]
    assert (root / "etc/pip.conf").read_text() == "[global]\n" + broken  # repaired: the header it lacked
    assert f"index-url = {MIRROR}" in (root / "home/user/.config/pip/pip.conf").read_text()


# --------------------------------------------------------------------------- uv

UV_FILES = {"user": "/home/user/.config/uv/uv.toml", "global": "/etc/uv/uv.toml"}
UV_TEXT = "native-tls = true\n"


@pytest.mark.parametrize("scope", ["user", "global"])
def test_uv_scope_edits_only_its_file(tmp_path, scope):
    root = write_tree(tmp_path / "r", dict.fromkeys(UV_FILES.values(), UV_TEXT))
    out = run_fix(root, "uv.index-url", ["uv.mirror"], {"mirror": MIRROR, "scope": scope})
    assert [(o.status, o.message) for o in out] == [("applied", "")]
    for s, path in UV_FILES.items():
        text = (root / path.lstrip("/")).read_text()
        assert (text == UV_TEXT) is (s != scope), (s, text)


def test_uv_scope_edits_its_file_even_when_another_sets_the_index(tmp_path):
    # the system file sets the default; --scope user writes the user file (which wins), not the system one
    system = '[[index]]\nurl = "https://old.example.org/simple"\ndefault = true\n'
    root = write_tree(tmp_path / "r", {"/etc/uv/uv.toml": system})
    out = run_fix(root, "uv.index-url", ["uv.mirror"], {"mirror": MIRROR, "scope": "user"})
    assert [o.status for o in out] == ["applied"]
    assert (root / "etc/uv/uv.toml").read_text() == system
    assert MIRROR in (root / "home/user/.config/uv/uv.toml").read_text()


def test_uv_site_scope_is_refused(tmp_path):
    root = write_tree(tmp_path / "r", dict.fromkeys(UV_FILES.values(), UV_TEXT))
    out = run_fix(root, "uv.index-url", ["uv.mirror"], {"mirror": MIRROR, "scope": "site"})
    assert [o.status for o in out] == ["refused"]
    assert "uv has no site (per-environment) configuration file" in out[0].message
    assert all((root / p.lstrip("/")).read_text() == UV_TEXT for p in UV_FILES.values())


# --------------------------------------------------------------------------- conda

TUNA = "https://mirrors.tuna.tsinghua.edu.cn/anaconda"
CONDA_FILES = {"user": "/home/user/.condarc", "global": "/etc/conda/.condarc", "site": "/opt/env/.condarc"}
CONDA_TEXT = "channels:\n  - defaults\n"


@pytest.mark.parametrize("scope", ["user", "site", "global"])
def test_conda_scope_edits_only_its_file(tmp_path, scope):
    root = write_tree(tmp_path / "r", dict.fromkeys(CONDA_FILES.values(), CONDA_TEXT))
    out = run_fix(
        root, "conda.channels", ["conda.mirror"], {"mirror": TUNA, "scope": scope}, env={"CONDA_PREFIX": "/opt/env"}
    )
    assert [(o.status, o.message) for o in out] == [("applied", "")]
    for s, path in CONDA_FILES.items():
        text = (root / path.lstrip("/")).read_text()
        assert (text == CONDA_TEXT) is (s != scope), (s, text)
    assert f"  - {TUNA}/pkgs/main\n" in (root / CONDA_FILES[scope].lstrip("/")).read_text()


def test_conda_site_scope_without_an_active_environment_is_refused(tmp_path):
    root = write_tree(tmp_path / "r", {"/home/user/.condarc": CONDA_TEXT})
    out = run_fix(root, "conda.channels", ["conda.mirror"], {"mirror": TUNA, "scope": "site"})
    assert [o.status for o in out] == ["refused"] and "no CONDA_PREFIX" in out[0].message
    assert (root / "home/user/.condarc").read_text() == CONDA_TEXT


# --------------------------------------------------------------------------- apt

DEBIAN = 'ID=debian\nVERSION_ID="12"\nVERSION_CODENAME=bookworm\n'
LIST = "deb http://ftp.debian.org/debian bookworm main\n"


@pytest.mark.parametrize("scope", ["user", "site"])
def test_apt_has_no_user_or_site_scope(tmp_path, scope):
    root = write_tree(tmp_path / "r", {"/etc/os-release": DEBIAN, "/etc/apt/sources.list": LIST})
    out = run_fix(root, "apt.mirror", ["apt.sources"], {"mirror": "https://mirror.example.org/debian", "scope": scope})
    assert [o.status for o in out] == ["refused"]
    assert f"there is no {scope} file to edit" in out[0].message
    assert (root / "etc/apt/sources.list").read_text() == LIST


def test_apt_global_scope_edits_the_system_sources(tmp_path):
    files = {"/etc/os-release": DEBIAN, "/etc/apt/sources.list": LIST, "/etc/ssl/certs/ca-certificates.crt": ""}
    root = write_tree(tmp_path / "r", files)
    out = run_fix(
        root, "apt.mirror", ["apt.sources"], {"mirror": "https://mirror.example.org/debian", "scope": "global"}
    )
    assert [o.status for o in out] == ["applied"]
    assert (root / "etc/apt/sources.list").read_text() == LIST.replace(
        "http://ftp.debian.org/debian", "https://mirror.example.org/debian"
    )


# --------------------------------------------------------------------------- Jupyter (real kernelspecs)


def test_kernelspec_scope_of_a_path():
    from gpudoctor.fixes._kernel_json import kernel_scope, scope_kernels_dir

    data = "/home/u/.local/share/jupyter"
    assert kernel_scope(f"{data}/kernels/a/kernel.json", data) == "user"
    assert kernel_scope("/usr/local/share/jupyter/kernels/a/kernel.json", data) == "global"
    assert kernel_scope("/usr/share/jupyter/kernels/a/kernel.json", data) == "global"
    assert kernel_scope("/opt/env/share/jupyter/kernels/a/kernel.json", data) == "site"
    assert scope_kernels_dir("site", data, "/opt/env") == "/opt/env/share/jupyter/kernels"
    assert scope_kernels_dir("global", data, "/opt/env") == "/usr/local/share/jupyter/kernels"
    assert scope_kernels_dir("user", data, "/opt/env") == f"{data}/kernels"


@pytest.mark.slow
@pytest.mark.parametrize("scope, edited", [("user", False), ("site", True)])
def test_kernel_argv_scope_edits_only_a_kernelspec_of_that_scope(tmp_path, scope, edited):
    from tests.test_fix_cycle_jupyter import ipk, kernel
    from tests.test_fix_cycle_jupyter import run as jupyter_run

    made: list[Path] = []

    def setup(jp: Path) -> None:  # a JUPYTER_PATH kernelspec: an environment's, not the user's
        made.append(kernel(jp, "gone", ipk(str(tmp_path / "no" / "python"))))

    c = jupyter_run(tmp_path, "jupyter.kernel-argv", {"scope": scope}, setup=setup)
    spec = json.loads(made[0].read_text())
    assert (spec["argv"][0] == sys.executable) is edited, (c.refused, spec)
    if not edited:
        assert c.refused and "site-scope kernelspec; --scope user leaves it alone" in c.refused[0]
