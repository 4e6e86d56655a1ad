"""The break-it matrix: broken environments and hostile inputs, each run through the real CLI.

Every case asserts the exit code, that no traceback and no secret is printed, that no file
changed unless a fix was confirmed, that no child process survives, and that it ended within
its budget. The cases run concurrently (they mostly wait on hung children), so the whole
matrix takes well under a minute and a half on two cores. ``test_matrix_figures`` sums up:
inputs tried, tracebacks, hangs past budget, leaks (secrets and surviving processes), files
corrupted.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from pathlib import Path

import pytest

# the shared helpers of tests/ (``_foundation``); no conftest.py here: a second module named
# ``conftest`` would shadow tests/conftest.py for the modules that import from it
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from hostile import Case, Ctx, Result, run_matrix

#: its own CI step (`python -m pytest -m robustness`): a plain `pytest` does not pay for it
pytestmark = pytest.mark.robustness

FACTS = Path(__file__).resolve().parents[1] / "fixtures" / "facts"
SNAP = str(FACTS / "case01-driver-470-torch-cu121.json")
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
        lambda c: probe_with(f"sleep 30 &\necho $! >> {c.pids}/grandchild.pid\nexit 0")(c),
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
    assert "failed (exit status 0): the probe printed no result document" in r.text and r.wall_s < 20


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
    # the signal lands while the journal is being written or right after: either way the file is whole
    Case(
        "sigterm-during-fix-write",
        fix_under_signal,
        (0, 143),
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


def _crlf_kept(ctx: Ctx) -> None:
    data = (ctx.home / ".config/pip/pip.conf").read_bytes()
    assert not data.startswith("\ufeff".encode())  # the BOM broke pip's header: the repair removed it
    assert b"\r\n" in data and data.count(b"\r\n") == data.count(b"\n")
    assert b"index-url = https://new.example.org/simple" in data


def _not_outside(ctx: Ctx) -> None:
    assert not (ctx.host / "created-by-gpudoctor.conf").exists()


CASES = INTERPRETERS + TOOLS + NATIVE + ROOTS + INPUTS + PLUGINS + SIGNALS + EDITORS


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    return run_matrix(CASES, tmp_path_factory.mktemp("break-it"))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(matrix, case):
    r = matrix[case.id]
    assert r.rc in case.codes, f"exit {r.rc} not in {case.codes}\nstdout: {r.out[-2000:]}\nstderr: {r.err[-2000:]}"
    assert r.tracebacks == 0, r.text[-3000:]
    assert r.leaked == [], (r.leaked, r.text[-2000:])
    assert not r.hung, f"ran {r.wall_s:.1f} s, budget {case.budget_s} s"
    assert r.survivors == [], f"child processes survived: {r.survivors}"
    if not case.fix_confirmed:
        assert r.changed == [], f"files changed: {r.changed}"
    for word in case.must_contain:
        assert word in r.text, (word, r.text[-2000:])
    if case.extra:
        case.extra(r, r.ctx)


def test_matrix_figures(matrix, capsys):
    results = list(matrix.values())
    figures = {
        "inputs_tried": len(results),
        "tracebacks": sum(r.tracebacks for r in results),
        "hangs_past_budget": sum(r.hung for r in results),
        "leaks": sum(len(r.leaked) + len(r.survivors) for r in results),
        "files_corrupted": sum(1 for r in results if r.changed and not r.case.fix_confirmed),
        "wrong_exit_codes": sum(1 for r in results if r.rc not in r.case.codes),
    }
    with capsys.disabled():
        print(f"\nbreak-it matrix: {json.dumps(figures)}")
    report = os.environ.get("BREAK_IT_REPORT")
    if report:
        Path(report).write_text(
            json.dumps(
                {"figures": figures, "cases": {r.case.id: {"rc": r.rc, "wall_s": round(r.wall_s, 2)} for r in results}},
                indent=1,
            )
        )
    assert figures["inputs_tried"] >= 40
    assert {k: v for k, v in figures.items() if k != "inputs_tried"} == dict.fromkeys(
        ["tracebacks", "hangs_past_budget", "leaks", "files_corrupted", "wrong_exit_codes"], 0
    )
