"""The break-it matrix: broken environments and hostile inputs, each run through the real CLI.

One matrix, one total. Every case asserts the exit code, that no traceback and no secret is
printed or written, that no file changed or was replaced unless the case asked for it (an output
file) or a fix was confirmed, that no child process survives, and that it ended within its
budget (times the machine's load factor: see ``hostile.py``). The cases run concurrently (they
mostly wait on hung children). Marked ``robustness``: its own CI step, run while
``scripts/cpu-burner.py`` keeps every CPU busy; a plain ``pytest`` skips it.

Input classes: fake interpreters and tools, native libraries (gcc), hostile ``--root`` trees,
bad command-line input, hostile plug-ins, signals at awkward moments, editors on hostile files
(issue 10 and before); verdicts, inputs validated up front, ``report merge``, process discipline,
output targets (device nodes made with ``mknod``, FIFOs, sockets, directories, symlinks), pasted
credentials, empty and foreign snapshots, hostile ``explain`` logs (issue 32).
``test_matrix_figures`` sums up; the figures are printed in the terminal summary.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import stat
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

# the shared helpers of tests/ (``_foundation``); no conftest.py here: a second module named
# ``conftest`` would shadow tests/conftest.py for the modules that import from it
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from hostile import FIGURES, PASTED, SECRETS, Case, Ctx, Result, figures, run_matrix

#: its own CI step (`python -m pytest -m robustness`): a plain `pytest` does not pay for it
pytestmark = pytest.mark.robustness

FACTS = Path(__file__).resolve().parents[1] / "fixtures" / "facts"
SNAP = str(FACTS / "case01-driver-470-torch-cu121.json")
CPU_SNAP = str(FACTS / "no-gpu-cpu-torch.json")
IS_ROOT = os.geteuid() == 0
HAS_GCC = shutil.which("gcc") is not None
PY = sys.executable


# --------------------------------------------------------------------------- fake interpreters


def probe_with(body: str, timeout: str = "4"):
    def setup(ctx: Ctx) -> None:
        py = ctx.fake("python", body)
        ctx.argv = ["check", "torch.install", "--offline", "--python", str(py), "--probe-timeout", timeout]

    return setup


INTERPRETERS = [
    Case("python-hangs", probe_with("sleep 300"), (1,), budget_s=30),
    Case("python-segfaults", probe_with("kill -SEGV $$"), (1,), must_contain=("SIGSEGV",)),
    Case("python-aborts-mid-result", probe_with("printf '@@gpudoctor-probe@@{\"x\": '; kill -ABRT $$"), (1,)),
    Case("python-prints-garbage", probe_with("head -c 20000 /dev/urandom; exit 0"), (1,)),
    Case("python-prints-20mb", probe_with("yes QzPrinted07-$HF_TOKEN2 | head -c 20000000; exit 3"), (1,)),
    Case(
        "python-escapes-and-secrets",
        probe_with(
            "printf '\\033]0;pwned\\007\\033[2J HF_TOKEN2=%s https://u:QzPrinted07@h.example.org/ \\n' \"$HF_TOKEN2\" >&2;"
            " exit 1"
        ),
        (1,),
        extra=lambda r, c: _no_escape(r),
    ),
    Case(
        "python-grandchild-holds-pipe",
        lambda c: probe_with(f"sleep 600 &\necho $! >> {c.pids}/grandchild.pid\nexit 0")(c),
        (1,),
        budget_s=20,
        extra=lambda r, c: _not_hung_import(r),
    ),
    Case("python-forged-result", probe_with("echo '@@gpudoctor-probe@@{\"schema\": [1,2]}@@gpudoctor-probe@@'"), (1,)),
    Case(
        "python-deeply-nested-result",
        probe_with(
            "printf '@@gpudoctor-probe@@'; head -c 200000 /dev/zero | tr '\\0' '['; printf '@@gpudoctor-probe@@'"
        ),
        (1,),
    ),
    Case("python-exits-silently", probe_with("exit 0"), (1,)),
    Case(
        "python-is-a-binary-blob",
        lambda c: (
            c.write("bin/python", b"\x7fELF\x00garbage", 0o755),
            c.argv.extend(["check", "torch.install", "--offline", "--python", str(c.bin / "python")]),
        ),
        (1,),
    ),
    Case(
        "python-is-a-directory",
        lambda c: ((c.bin / "pydir").mkdir(), c.argv.extend(["check", "--python", str(c.bin / "pydir")])),
        (2,),
    ),
    Case(
        "python-not-executable",
        lambda c: (
            c.write("bin/pyfile", "#!/bin/sh\n", 0o644),
            c.argv.extend(["check", "--python", str(c.bin / "pyfile")]),
        ),
        (2,),
    ),
]


def _no_escape(r: Result) -> None:
    assert "\x1b" not in r.text and "\x07" not in r.text


def _not_hung_import(r: Result) -> None:
    # the grandchild sleeps 600 s: ending within the (load-scaled) budget is not waiting for it
    assert "failed (exit status 0): the probe printed no result document" in r.text and r.wall_s < r.budget_s


# --------------------------------------------------------------------------- fake tools on PATH


def tool(name: str, body: str):
    def setup(ctx: Ctx) -> None:
        ctx.fake(name, body)
        quiet = ctx.fake("quiet-python", "exit 0")
        ctx.argv = ["check", "cuda", "--offline", "--python", str(quiet), "--probe-timeout", "3"]

    return setup


TOOLS = [
    Case("ldconfig-hangs", tool("ldconfig", "sleep 300"), (0, 1), budget_s=60),
    Case("ldconfig-segfaults", tool("ldconfig", "kill -SEGV $$"), (0, 1)),
    Case("ldconfig-garbage", tool("ldconfig", "head -c 100000 /dev/urandom"), (0, 1)),
    Case("nvidia-smi-hangs", tool("nvidia-smi", "sleep 300"), (0, 1), budget_s=60),
    Case(
        "nvidia-smi-garbage-and-secrets",
        tool("nvidia-smi", 'echo "HF_TOKEN2=$HF_TOKEN2"; head -c 5000 /dev/urandom'),
        (0, 1),
    ),
]


# --------------------------------------------------------------------------- native libraries (gcc)


def native(constructor: str):
    def setup(ctx: Ctx) -> None:
        lib = ctx.gcc_lib("libcuda.so.1", constructor)
        torch = ctx.dir / "pkgs" / "torch"
        torch.mkdir(parents=True)
        (torch / "__init__.py").write_text(f"import ctypes\nctypes.CDLL({str(lib)!r})\n__version__ = '2.13.0'\n")
        ctx.env["PYTHONPATH"] = str(ctx.dir / "pkgs")
        ctx.env["LD_LIBRARY_PATH"] = str(lib.parent)
        # torch.install only: NVML moves out of the doctor's process separately (issue 10 item 1)
        ctx.argv = ["check", "torch.install", "--offline", "--python", PY, "--probe-timeout", "6"]

    return setup


NATIVE = (
    [
        Case("libcuda-constructor-segfaults", native("raise(SIGSEGV);"), (1,), budget_s=60),
        Case("libcuda-constructor-sleeps", native("sleep(300);"), (1,), budget_s=60),
        Case(
            "libcuda-constructor-prints-secret",
            native('fprintf(stderr, "token=%s\\n", getenv("HF_TOKEN2")); abort();'),
            (1,),
            budget_s=60,
        ),
    ]
    if HAS_GCC
    else []
)


# --------------------------------------------------------------------------- hostile --root trees


def root_with(
    files: dict, links: dict = (), extra_argv=("check", "--offline", "pip", "apt", "conda", "uv", "dataloader")
):
    def setup(ctx: Ctx) -> None:
        ctx.write("host/secret.conf", "[global]\nindex-url = https://u:QzHostSecret06@leak.example.org/simple\n")
        for rel, content in files.items():
            if content == "FIFO":
                p = ctx.root / rel.lstrip("/")
                p.parent.mkdir(parents=True, exist_ok=True)
                os.mkfifo(p)
            elif content == "DIR":
                (ctx.root / rel.lstrip("/")).mkdir(parents=True, exist_ok=True)
            else:
                ctx.write("root" + rel, content)
        for rel, target in dict(links).items():
            p = ctx.root / rel.lstrip("/")
            p.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target.replace("{host}", str(ctx.host)), p)
        (ctx.root / "usr").mkdir(exist_ok=True)
        ctx.write("root/etc/os-release", 'ID=debian\nVERSION_ID="12"\nVERSION_CODENAME=bookworm\n')
        ctx.argv = [*extra_argv, "--root", str(ctx.root)]

    return setup


def _no_host_secret(r: Result) -> None:
    assert "leak.example.org" not in r.text


ROOTS = [
    Case(
        "root-absolute-links-to-host",
        root_with(
            {},
            {
                "/etc/pip.conf": "{host}/secret.conf",
                "/home/root/.condarc": "{host}/secret.conf",
                "/etc/apt/sources.list": "{host}/secret.conf",
            },
        ),
        (0, 1),
        extra=lambda r, c: _no_host_secret(r),
    ),
    Case(
        "root-dotdot-links-escape",
        root_with(
            {},
            {
                "/etc/pip.conf": "../../../../../../../../host/secret.conf",
                "/etc/xdg/pip/pip.conf": "../../../../host/secret.conf",
            },
        ),
        (0, 1),
        extra=lambda r, c: _no_host_secret(r),
    ),
    Case(
        "root-directory-link-to-host",
        root_with({}, {"/etc/apt": "{host}"}),
        (0, 1),
        extra=lambda r, c: _no_host_secret(r),
    ),
    Case(
        "root-symlink-loops",
        root_with(
            {},
            {
                "/etc/pip.conf": "/etc/pip.conf",
                "/etc/apt/sources.list": "loop2",
                "/etc/apt/loop2": "/etc/apt/sources.list",
                "/etc/apt/sources.list.d": "/etc/apt/sources.list.d/x",
            },
        ),
        (0, 1),
        must_contain=("root.symlinks",),
    ),
    Case(
        "root-fifo-config-files",
        root_with({"/etc/pip.conf": "FIFO", "/etc/apt/sources.list": "FIFO", "/etc/os-release": "ID=debian\n"}),
        (0, 1),
        budget_s=30,
    ),
    Case("root-pip-conf-is-directory", root_with({"/etc/pip.conf": "DIR"}), (0, 1)),
    Case("root-binary-pip-conf", root_with({"/etc/pip.conf": b"\x00\x01\xff\xfe" * 1000}), (0, 1)),
    Case(
        "root-huge-one-line-pip-conf",
        root_with({"/etc/pip.conf": "[global]\nindex-url = https://m.example.org/" + "a" * 1_000_000 + "\n"}),
        (0, 1),
    ),
    Case(
        "root-1000-sources-files",
        lambda c: (
            root_with({})(c),
            [
                c.write(f"root/etc/apt/sources.list.d/s{i}.list", "deb http://ftp.debian.org/debian bookworm main\n")
                for i in range(1000)
            ],
        ),
        (0, 1),
        budget_s=60,
    ),
    Case(
        "root-malformed-deb822",
        root_with({"/etc/apt/sources.list.d/d.sources": "Types: deb\nURIs:\n  \n:::\nSuites bookworm\n\x00\n"}),
        (0, 1),
    ),
    Case(
        "root-10k-line-sources-list",
        root_with({"/etc/apt/sources.list": "deb http://ftp.debian.org/debian bookworm main\n" * 10_000}),
        (0, 1),
    ),
    Case(
        "root-yaml-alias-bomb-condarc",
        root_with(
            {
                "/home/root/.condarc": "a: &a [x, x, x, x, x, x, x, x, x]\n"
                "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
                "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
                "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
                "channels: [*f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
            }
        ),
        (0, 1),
        budget_s=30,
    ),
    Case(
        "root-invalid-condarc-and-uv-toml",
        root_with({"/home/root/.condarc": "channels: [defaults\n", "/home/root/.config/uv/uv.toml": "[[index]\n"}),
        (0, 1),
    ),
    Case("root-nested-yaml", root_with({"/home/root/.condarc": "a: " + "[" * 5000 + "]" * 5000 + "\n"}), (0, 1)),
    Case(
        "root-garbage-proc-and-os-release",
        root_with({"/proc/1/cgroup": b"\xff\x00" * 5000, "/etc/os-release": b"\x00\xff" * 100}),
        (0, 1),
    ),
]


# --------------------------------------------------------------------------- bad command-line input


def args(*argv, stdin: bytes = None, prep=None):
    def setup(ctx: Ctx) -> None:
        if prep:
            prep(ctx)
        ctx.argv = [a.replace("{d}", str(ctx.dir)) for a in argv]
        ctx.stdin = stdin

    return setup


INPUTS = [
    Case(
        "facts-deeply-nested",
        args("check", "--facts", "{d}/f.json", prep=lambda c: c.write("f.json", "[" * 200_000 + "]" * 200_000)),
        (2,),
    ),
    Case(
        "facts-oversized",
        args("check", "--facts", "{d}/f.json", prep=lambda c: open(c.dir / "f.json", "wb").truncate(70 * 1024 * 1024)),
        (2,),
    ),
    Case(
        "facts-binary",
        args("check", "--facts", "{d}/f.json", prep=lambda c: c.write("f.json", b"\x1f\x8b\x08\x00")),
        (2,),
    ),
    Case(
        "facts-symlink-loop",
        args("check", "--facts", "{d}/f.json", prep=lambda c: os.symlink("f.json", c.dir / "f.json")),
        (2,),
    ),
    Case(
        "facts-fifo",
        args("check", "--facts", "{d}/f.json", prep=lambda c: os.mkfifo(c.dir / "f.json")),
        (2,),
        budget_s=20,
    ),
    Case("facts-garbage-stdin", args("check", "--facts", "-", stdin=b"\x00\xffnot json"), (2,)),
    Case(
        "facts-wrong-shape",
        args(
            "check",
            "--facts",
            "{d}/f.json",
            prep=lambda c: c.write("f.json", json.dumps({"schema_version": 1, "domains": {"pip": [1, {"x": None}]}})),
        ),
        (2, 0, 1),
    ),
    Case(
        "facts-with-escapes-and-secrets",
        args(
            "check",
            "--facts",
            "{d}/f.json",
            "-v",
            prep=lambda c: c.write(
                "f.json",
                Path(SNAP).read_text().replace("470.86", "470.86\\u001b[2J\\u001b]0;x\\u0007 HF_TOKEN2=QzPrinted07"),
            ),
        ),
        (1,),
        extra=lambda r, c: _no_escape(r),
    ),
    Case(
        "catalogue-binary",
        args(
            "check", "--offline", "pip", "--catalogue", "{d}/c.toml", prep=lambda c: c.write("c.toml", b"\x00\x01\x02")
        ),
        (2,),
    ),
    Case(
        "catalogue-invalid-toml",
        args(
            "check",
            "--offline",
            "pip",
            "--catalogue",
            "{d}/c.toml",
            prep=lambda c: c.write("c.toml", "[[mirror]\nname="),
        ),
        (2,),
    ),
    Case("dockerfile-is-directory", args("check", "--offline", "apt", "--dockerfile", "{d}"), (2,)),
    Case(
        "ascii-output-encoding",
        args("check", "--facts", SNAP, "-v", prep=lambda c: c.env.update(PYTHONIOENCODING="ascii")),
        (1,),
        extra=lambda r, c: r.out.encode("ascii"),
    ),
]


# --------------------------------------------------------------------------- hostile plug-ins

PLUGIN = """
import os, sys, time
from gpudoctor.model import Check, Fix, Finding, Status

def _exit(facts):
    sys.exit(0)

def _kbd(facts):
    raise KeyboardInterrupt

def _garbage(facts):
    return [{"status": "ok"}, 42]

def _slow(facts):
    time.sleep(120)

def _loud(facts):
    print("\\033[2J HF_TOKEN2=" + os.environ.get("HF_TOKEN2", ""), flush=True)
    print("https://u:QzPrinted07@h.example.org/simple", file=sys.stderr, flush=True)
    return [Finding("hostile.loud", Status.OK, "loud \\033]0;title\\007 token=QzPrinted07")]

def _memory(facts):
    raise MemoryError("plug-in ran out of memory")

EXIT = Check("hostile.exit", "exits", (), _exit)
KBD = Check("hostile.kbd", "raises KeyboardInterrupt", (), _kbd)
GARBAGE = Check("hostile.garbage", "returns garbage", (), _garbage)
SLOW = Check("hostile.slow", "sleeps past its budget", (), _slow)
LOUD = Check("hostile.loud", "prints secrets \\033[31m HF_TOKEN2=QzPrinted07", (), _loud)
MEMORY = Check("hostile.memory", "MemoryError", (), _memory)

def _plan_exit(facts, finding, options):
    raise SystemExit(3)

FIXEXIT = Fix("hostile.fix-exit", "planner exits", ("hostile.exit",), _plan_exit)
"""
BROKEN_IMPORT = "import sys\nsys.exit('plug-in import refuses')\n"


def plugins(*argv, env=None):
    def setup(ctx: Ctx) -> None:
        site = ctx.dir / "plugins"
        ctx.write("plugins/hostile_plugin.py", PLUGIN)
        ctx.write("plugins/broken_plugin.py", BROKEN_IMPORT)
        ctx.write(
            "plugins/hostile_plugin-0.1.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: hostile-plugin\nVersion: 0.1\n",
        )
        ctx.write(
            "plugins/hostile_plugin-0.1.dist-info/entry_points.txt",
            "[gpudoctor.checks]\n"
            + "\n".join(
                f"hostile.{n.lower()} = hostile_plugin:{n}"
                for n in ("EXIT", "KBD", "GARBAGE", "SLOW", "LOUD", "MEMORY")
            )
            + "\nhostile.broken = broken_plugin:CHECK\nhostile.missing = no_such_module_xyz:CHECK\n"
            "\n[gpudoctor.fixes]\nhostile.fix-exit = hostile_plugin:FIXEXIT\n",
        )
        ctx.env["PYTHONPATH"] = str(site)
        ctx.env["GPUDOCTOR_CHECK_TIMEOUT_S"] = "1.5"
        ctx.env.update(env or {})
        ctx.argv = list(argv)

    return setup


PLUGINS = [
    Case(
        "plugins-check-all-hostile",
        plugins("check", "--facts", SNAP, "hostile", "-v"),
        (3,),
        must_contain=(
            "hostile.exit",
            "hostile.kbd",
            "hostile.garbage",
            "hostile.slow",
            "hostile.memory",
            "hostile.broken",
            "hostile.missing",
        ),
    ),
    Case("plugins-with-builtin-checks", plugins("check", "--facts", SNAP), (1,), must_contain=("cuda.driver",)),
    Case("plugins-list", plugins("list"), (0,), extra=lambda r, c: _no_escape(r)),
    Case("plugins-list-json", plugins("list", "--format", "json"), (0,)),
    Case("plugins-fix-planner-exits", plugins("fix", "hostile.fix-exit", "--dry-run", "--offline"), (0, 1, 2, 3)),
    Case(
        "plugins-json-report",
        plugins("check", "--facts", SNAP, "hostile", "--format", "json"),
        (3,),
        extra=lambda r, c: json.loads(r.out),
    ),
]


# --------------------------------------------------------------------------- signals at awkward moments


def hanging_probe(trigger="python.pid"):
    def setup(ctx: Ctx) -> None:
        py = ctx.fake("python", f"sleep 300 &\necho $! >> {ctx.pids}/python-child.pid\nwait")
        ctx.argv = ["check", "torch.install", "--offline", "--python", str(py), "--probe-timeout", "60"]

    return setup


def slow_plugin_import(ctx: Ctx) -> None:
    ctx.write(
        "plugins/slow_plugin.py",
        f"import os, time\nopen('{ctx.pids}/import.pid', 'a').write(str(os.getpid()))\ntime.sleep(60)\n",
    )
    ctx.write("plugins/slow_plugin-0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: slow-plugin\nVersion: 0.1\n")
    ctx.write("plugins/slow_plugin-0.1.dist-info/entry_points.txt", "[gpudoctor.checks]\nslow.x = slow_plugin:X\n")
    ctx.env["PYTHONPATH"] = str(ctx.dir / "plugins")
    ctx.argv = ["check", "--facts", SNAP]


def fix_under_signal(ctx: Ctx) -> None:
    ctx.write("home/.config/pip/pip.conf", "[global]\nindex-url = https://old.example.org/simple\n")
    quiet = ctx.fake("quiet-python", "exit 0")
    ctx.argv = [
        "fix",
        "pip.index-url",
        "--yes",
        "--offline",
        "--index-url",
        "https://new.example.org/simple",
        "--python",
        str(quiet),
    ]


def _pip_conf_whole(r: Result, ctx: Ctx) -> None:
    text = (ctx.home / ".config/pip/pip.conf").read_text()
    assert text in (
        "[global]\nindex-url = https://old.example.org/simple\n",
        "[global]\nindex-url = https://new.example.org/simple\n",
    )


SIGNALS = [
    Case("sigterm-during-hung-probe", hanging_probe(), (143,), signal_at=(signal.SIGTERM, "python.pid"), budget_s=30),
    Case("sighup-during-hung-probe", hanging_probe(), (129,), signal_at=(signal.SIGHUP, "python.pid"), budget_s=30),
    Case("sigint-during-hung-probe", hanging_probe(), (130,), signal_at=(signal.SIGINT, "python.pid"), budget_s=30),
    Case(
        "sigterm-during-plugin-import",
        slow_plugin_import,
        (143,),
        signal_at=(signal.SIGTERM, "import.pid"),
        budget_s=30,
    ),
    # the signal lands while the journal is being written or right after: either way the file is whole;
    # a run the signal misses ends "not fixed" (1): the matrix's PIP_INDEX_URL still wins over pip.conf
    Case(
        "sigterm-during-fix-write",
        fix_under_signal,
        (1, 143),
        signal_at=(signal.SIGTERM, "home/.local/state/*/journal*"),
        signal_delay_s=0.0,
        budget_s=30,
        fix_confirmed=True,
        extra=_pip_conf_whole,
    ),
]


# --------------------------------------------------------------------------- editors on hostile files


def fix_home(files: dict, *argv, links: dict = ()):
    """A fix on the live system whose user files live in the case's temporary HOME."""

    def setup(ctx: Ctx) -> None:
        ctx.write("host/secret.conf", "[global]\nindex-url = https://u:QzHostSecret06@leak.example.org/simple\n")
        for rel, content in files.items():
            ctx.write("home/" + rel, content)
        for rel, target in dict(links).items():
            p = ctx.home / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target.replace("{host}", str(ctx.host)), p)
        quiet = ctx.fake("quiet-python", "exit 0")
        ctx.argv = ["fix", *argv, "--offline", "--python", str(quiet)]

    return setup


EDITORS = [
    Case(
        "fix-pip-conf-crlf-bom",
        fix_home(
            {".config/pip/pip.conf": "\ufeff[global]\r\ntimeout = 5\r\n"},
            "pip.index-url",
            "--index-url",
            "https://new.example.org/simple",
            "--yes",
            "--scope",
            "user",
        ),
        (0, 1),
        fix_confirmed=True,
        extra=lambda r, c: _crlf_kept(c),
    ),
    Case(
        "fix-uv-inline-array-refused",
        fix_home(
            {".config/uv/uv.toml": 'index = [{url = "https://old.example.org/simple", default = true}]\n'},
            "uv.index-url",
            "--mirror",
            "https://new.example.org/simple",
            "--yes",
        ),
        (1, 2),
        must_contain=("Edit it by hand",),
    ),
    Case(
        "fix-condarc-list-refused",
        fix_home(
            {".condarc": "- defaults\n- conda-forge\n"},
            "conda.channels",
            "--mirror",
            "https://new.example.org",
            "--yes",
        ),
        (1, 2),
        must_contain=("not a mapping",),
    ),
    Case(
        "fix-binary-pip-conf-refused",
        fix_home(
            {".config/pip/pip.conf": b"[global]\nindex-url = x\n\x00\xff"},
            "pip.index-url",
            "--index-url",
            "https://new.example.org/simple",
            "--yes",
            "--scope",
            "user",
        ),
        (1, 2),
    ),
    Case(
        "fix-dangling-link-out-of-home",
        fix_home(
            {},
            "pip.index-url",
            "--index-url",
            "https://new.example.org/simple",
            "--yes",
            "--scope",
            "user",
            links={".config/pip/pip.conf": "{host}/created-by-gpudoctor.conf"},
        ),
        (0, 1, 2),
        fix_confirmed=True,
        extra=lambda r, c: _not_outside(c),
    ),
]


def fix_with_system_uv(system_uv: bytes, *argv):
    """A fix on the live system whose system uv.toml is the case's (``$XDG_CONFIG_DIRS/uv/uv.toml``)."""

    def setup(ctx: Ctx) -> None:
        ctx.write("xdg/uv/uv.toml", system_uv)
        ctx.env["XDG_CONFIG_DIRS"] = str(ctx.dir / "xdg")
        fix_home({}, *argv)(ctx)

    return setup


def _bytes_kept(rel: str, data: bytes) -> Callable[[Result, Ctx], None]:
    def check(r: Result, ctx: Ctx) -> None:
        assert (ctx.dir / rel).read_bytes() == data

    return check


# issue 32 item 8: fixes that do what they say (re-read after writing; formats refused with the reason)
DUP_CONDARC = b"channels:\n  - defaults\nchannels:\n  - conda-forge\n"
LATIN1_UV = '# caf\xe9\nindex-url = "https://old.example.org/simple"\n'.encode("latin-1")
BROKEN_UV = b'[[index]]\nurl = "https://old.example.org/simple\n'
FIX_HONESTY = [
    Case(
        "fix-pip-env-var-still-wins-not-fixed",
        fix_home(
            {".config/pip/pip.conf": "[global]\ntimeout = 5\n"},
            "pip.index-url",
            "--index-url",
            "https://new.example.org/simple",
            "--yes",
            "--scope",
            "user",
        ),
        (1,),
        fix_confirmed=True,
        must_contain=("pip.index-url: not fixed: PIP_INDEX_URL still wins",),
    ),
    Case(
        "fix-uv-broken-system-file-refused",
        fix_with_system_uv(BROKEN_UV, "uv.index-url", "--mirror", "https://new.example.org/simple", "--yes"),
        (1,),
        must_contain=("uv stops on", "nothing was written"),
        extra=_bytes_kept("xdg/uv/uv.toml", BROKEN_UV),
    ),
    Case(
        "fix-uv-site-scope-refused",
        fix_home({}, "uv.index-url", "--mirror", "https://new.example.org/simple", "--yes", "--scope", "site"),
        (1,),
        must_contain=("uv has no site",),
    ),
    Case(
        "fix-condarc-duplicate-key-refused",
        fix_home({".condarc": DUP_CONDARC}, "conda.channels", "--mirror", "https://new.example.org", "--yes"),
        (1,),
        must_contain=("the key `channels` appears 2 times (lines 1, 3)",),
        extra=_bytes_kept("home/.condarc", DUP_CONDARC),
    ),
    Case(
        "fix-uv-latin1-refused",
        fix_home(
            {".config/uv/uv.toml": LATIN1_UV}, "uv.index-url", "--mirror", "https://new.example.org/simple", "--yes"
        ),
        (1,),
        must_contain=("not valid UTF-8 text: a byte at line 1, column 6",),
        extra=_bytes_kept("home/.config/uv/uv.toml", LATIN1_UV),
    ),
    Case(
        "fix-conda-site-scope-without-env-refused",
        fix_home(
            {".condarc": "channels:\n  - defaults\n"},
            "conda.channels",
            "--mirror",
            "https://new.example.org",
            "--yes",
            "--scope",
            "site",
        ),
        (1,),
        must_contain=("no CONDA_PREFIX",),
    ),
]


def _crlf_kept(ctx: Ctx) -> None:
    data = (ctx.home / ".config/pip/pip.conf").read_bytes()
    assert not data.startswith("\ufeff".encode())  # the BOM broke pip's header: the repair removed it
    assert b"\r\n" in data and data.count(b"\r\n") == data.count(b"\n")
    assert b"index-url = https://new.example.org/simple" in data


def _not_outside(ctx: Ctx) -> None:
    assert not (ctx.host / "created-by-gpudoctor.conf").exists()


# =========================================================================== issue 32 classes


def argv(*args: str, env: dict | None = None, files: dict | None = None):
    """A case running ``gpudoctor ARGS`` ({host} in an argument: the case's host/ dir) after writing
    ``files`` (relative to host/) and setting ``env``."""

    def setup(ctx: Ctx) -> None:
        for rel, content in (files or {}).items():
            if content == "FIFO":
                os.mkfifo(ctx.host / rel)
            elif content == "NULLDEV":
                os.mknod(ctx.host / rel, stat.S_IFCHR | 0o666, os.makedev(1, 3))
            else:
                ctx.write("host/" + rel, content if isinstance(content, (str, bytes)) else json.dumps(content))
        ctx.env.update({k: v.replace("{host}", str(ctx.host)) for k, v in (env or {}).items()})
        ctx.env.setdefault("GPUDOCTOR_CONFIG", "")
        ctx.argv = [a.replace("{host}", str(ctx.host)) for a in args]

    return setup


def _first_line_has(word: str):
    def check(r: Result, c: Ctx) -> None:
        assert word in (r.out.splitlines() or [""])[0], r.out[:500]

    return check


# --------------------------------------------------------------------------- verdicts (issue 32 item 4)

VERDICTS = [
    Case(
        "unknown-empty-snapshot",
        argv("check", "--facts", "{host}/s.json", files={"s.json": {"schema_version": 2, "domains": {}}}),
        (4,),
        extra=_first_line_has("UNKNOWN"),
    ),
    Case(
        "unknown-empty-snapshot-json",
        argv(
            "check",
            "--facts",
            "{host}/s.json",
            "--format",
            "json",
            files={"s.json": {"schema_version": 2, "domains": {}}},
        ),
        (4,),
        must_contain=('"status": "unknown"',),
    ),
    Case(
        "unknown-foreign-domains-snapshot",
        argv("check", "--facts", "{host}/s.json", files={"s.json": {"schema_version": 2, "domains": {"martian": {}}}}),
        (2, 4),
    ),
    Case("unknown-foreign-json", argv("check", "--facts", "{host}/s.json", files={"s.json": {"kind": "x"}}), (2,)),
    Case("unknown-selection-not-applicable", argv("check", "--facts", CPU_SNAP, "cuda.context", "cuda.arch"), (4,)),
    Case("judged-twin-is-not-unknown", argv("check", "--facts", CPU_SNAP, "torch.install"), (0,)),
    Case(
        "gate-no-gpu-undeclared",
        argv("gate", "--", "sh", "-c", "touch {host}/job-ran"),
        (1,),
        must_contain=("no GPU is visible", "--require-gpus 0"),
        extra=lambda r, c: _job_not_run(c),
    ),
    Case(
        "gate-no-gpu-declared-flag",
        argv("gate", "--require-gpus", "0"),
        (0,),
        must_contain=("healthy: no GPU visible: a CPU node",),
    ),
    Case(
        "gate-no-gpu-declared-env",
        argv("gate", "--", "true", env={"GPUDOCTOR_REQUIRE_GPUS": "0"}),
        (0,),
        must_contain=("healthy: no GPU visible",),
    ),
    Case(
        "gate-no-gpu-declared-config",
        argv("gate", env={"GPUDOCTOR_CONFIG": "{host}/g.toml"}, files={"g.toml": "[gate]\nrequire-gpus = 0\n"}),
        (0,),
    ),
    Case("gate-no-gpu-json", argv("gate", "--format", "json"), (1,), must_contain=('"healthy": false',)),
    Case("gate-no-gpu-require-1", argv("gate", "--require-gpus", "1"), (1,)),
    Case(
        "gate-cpu-node-hides-nothing",
        argv("gate", "--require-gpus", "0", "--checks", "platform.visibility", env={"CUDA_VISIBLE_DEVICES": ""}),
        (0,),
    ),
]


def _job_not_run(ctx: Ctx) -> None:
    assert not (ctx.host / "job-ran").exists()


# --------------------------------------------------------------------------- item 3: inputs

BAD_NUMBERS = {"nan": "nan", "inf": "inf", "neg": "-1", "huge": "1e400", "word": "soon"}
VALIDATION = (
    [
        Case(f"gate-{opt.strip('-')}-{name}", argv("gate", opt, value, "--", "true"), (2,), must_contain=(opt,))
        for opt in ("--timeout", "--wait", "--interval", "--min-gpu-memory-gib", "--require-gpus")
        for name, value in BAD_NUMBERS.items()
    ]
    + [
        Case(
            f"check-probe-timeout-{name}",
            argv("check", "--probe-timeout", value),
            (2,),
            must_contain=("--probe-timeout",),
        )
        for name, value in BAD_NUMBERS.items()
    ]
    + [
        Case(f"env-{var.lower()}-{value}", argv("gate", "--", "true", env={var: value}), (2,))
        for var, value in (
            ("GPUDOCTOR_WAIT", "nan"),
            ("GPUDOCTOR_TIMEOUT", "inf"),
            ("GPUDOCTOR_INTERVAL", "-3"),
            ("GPUDOCTOR_REQUIRE_GPUS", "many"),
            ("GPUDOCTOR_MIN_GPU_MEMORY_GIB", "nan"),
            ("GPUDOCTOR_CHECK_TIMEOUT_S", "nan"),
            ("GPUDOCTOR_CHECK_TIMEOUT_S", "0"),
            ("GPUDOCTOR_LOOPBACK_ONLY", "maybe"),
            ("GPUDOCTOR_FORMAT", "yaml"),
        )
    ]
    + [
        Case(
            f"config-{n}",
            argv("gate", "--", "true", env={"GPUDOCTOR_CONFIG": "{host}/c.toml"}, files={"c.toml": text}),
            (2,),
            must_contain=("config file", "c.toml"),
        )
        for n, text in enumerate(
            [
                "[gate]\nrequire-gpus = true\n",
                "[gate]\nrequire-gpus = 1.5\n",
                "[gate]\nrequire-gpus = -4\n",
                "[gate]\ntimeout = nan\n",
                "[gate]\ntimeout = inf\n",
                "[gate]\nwait = -inf\n",
                "[gate]\nwait = '30'\n",
                "[gate]\nstrict = 'false'\n",
                "[gate]\nskip = [1]\n",
                "[gate]\nformat = 'yaml'\n",
                "[gate]\nstatus-file = 3\n",
                "probe-timeout = nan\n",
                "[gate]\nno-such-option = 1\n",
                "[nosuch]\nx = 1\n",
                "[gate\n",
            ]
        )
    ]
)


# --------------------------------------------------------------------------- item 7: report merge


def _report(host: str, statuses: dict, machine: str = "m", time: str = "2026-12-01T10:00:00+00:00", **extra):
    doc = {"schema_version": 2, "gpudoctor_version": "x", "hostname": host, "machine_id": machine, "time": time}
    doc["findings"] = [{"check": c, "status": s, "summary": f"{c} {s}"} for c, s in statuses.items()]
    doc.update(extra)
    return doc


GOOD = _report("gpu-ok", {"cuda.context": "ok"}, machine="good")
MERGE = [
    Case(
        "merge-string-false-healthy",
        argv(
            "report",
            "merge",
            "{host}",
            files={"a.json": {"healthy": "false", "checks": {"cuda.context": "fail"}}, "b.json": GOOD},
        ),
        (4,),
        must_contain=("skipped: healthy is str", "gpu-ok"),
    ),
    Case(
        "merge-schema-99",
        argv("report", "merge", "{host}", files={"a.json": {**GOOD, "schema_version": 99}, "b.json": GOOD}),
        (4,),
    ),
    Case(
        "merge-status-garbage",
        argv("report", "merge", "{host}", files={"a.json": _report("x", {"c.d": "maybe"}), "b.json": GOOD}),
        (4,),
    ),
    Case(
        "merge-findings-not-list",
        argv("report", "merge", "{host}", files={"a.json": {**GOOD, "findings": "all ok"}, "b.json": GOOD}),
        (4,),
    ),
    Case(
        "merge-all-bad",
        argv("report", "merge", "{host}", files={"a.json": "{not json", "b.json": b"\x00\xff"}),
        (2,),
    ),
    Case(
        "merge-duplicate-and-superseded",
        argv(
            "report",
            "merge",
            "{host}",
            files={
                "a.json": GOOD,
                "b.json": GOOD,
                "c.json": {
                    **GOOD,
                    "time": "2026-11-30T10:00:00+00:00",
                    "findings": [{"check": "cuda.context", "status": "fail", "summary": "old"}],
                },
            },
        ),
        (0,),
        must_contain=("duplicate of", "superseded by", "1 nodes: 1 healthy"),
    ),
    Case(
        "merge-same-hostname-two-machines",
        argv(
            "report",
            "merge",
            "{host}",
            files={
                "a.json": _report("node", {"c.d": "ok"}, machine="aaaa1111"),
                "b.json": _report("node", {"c.d": "fail"}, machine="bbbb2222"),
            },
        ),
        (1,),
        must_contain=("node [aaaa1111]", "node [bbbb2222]"),
    ),
    Case(
        "merge-escapes-and-secrets-in-fields",
        argv(
            "report",
            "merge",
            "{host}",
            "--wide",
            files={
                "a.json": _report(
                    "gpu\x1b]0;pwned\x07\nfake-row",
                    {"c.d": "fail"},
                    machine="z",
                    findings=[
                        {"check": "c.d", "status": "fail", "summary": "token=" + SECRETS["HF_TOKEN2"] + "\x1b[2J"}
                    ],
                )
            },
        ),
        (1,),
        extra=lambda r, c: _no_control(r),
    ),
    Case(
        "merge-deeply-nested",
        argv("report", "merge", "{host}/a.json", files={"a.json": "[" * 100000 + "]" * 100000}),
        (2,),
    ),
    Case(
        "merge-fifo-given",
        argv("report", "merge", "{host}/f.json", "{host}/b.json", files={"f.json": "FIFO", "b.json": GOOD}),
        (4,),
        budget_s=30,
    ),
    Case(
        "merge-missing-file-and-good",
        argv("report", "merge", "{host}/nope.json", "{host}/b.json", files={"b.json": GOOD}),
        (4,),
    ),
    Case(
        "merge-only-skips-node",
        argv("report", "merge", "{host}", files={"a.json": _report("n", {"c.d": "skip"})}),
        (4,),
    ),
]
if IS_ROOT:
    MERGE.append(
        Case(
            "merge-device-node-given",
            argv("report", "merge", "{host}/dev.json", "{host}/b.json", files={"dev.json": "NULLDEV", "b.json": GOOD}),
            (4,),
            must_contain=("dev.json: skipped",),
        )
    )


def _no_control(r: Result) -> None:
    assert "\x1b" not in r.text and "\x07" not in r.text
    assert not any(line.startswith("fake-row") for line in r.out.splitlines())


# --------------------------------------------------------------------------- item 5: processes


def explain_job(body: str, *flags: str):
    """``explain FLAGS -- job``: ``job`` a fake command (its pid recorded for the survivor check)."""

    def setup(ctx: Ctx) -> None:
        job = ctx.fake("job", body)
        ctx.env["GPUDOCTOR_CONFIG"] = ""
        ctx.argv = ["explain", "--no-check", *flags, "--", str(job)]

    return setup


def gate_job(body: str):
    def setup(ctx: Ctx) -> None:
        job = ctx.fake("job", body)
        ctx.env["GPUDOCTOR_CONFIG"] = ""
        ctx.argv = ["gate", "-q", "--require-gpus", "0", "--", str(job)]

    return setup


def _bg_gone(r: Result, c: Ctx) -> None:
    """The background child (600 s) was not waited for: the run ended within its (load-scaled)
    budget; then end it."""
    assert r.wall_s < r.budget_s, r.wall_s
    for line in (c.dir / "tmp" / "bg.pid").read_text().split():
        try:
            os.kill(int(line), 9)
        except OSError:
            pass


PROCESSES = [
    Case(
        "explain-background-child-holds-pipes",
        explain_job(
            'sleep 600 > /dev/stdout 2>&1 &\necho $! > "$TMPDIR/bg.pid"\necho "CUDA error: out of memory" >&2\nexit 3'
        ),
        (3,),
        budget_s=30,
        extra=_bg_gone,
    ),
    *[
        Case(
            f"explain-forwards-{name}",
            explain_job(f"trap 'exit 42' {name}\nsleep 30 &\nwait"),
            (42,),
            signal_at=(sig, "job.pid"),
            signal_delay_s=0.5,
            budget_s=30,
        )
        for name, sig in (("INT", 2), ("TERM", 15), ("HUP", 1))
    ],
    Case(
        "explain-forwarded-term-kills-untrapping-job",
        explain_job("sleep 30"),
        (143,),
        signal_at=(15, "job.pid"),
        signal_delay_s=0.5,
        budget_s=30,
    ),
    Case(
        "gate-job-sigpipe-default",
        gate_job("yes | head -1 >/dev/null\ngrep SigIgn /proc/self/status"),
        (0,),
        extra=lambda r, c: _no_pipe_ignored(r),
    ),
    Case("gate-job-exit-status-kept", gate_job("exit 7"), (7,)),
]


def _no_pipe_ignored(r: Result) -> None:
    mask = int(r.out.split()[-1], 16)
    assert not mask & (1 << 12) and not mask & (1 << 24), r.out  # SIGPIPE (13), SIGXFSZ (25)
    assert "Broken pipe" not in r.err


# --------------------------------------------------------------------------- output targets (issue 32 item 1)

#: commands that write a file, with {out} for its path
WRITERS = {
    "gate-status-file": ("gate", "--require-gpus", "0", "--status-file", "{out}"),
    "gate-json-o": ("gate", "--require-gpus", "0", "--format", "json", "-o", "{out}"),
    "gate-prometheus-o": ("gate", "--require-gpus", "0", "--format", "prometheus", "-o", "{out}"),
    "check-o": ("check", "--facts", SNAP, "-o", "{out}"),
    "explain-o": ("explain", "{host}/oom.log", "--no-check", "-o", "{out}"),
}
WRITER_CODES = {"gate-status-file": 0, "gate-json-o": 0, "gate-prometheus-o": 0, "check-o": 1, "explain-o": 1}
OOM_LOG = "step 10 loss 0.1\nRuntimeError: CUDA error: out of memory\n"


def _make_target(ctx: Ctx, kind: str) -> None:
    """host/out.json as ``kind``: a device node made with mknod, a FIFO, a socket, a directory, a
    symlink to one of those, to a regular file, or dangling."""
    out = ctx.host / "out.json"
    if kind == "chardev":
        os.mknod(out, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # what /dev/null is
    elif kind == "fifo":
        os.mkfifo(out)
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(out))
        sock.close()
    elif kind == "dir":
        out.mkdir()
    elif kind == "link-to-chardev":
        os.mknod(ctx.host / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        os.symlink("null", out)
    elif kind == "link-to-fifo":
        os.mkfifo(ctx.host / "pipe")
        os.symlink(str(ctx.host / "pipe"), out)
    elif kind == "link-to-file":
        (ctx.host / "target.json").write_text("old\n")
        os.symlink("target.json", out)
    elif kind == "dangling-link":
        os.symlink("made.json", out)
    elif kind == "regular":
        out.write_text("old\n")


def writer(name: str, kind: str):
    def setup(ctx: Ctx) -> None:
        ctx.write("host/oom.log", OOM_LOG)
        _make_target(ctx, kind)
        ctx.env["GPUDOCTOR_CONFIG"] = ""
        ctx.argv = [
            a.replace("{out}", str(ctx.host / "out.json")).replace("{host}", str(ctx.host)) for a in WRITERS[name]
        ]

    return setup


def _still(kind: str):
    def check(r: Result, c: Ctx) -> None:
        out = c.host / "out.json"
        mode = os.lstat(out).st_mode
        expect = {"chardev": stat.S_ISCHR, "fifo": stat.S_ISFIFO, "socket": stat.S_ISSOCK, "dir": stat.S_ISDIR}
        assert expect.get(kind, stat.S_ISLNK)(mode), (kind, oct(mode))
        if kind == "dir":
            assert list(out.iterdir()) == []

    return check


def _written(name: str, path: str):
    def check(r: Result, c: Ctx) -> None:
        text = (c.dir / path).read_text()
        assert text != "old\n" and text.strip(), text[:200]
        if name in ("gate-json-o", "gate-status-file"):
            json.loads(text)
        if "link" in path or (c.host / "out.json").is_symlink():
            assert (c.host / "out.json").is_symlink()  # the link stays, its target was replaced

    return check


REFUSED_KINDS = ["fifo", "socket", "dir", "link-to-fifo"] + (["chardev", "link-to-chardev"] if IS_ROOT else [])
OUTPUTS = [
    Case(
        f"out-{name}-{kind}",
        writer(name, kind),
        (2,),
        must_contain=("not a regular file",),
        budget_s=30,
        extra=_still(kind),
    )
    for name in WRITERS
    for kind in REFUSED_KINDS
] + [
    Case(
        f"out-{name}-{kind}",
        writer(name, kind),
        (WRITER_CODES[name],),
        writes=(path,),
        extra=_written(name, path),
    )
    for name in WRITERS
    for kind, path in (
        ("link-to-file", "host/target.json"),
        ("dangling-link", "host/made.json"),
        ("regular", "host/out.json"),
    )
]


# --------------------------------------------------------------------------- pasted credentials (issue 32 item 2)


def _pasted_line(style: str, token: str) -> str:
    return {
        "flag": f"python train.py --token {token} --lr 3e-4",
        "flag-eq": f"python train.py --api-key={token} --epochs 3",
        "assign": f"export HF_TOKEN={token}",
        "yaml": f"  api_key: {token}",
        "url": f"pip install --index-url https://user:{token}@mirror.example.org/simple torch",
        "bare": f"using credentials {token} for the hub",
        "bearer": f"curl -H 'Authorization: Bearer {token}' https://mirror.example.org/",
        "quoted": f'cmd = "deepspeed train.py --hf_token {token} --zero 3"',
    }[style]


PASTE_STYLES = ["flag", "flag-eq", "assign", "yaml", "url", "bare", "bearer", "quoted"]
PASTED_CASES = (
    [
        Case(
            f"paste-explain-log-{style}-{kind}",
            argv(
                "explain",
                "{host}/run.log",
                "--no-check",
                files={"run.log": _pasted_line(style, PASTED[kind]) + "\n" + OOM_LOG},
            ),
            (1,),
            must_contain=("cuda.error-out-of-memory",),
        )
        for style, kind in zip(PASTE_STYLES, ["flag", "github", "huggingface", "openai", "slack", "aws", "jwt", "flag"])
    ]
    + [
        Case(
            "paste-explain-stdin",
            args(
                "explain",
                "-",
                "--no-check",
                stdin=(
                    _pasted_line("flag-eq", PASTED["jwt"])
                    + "\n"
                    + _pasted_line("bearer", PASTED["github"])
                    + "\n"
                    + OOM_LOG
                ).encode(),
            ),
            (1,),
            must_contain=("cuda.error-out-of-memory",),
        ),
        Case(
            "paste-explain-json",
            argv(
                "explain",
                "{host}/run.log",
                "--no-check",
                "--format",
                "json",
                files={"run.log": _pasted_line("url", PASTED["openai"]) + "\n" + OOM_LOG},
            ),
            (1,),
            extra=lambda r, c: json.loads(r.out),
        ),
        Case(
            "paste-gate-job-argv",
            argv("gate", "--require-gpus", "0", "--", "sh", "-c", "exit 5", "x", "--token", PASTED["flag"]),
            (5,),
        ),
        Case(
            "paste-env-option-value",
            argv("gate", "--", "true", env={"GPUDOCTOR_WAIT": PASTED["github"]}),
            (2,),
            must_contain=("--wait",),
        ),
        Case(
            "paste-config-value",
            argv(
                "gate",
                "--",
                "true",
                env={"GPUDOCTOR_CONFIG": "{host}/c.toml"},
                files={"c.toml": f'[gate]\nwait = "{PASTED["huggingface"]}"\n'},
            ),
            (2,),
            must_contain=("c.toml",),
        ),
        Case(
            "paste-config-unknown-key",
            argv(
                "gate",
                "--",
                "true",
                env={"GPUDOCTOR_CONFIG": "{host}/c.toml"},
                files={"c.toml": f'[gate]\napi-key = "{PASTED["openai"]}"\n'},
            ),
            (2,),
        ),
    ]
    + [
        Case(
            f"paste-snapshot-{fmt}",
            argv(
                "check",
                "--facts",
                "{host}/f.json",
                "-v",
                "--format",
                fmt,
                *(("-o", "{host}/report.out") if fmt == "markdown" else ()),
                files={
                    "f.json": Path(SNAP)
                    .read_text()
                    .replace("470.86", "470.86 --token QzPastedFlagValue08 " + " ".join(list(PASTED.values())[:6]))
                },
            ),
            (1,),
            writes=("host/report.out",) if fmt == "markdown" else (),
        )
        for fmt in ("console", "json", "markdown")
    ]
)


# --------------------------------------------------------------------------- empty and foreign snapshots (item 4)

SNAPSHOTS = [
    Case(f"snapshot-{name}", argv("check", "--facts", "{host}/s.json", files={"s.json": doc}), (2,))
    for name, doc in (
        ("schema-as-string", {"schema_version": "2", "domains": {}}),
        ("null", "null"),
        ("a-list", [1, 2]),
        ("domains-a-list", {"schema_version": 2, "domains": []}),
        ("from-the-future", {"schema_version": 99, "domains": {}}),
        ("a-gate-status-document", {"schema_version": 2, "healthy": True, "checks": {}}),
        ("empty-file", ""),
        ("domain-of-wrong-type", {"schema_version": 2, "domains": {"pip": None, "cuda": "x"}}),
        ("schema-a-float", {"schema_version": 2.5, "domains": {}}),
        ("utf16-bytes", '{"schema_version": 2, "domains": {}}'.encode("utf-16")),
    )
] + [
    Case("snapshot-empty-stdin", args("check", "--facts", "-", stdin=b""), (2,)),
]


# --------------------------------------------------------------------------- hostile explain logs (item 9)

_OOM_KEY = "RuntimeError: CUDA error: out of memory\n"


def _count_said(r: Result, c: Ctx) -> None:
    assert re.search(r"\b5[,.]?000\b", r.text), r.text[-1500:]


LOGS = [
    Case(
        f"log-{name}",
        argv("explain", "{host}/run.log", "--no-check", files={"run.log": data}),
        codes,
        must_contain=must,
    )
    for name, data, codes, must in (
        ("utf16-bom", ("step 1\n" + _OOM_KEY).encode("utf-16"), (1,), ("cuda.error-out-of-memory",)),
        ("utf16-le-no-bom", ("step 1\n" + _OOM_KEY).encode("utf-16-le"), (1,), ("cuda.error-out-of-memory",)),
        (
            "utf16-be-bom",
            b"\xfe\xff" + ("step 1\n" + _OOM_KEY).encode("utf-16-be"),
            (1,),
            ("cuda.error-out-of-memory",),
        ),
        ("10mb-line-key-at-end", "x" * 10_000_000 + " " + _OOM_KEY, (1,), ("cuda.error-out-of-memory",)),
        ("crlf", ("step 1\r\n" + _OOM_KEY).replace("\n", "\r\n"), (1,), ("cuda.error-out-of-memory",)),
        ("binary", b"\x00\xff" * 50_000, (0,), ()),
        ("empty", "", (0,), ()),
        ("nul-bytes-around-key", b"\x00" * 1000 + _OOM_KEY.encode() + b"\x00" * 1000, (1,), ()),
        ("escapes-and-secrets", f"\x1b]0;pwned\x07\x1b[2J HF_TOKEN2={SECRETS['HF_TOKEN2']}\n" + _OOM_KEY, (1,), ()),
        ("invalid-utf8", b"\xc3\x28\xa0\xa1 " + _OOM_KEY.encode(), (1,), ("cuda.error-out-of-memory",)),
    )
] + [
    Case(
        "log-5000-oom-lines",
        argv(
            "explain",
            "{host}/run.log",
            "--no-check",
            files={
                "run.log": "".join(
                    f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {i % 97 + 1}.00 MiB. GPU 0 has a"
                    " total capacity of 23.55 GiB of which 1.02 GiB is free.\n"
                    for i in range(5000)
                )
            },
        ),
        (1,),
        extra=_count_said,
    ),
    Case("log-is-a-directory", argv("explain", "{host}", "--no-check"), (2,)),
    Case("log-missing", argv("explain", "{host}/nope.log", "--no-check"), (2,)),
    Case(
        "log-symlink-loop",
        lambda c: (os.symlink("loop.log", c.host / "loop.log"), argv("explain", "{host}/loop.log", "--no-check")(c)),
        (2,),
    ),
    Case("log-stdin-garbage", args("explain", "-", "--no-check", stdin=b"\x00\xff" * 1000 + _OOM_KEY.encode()), (1,)),
]
for case in LOGS:
    if case.id == "log-escapes-and-secrets":
        case.extra = lambda r, c: _no_escape(r)


# --------------------------------------------------------------------------- plug-ins that fight the process (item 5)

FIGHTER = """
import os, sys, time
from gpudoctor.model import Check, Finding, Status

MODE = os.environ.get("FIGHT", "")
if MODE == "import-print":
    os.write(1, b"IMPORT GARBAGE {{{ ghp_QzPastedGithub0123456789abcdefghij\\n")
if MODE == "import-exit":
    os._exit(0)
if MODE == "import-hang":
    time.sleep(600)

def _evaluate(facts):
    if MODE == "eval-fork":
        pid = os.fork()
        if pid == 0:
            open(os.environ["PIDS"] + "/forked.pid", "a").write(str(os.getpid()) + "\\n")
            time.sleep(30)
            os._exit(0)
    if MODE == "eval-print":
        os.write(1, b"RAW GARBAGE {{{\\n")
        print("printed HF_TOKEN2=" + os.environ.get("HF_TOKEN2", ""))
    if MODE == "eval-exit":
        os._exit(0)
    return [Finding("fighter.x", Status.FAIL, "the plug-in's own failure")]

X = Check("fighter.x", "a plug-in that fights the process", (), _evaluate)
"""


def fighter(mode: str, *argv_: str):
    def setup(ctx: Ctx) -> None:
        ctx.write("plugins/fighter.py", FIGHTER)
        ctx.write("plugins/fighter-0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: fighter\nVersion: 0.1\n")
        ctx.write("plugins/fighter-0.1.dist-info/entry_points.txt", "[gpudoctor.checks]\nfighter.x = fighter:X\n")
        ctx.env.update(PYTHONPATH=str(ctx.dir / "plugins"), FIGHT=mode, PIDS=str(ctx.pids), GPUDOCTOR_CONFIG="")
        ctx.argv = list(argv_)

    return setup


def _json_out(r: Result, c: Ctx) -> None:
    json.loads(r.out)


FIGHTERS = [
    Case(
        "fight-eval-fork",
        fighter("eval-fork", "check", "--facts", SNAP, "fighter", "--format", "json"),
        (1,),
        extra=_json_out,
    ),
    Case("fight-eval-fork-gate", fighter("eval-fork", "gate", "--require-gpus", "0", "--checks", "fighter.x"), (1,)),
    Case("fight-eval-print-text", fighter("eval-print", "check", "--facts", SNAP, "fighter"), (1,)),
]
#: what a plug-in does to the process is contained (issue 32 item 5, gpudoctor.plugin_guard): its
#: os._exit is an error finding (exit 3 in check, "not healthy" in the gate), its raw writes to
#: stdout go to stderr redacted (JSON stays JSON), an import that hangs is abandoned after the
#: check budget; a plug-in that failed to load cannot be selected by id (exit 2, usage)
FIGHTERS_CONTAINED = [
    Case(
        "fight-eval-print-json",
        fighter("eval-print", "check", "--facts", SNAP, "fighter", "--format", "json"),
        (1,),
        extra=_json_out,
    ),
    Case(
        "fight-import-print-json",
        fighter("import-print", "check", "--facts", SNAP, "fighter", "--format", "json"),
        (1,),
        extra=_json_out,
    ),
    Case("fight-eval-exit", fighter("eval-exit", "check", "--facts", SNAP, "fighter"), (3,)),
    Case("fight-eval-exit-gate", fighter("eval-exit", "gate", "--require-gpus", "0", "--checks", "fighter.x"), (1,)),
    Case("fight-import-exit", fighter("import-exit", "check", "--facts", SNAP, "fighter"), (2,)),
    Case(
        "fight-import-exit-all",
        fighter("import-exit", "check", "--facts", SNAP, "--format", "json"),
        (1, 3),
        extra=_json_out,
    ),
    Case("fight-import-hang", fighter("import-hang", "check", "--facts", SNAP, "fighter"), (2,), budget_s=60),
    Case("fight-import-print-text", fighter("import-print", "check", "--facts", SNAP, "fighter"), (1,)),
]
OPEN_IDS: set[str] = set()  # inputs that still break the process (none now)


CASES = (
    INTERPRETERS
    + TOOLS
    + NATIVE
    + ROOTS
    + INPUTS
    + PLUGINS
    + SIGNALS
    + EDITORS
    + FIX_HONESTY
    + VERDICTS
    + VALIDATION
    + MERGE
    + PROCESSES
    + OUTPUTS
    + PASTED_CASES
    + SNAPSHOTS
    + LOGS
    + FIGHTERS
    + FIGHTERS_CONTAINED
)
assert len({c.id for c in CASES}) == len(CASES), "case ids must be unique"
OPEN_ISSUE = pytest.mark.xfail(
    strict=True,
    reason="issue 32 item 5, open: a plug-in's os._exit, raw stdout writes and import hang reach the process",
)


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    return run_matrix(CASES, tmp_path_factory.mktemp("break-it"), known_open=OPEN_IDS)


def _judge(r: Result) -> None:
    case = r.case
    assert r.rc in case.codes, f"exit {r.rc} not in {case.codes}\nstdout: {r.out[-2000:]}\nstderr: {r.err[-2000:]}"
    assert r.tracebacks == 0, r.text[-3000:]
    assert r.leaked == [], (r.leaked, r.text[-2000:])
    assert not r.hung, f"ran {r.wall_s:.1f} s, budget {r.budget_s:.0f} s"
    assert r.survivors == [], f"child processes survived: {r.survivors}"
    assert r.unexpected_changes == [], f"files changed or replaced: {r.unexpected_changes}"
    for word in case.must_contain:
        assert word in r.text, (word, r.text[-2000:])
    if case.extra:
        case.extra(r, r.ctx)


@pytest.mark.parametrize(
    "case", [pytest.param(c, id=c.id, marks=[OPEN_ISSUE] if c.id in OPEN_IDS else []) for c in CASES]
)
def test_case(matrix, case):
    _judge(matrix[case.id])


def test_matrix_figures(matrix):
    """One total over every input (the known-open plug-in cases counted apart); the session's
    figures are printed in the terminal summary (tests/conftest.py)."""
    results = [r for r in matrix.values() if r.case.id not in OPEN_IDS]
    total = figures(results)
    report = os.environ.get("BREAK_IT_REPORT")
    if report:
        Path(report).write_text(
            json.dumps(
                {
                    "figures": dict(FIGURES),
                    "cases": {
                        r.case.id: {"rc": r.rc, "wall_s": round(r.wall_s, 2), "budget_s": round(r.budget_s)}
                        for r in matrix.values()
                    },
                },
                indent=1,
            )
        )
    assert total["inputs"] >= 150
    assert {k: v for k, v in total.items() if k != "inputs"} == dict.fromkeys(
        ["tracebacks", "hangs", "leaks", "files_corrupted_or_replaced", "wrong_exit_codes"], 0
    )
