"""The kernelspec lister (``probe/_kernelspecs.py``) against jupyter_client itself.

Real kernelspec trees in temporary ``JUPYTER_PATH``/``JUPYTER_DATA_DIR``/HOME/XDG
dirs; the lister and jupyter_client's own ``KernelSpecManager`` run in separate
processes of the same interpreter with the same environment, and must print the
same document: names, resource dirs, spec dicts, error texts, shadowed copies,
kernel dirs. The "server" interpreter is a ``--without-pip`` venv that sees
this test venv's packages (jupyter_client 8, ipykernel 7, IPython) through a
``.pth`` file, so that no ``python3`` kernelspec sits in its prefix and
ipykernel's built-in spec is used, as on a server whose data files are missing;
a second one sees only jupyter_client and its dependencies (no IPython, no
ipykernel).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from gpudoctor.collect.jupyter import LISTER_MARKER, LISTER_SCRIPT

#: jupyter_client's answer: what the lister printed before it stopped importing jupyter_client
REFERENCE = r"""
import json, os, sys
import jupyter_client
from jupyter_client.kernelspec import KernelSpecManager, _is_kernel_dir
from jupyter_core.paths import jupyter_data_dir
try:
    from ipykernel.kernelspec import RESOURCES
except ImportError:
    RESOURCES = None
ksm = KernelSpecManager()
found = ksm.find_kernel_specs()
specs = []
for name in sorted(found):
    rdir = found[name]
    e = {"name": name, "resource_dir": rdir,
         "builtin": RESOURCES is not None and os.path.abspath(rdir) == os.path.abspath(RESOURCES)}
    try:
        e["spec"] = ksm.get_kernel_spec(name).to_dict()
    except Exception as exc:
        e["error"] = ("%s: %s" % (type(exc).__name__, exc)).strip()
    e["shadowed"] = [os.path.join(k, f) for k in ksm.kernel_dirs if os.path.isdir(k)
                     for f in sorted(os.listdir(k)) if f.lower() == name
                     and _is_kernel_dir(os.path.join(k, f))
                     and os.path.abspath(os.path.join(k, f)) != os.path.abspath(rdir)]
    specs.append(e)
print(json.dumps({"executable": sys.executable, "version": "%d.%d" % sys.version_info[:2],
                  "jupyter_client": jupyter_client.__version__, "data_dir": jupyter_data_dir(),
                  "kernel_dirs": list(ksm.kernel_dirs), "specs": specs}))
"""

#: modules the lister must not import (their import is what it exists to avoid)
HEAVY = ("jupyter_client", "traitlets", "IPython", "ipykernel", "debugpy", "importlib.metadata")


def server_venv(root: Path, packages: tuple[str, ...] = ()) -> str:
    """A venv without pip whose prefix holds no kernelspec, seeing this venv's packages through a
    ``.pth`` file: all of them, or only ``packages`` (names in site-packages, linked into a farm)."""
    site_packages = Path(sysconfig.get_paths()["purelib"])
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    python = root / "venv" / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    seen = site_packages
    if packages:
        seen = root / "farm"
        seen.mkdir()
        for name in packages:
            (seen / name).symlink_to(site_packages / name)
    Path(site, "test-venv-packages.pth").write_text(f"{seen}\n")
    return str(python)


@pytest.fixture(scope="module")
def server_python(tmp_path_factory) -> str:
    """jupyter_client 8, ipykernel 7 and IPython, and no python3 kernelspec in the prefix."""
    return server_venv(tmp_path_factory.mktemp("server"))


#: jupyter_client and what it imports, without IPython and ipykernel
JUPYTER_CLIENT_ONLY = tuple(
    p.name
    for p in Path(sysconfig.get_paths()["purelib"]).iterdir()
    if p.name.split("-")[0] in ("jupyter_client", "jupyter_core", "traitlets", "platformdirs", "dateutil", "zmq")
    or p.name.startswith(("python_dateutil-", "pyzmq", "tornado", "typing_extensions"))
)


def spec(display, argv=("python", "-m", "ipykernel_launcher", "-f", "{connection_file}"), **extra) -> str:
    return json.dumps({"argv": list(argv), "display_name": display, "language": "python", **extra})


def put(kdir: Path, name: str, text: str | bytes | None) -> Path:
    """A kernel directory (with kernel.json unless ``text`` is None) holding a logo."""
    d = kdir / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "logo-32x32.png").write_bytes(b"\x89PNG")
    if isinstance(text, bytes):
        (d / "kernel.json").write_bytes(text)
    elif text is not None:
        (d / "kernel.json").write_text(text, encoding="utf-8")
    return d


def environment(root: Path, **extra) -> dict[str, str]:
    """A clean environment: a temporary HOME and XDG dirs under ``root``, nothing inherited but PATH."""
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_RUNTIME_DIR": str(home / ".run"),
        "JUPYTER_PREFER_ENV_PATH": "0",
    }
    env.update({k: str(v) for k, v in extra.items()})
    return env


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def both(python: str, env: dict[str, str], root: Path) -> tuple[dict, dict]:
    """(the lister's document, jupyter_client's), the lister first, writing nothing under ``root``."""
    before = tree(root)
    proc = subprocess.run(
        [python, "-X", "importtime", str(LISTER_SCRIPT)], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert tree(root) == before  # read only: no ~/.ipython, no data dir created
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert not {m for m in imported if m.split(".")[0] in HEAVY or m in HEAVY}
    out = proc.stdout
    ours = json.loads(out[out.index(LISTER_MARKER) + len(LISTER_MARKER) : out.rindex(LISTER_MARKER)])
    ref = subprocess.run([python, "-c", REFERENCE], env=env, capture_output=True, text=True, timeout=60)
    assert ref.returncode == 0, ref.stderr[-2000:]
    return ours, json.loads(ref.stdout)


def by_name(doc: dict) -> dict[str, dict]:
    return {e["name"]: e for e in doc["specs"]}


@pytest.fixture
def trees(tmp_path):
    """JUPYTER_PATH (two entries) and JUPYTER_DATA_DIR with every kind of entry Jupyter meets."""
    jp1, jp2, data = tmp_path / "jp1" / "kernels", tmp_path / "jp2" / "kernels", tmp_path / "data"
    put(jp1, "Foo", spec("Foo from jp1"))
    put(jp2, "foo", spec("foo from jp2 (shadowed)"))
    put(data / "kernels", "FOO", spec("FOO from the data dir (shadowed)"))
    put(jp2, "Dup", spec("Dup"))
    put(jp2, "dup", spec("dup"))  # two case variants in one dir
    put(jp1, "broken", "{not json")
    put(jp1, "latin1", b'{"display_name": "caf\xe9"}')
    put(jp1, "nokernel", None)
    (jp1 / "afile").write_text("{}")
    put(jp1, "bad name!", spec("listed although jupyter_client warns about the name"))
    put(jp1, "lenient", json.dumps({"argv": "python", "interrupt_mode": "MESSAGE", "unknown_key": 1, "name": "x"}))
    put(jp1, "badtrait", json.dumps({"argv": ["python"], "display_name": 3, "env": [1]}))
    put(jp1, "badenum", json.dumps({"argv": ["python"], "interrupt_mode": None}))
    put(jp1, "notdict", "[1, 2]")
    put(jp1, "withresdir", json.dumps({"argv": ["python"], "resource_dir": "/elsewhere"}))
    put(jp1, "noprov", spec("Remote", metadata={"kernel_provisioner": {"provisioner_name": "no-such-provisioner"}}))
    put(jp1, "localprov", spec("Local", metadata={"kernel_provisioner": {"provisioner_name": "local-provisioner"}}))
    put(jp1, "weirdprov", spec("W", metadata={"kernel_provisioner": ["provisioner_name"]}))
    put(jp1, "ir", spec("R", argv=["R", "--slave", "-f", "{connection_file}"], env={"R_LIBS": "${HOME}/R"}))
    env = environment(tmp_path, JUPYTER_PATH=f"{jp1.parent}{os.pathsep}{jp2.parent}", JUPYTER_DATA_DIR=data)
    home = Path(env["HOME"])
    put(home / ".ipython" / "kernels", "fromipython", spec("from ~/.ipython/kernels"))
    return tmp_path, env, jp1, jp2, data


def test_lister_prints_what_jupyter_client_lists_with_the_builtin_python3(trees, server_python):
    root, env, jp1, jp2, data = trees
    ours, ref = both(server_python, env, root)
    assert ours == ref
    # and the document is the one the test means (not two equal empty lists)
    specs = by_name(ours)
    assert ours["kernel_dirs"][:3] == [str(jp1), str(jp2), str(data / "kernels")]
    assert ours["kernel_dirs"][-1] == str(Path(env["HOME"]) / ".ipython" / "kernels")
    assert specs["foo"]["resource_dir"] == str(jp1 / "Foo")
    assert set(specs["foo"]["shadowed"]) == {str(jp2 / "foo"), str(data / "kernels" / "FOO")}
    assert specs["python3"]["builtin"] is True and specs["python3"]["spec"]["argv"][0] == server_python
    assert specs["bad name!"]["spec"]["display_name"].startswith("listed")
    assert specs["fromipython"]["resource_dir"].endswith("/.ipython/kernels/fromipython")
    assert specs["lenient"]["spec"]["argv"] == ["python"] and specs["lenient"]["spec"]["interrupt_mode"] == "message"
    assert specs["localprov"]["spec"]["metadata"]["kernel_provisioner"]["config"] == {}
    assert {"nokernel", "afile"}.isdisjoint(specs)
    errors = {n: e["error"].split(":")[0] for n, e in specs.items() if "error" in e}
    assert errors == {
        "broken": "JSONDecodeError",
        "latin1": "UnicodeDecodeError",
        "badtrait": "TraitError",
        "badenum": "TraitError",
        "notdict": "TypeError",
        "withresdir": "TypeError",
        "noprov": "NoSuchKernel",
        "weirdprov": "AttributeError",
    }
    assert len(specs["dup"]["shadowed"]) == 1  # the other case variant in the same directory


def test_a_user_python3_spec_wins_over_the_builtin_one(trees, server_python):
    root, env, jp1, _jp2, data = trees
    put(data / "kernels", "Python3", spec("My Python", argv=["/opt/py/bin/python", "-m", "ipykernel_launcher"]))
    ours, ref = both(server_python, env, root)
    assert ours == ref
    py3 = by_name(ours)["python3"]
    assert py3["builtin"] is False and py3["resource_dir"] == str(data / "kernels" / "Python3")


def test_ipython_dir_from_xdg_config_and_from_ipythondir(tmp_path, server_python):
    env = environment(tmp_path, JUPYTER_PATH=tmp_path / "none")
    put(Path(env["XDG_CONFIG_HOME"]) / "ipython" / "kernels", "xdgkernel", spec("from XDG_CONFIG_HOME/ipython"))
    ours, ref = both(server_python, env, tmp_path)
    assert ours == ref and "xdgkernel" in by_name(ours)
    put(Path(env["HOME"]) / ".ipython" / "kernels", "homekernel", spec("from ~/.ipython"))  # wins once it exists
    ours, ref = both(server_python, env, tmp_path)
    assert ours == ref and "homekernel" in by_name(ours) and "xdgkernel" not in by_name(ours)
    ipdir = tmp_path / "ipdir"
    put(ipdir / "kernels", "ipdirkernel", spec("from IPYTHONDIR"))
    ours, ref = both(server_python, dict(env, IPYTHONDIR=str(ipdir)), tmp_path)
    assert ours == ref and "ipdirkernel" in by_name(ours) and "xdgkernel" not in by_name(ours)


def test_an_unregistered_default_provisioner_refuses_every_kernel(trees, server_python):
    root, env, *_ = trees
    ours, ref = both(server_python, dict(env, JUPYTER_DEFAULT_PROVISIONER_NAME="nowhere-provisioner"), root)
    assert ours == ref
    assert [e["name"] for e in ours["specs"] if "error" not in e] == ["localprov"]  # names its provisioner
    assert by_name(ours)["python3"]["error"] == "NoSuchKernel: No such kernel named python3"


def test_the_test_venv_itself_finds_ipykernels_spec_in_its_prefix(tmp_path, python):
    env = environment(tmp_path, JUPYTER_PREFER_ENV_PATH="1")
    ours, ref = both(python, env, tmp_path)
    assert ours == ref
    py3 = by_name(ours)["python3"]
    assert py3["builtin"] is False and py3["resource_dir"].startswith(sys.prefix)
    assert ours["kernel_dirs"][0] == os.path.join(sys.prefix, "share", "jupyter", "kernels")


def test_without_jupyter_client_the_lister_fails_like_the_import(tmp_path):
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    proc = subprocess.run(
        [str(bare / "bin" / "python"), str(LISTER_SCRIPT)], env=environment(tmp_path), capture_output=True, text=True
    )
    assert proc.returncode != 0 and LISTER_MARKER not in proc.stdout
    assert proc.stderr.strip().splitlines()[-1] == "ModuleNotFoundError: No module named 'jupyter_client'"


def test_a_server_without_ipython_and_ipykernel(trees):
    """No built-in python3 and no ~/.ipython/kernels (jupyter_client adds it only when IPython imports)."""
    root, env, *_ = trees
    python = server_venv(root / "server", JUPYTER_CLIENT_ONLY)
    ours, ref = both(python, env, root)
    assert ours == ref
    assert "python3" not in by_name(ours) and "fromipython" not in by_name(ours) and "foo" in by_name(ours)
    assert not any(".ipython" in d for d in ours["kernel_dirs"])


def test_links_fifos_and_odd_kernel_json_as_jupyter_client(tmp_path, server_python):
    """A kernel dir reached through a symlink, a kernel.json that is a symlink, a directory or a FIFO
    (never opened), dangling and looping links, a non-ASCII name with a space, and JSON nested past
    the recursion limit: listed, skipped or failed as jupyter_client does."""
    kdir = tmp_path / "jp" / "kernels"
    put(kdir, "real", spec("Real"))
    (kdir / "linked").symlink_to("real")
    put(kdir, "jsonlink", None)
    (kdir / "jsonlink" / "kernel.json").symlink_to("../real/kernel.json")
    (put(kdir, "dirjson", None) / "kernel.json").mkdir()
    os.mkfifo(put(kdir, "fifojson", None) / "kernel.json")
    (kdir / "dangling").symlink_to(tmp_path / "nowhere")
    (kdir / "loop1").symlink_to("loop2")
    (kdir / "loop2").symlink_to("loop1")
    put(kdir, "Odd Name ü", spec("Odd"))
    put(kdir, "deep", "[" * 100000 + "]" * 100000)
    env = environment(tmp_path, JUPYTER_PATH=kdir.parent, JUPYTER_DATA_DIR=tmp_path / "data")
    ours, ref = both(server_python, env, tmp_path)
    assert ours == ref
    specs = by_name(ours)
    assert {"dirjson", "fifojson", "dangling", "loop1", "loop2"}.isdisjoint(specs)
    assert specs["linked"]["spec"]["display_name"] == specs["jsonlink"]["spec"]["display_name"] == "Real"
    assert specs["odd name ü"]["spec"]["display_name"] == "Odd"
    assert specs["deep"]["error"].startswith("RecursionError")


def test_a_server_without_jupyter_core_fails_in_one_line(tmp_path):
    """jupyter_client importable but jupyter_core missing (a broken server environment): the lister
    exits non-zero and its last stderr line names the module, which the collector reports."""
    from gpudoctor.collect.jupyter import _run_lister
    from gpudoctor.system import System

    python = server_venv(tmp_path / "server", tuple(p for p in JUPYTER_CLIENT_ONLY if not p.startswith("jupyter_core")))
    env = environment(tmp_path)
    proc = subprocess.run([python, str(LISTER_SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and LISTER_MARKER not in proc.stdout
    assert proc.stderr.strip().splitlines()[-1] == "ModuleNotFoundError: No module named 'jupyter_core'"
    reason = _run_lister(System(env=env, home=env["HOME"]), python)
    assert (
        reason
        == f"{python} could not list kernelspecs (exit status 1): ModuleNotFoundError: No module named 'jupyter_core'"
    )


@pytest.mark.parametrize(
    ("header", "registered"),
    [("[jupyter_client.kernel_provisioners]", True), ("[ jupyter_client.kernel_provisioners ]", False)],
)
def test_a_provisioner_counts_when_its_entry_point_group_is_spelt_exactly(tmp_path, server_python, header, registered):
    """importlib.metadata (what jupyter_client asks) takes the group between the brackets as written:
    a header with spaces names another group, so the kernel that wants that provisioner is refused.
    Twin: the exact header registers it."""
    site = tmp_path / "site"
    info = site / "myprov-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: myprov\nVersion: 1.0\n\n")
    (info / "entry_points.txt").write_text(f"{header}\nmy-provisioner = jupyter_client.provisioning:LocalProvisioner\n")
    kdir = tmp_path / "jp" / "kernels"
    put(kdir, "remote", spec("Remote", metadata={"kernel_provisioner": {"provisioner_name": "my-provisioner"}}))
    env = environment(tmp_path, JUPYTER_PATH=kdir.parent, JUPYTER_DATA_DIR=tmp_path / "data", PYTHONPATH=site)
    ours, ref = both(server_python, env, tmp_path)
    assert ours == ref
    assert ("error" not in by_name(ours)["remote"]) is registered
