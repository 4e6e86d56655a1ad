"""Building blocks of the break-it matrix: cases, fake binaries, gcc libraries, hostile
plug-ins, and the runner that executes every case as a real CLI process (concurrently) and
measures exit code, tracebacks, secrets printed, files changed, hangs and survivors.

Green on a loaded machine: before the cases run, :func:`load_factor` measures how much slower
than its own CPU time a short gpudoctor run is (1 on an idle machine, ~3 with every CPU kept
busy by ``scripts/cpu-burner.py``); every case's budget is multiplied by it, and each run gets
check and collector timeouts raised by it (``GPUDOCTOR_CHECK_TIMEOUT_S``,
``GPUDOCTOR_COLLECT_TIMEOUT_SCALE``), so a busy machine makes runs slower, never wrong."""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import textwrap
import threading
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from _foundation import GPUDOCTOR

#: secrets every case carries in its environment; none may be printed
SECRETS = {
    "HF_TOKEN2": "hf_QzSecretHF0001",
    "NVIDIA_API_KEY_2": "nvapi-QzSecretNV02",
    "MY_SERVICE_AUTH": "QzSecretAuth03",
    "UV_INDEX_PRIVATE_PASSWORD": "QzSecretUv04",
}
URL_SECRET = "QzUrlPass05"
#: credentials as people paste them (bare tokens with well-known prefixes): the cases put them in
#: command lines, logs, snapshots and config values; none may be printed or written
PASTED = {
    "github": "ghp_QzPastedGithub0123456789abcdefghij",
    "huggingface": "hf_QzPastedHuggingFace0123456789abcd",
    "openai": "sk-proj-QzPastedOpenAI0123456789abcdef",
    "slack": "xoxb-123456789012-QzPastedSlack0123",
    "aws": "AKIAQZPASTEDAWS01234",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJRelBhc3RlZEpXVCJ9.QzPastedJwtSignature0123",
    "flag": "QzPastedFlagValue08",
}
ALL_SECRETS = tuple(SECRETS.values()) + (URL_SECRET, "QzHostSecret06", "QzPrinted07") + tuple(PASTED.values())
#: an uncaught traceback starts a line (a traceback kept as -v evidence is indented or inside a JSON string)
TRACEBACK = re.compile(r"(?m)^Traceback \(most recent call last\)")


@dataclass
class Ctx:
    """One case's sandbox: ``dir`` holds home/, bin/ (first on PATH), root/, host/, pids/."""

    dir: Path
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    stdin: bytes | None = None

    @property
    def home(self) -> Path:
        return self.dir / "home"

    @property
    def bin(self) -> Path:
        return self.dir / "bin"

    @property
    def root(self) -> Path:
        return self.dir / "root"

    @property
    def host(self) -> Path:
        return self.dir / "host"

    @property
    def pids(self) -> Path:
        return self.dir / "pids"

    def write(self, rel: str, content, mode: int | None = None) -> Path:
        p = self.dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)
        if mode is not None:
            p.chmod(mode)
        return p

    def fake(self, name: str, body: str, where: str | None = None) -> Path:
        """A shell script that records its pid (for the survivor check), then runs ``body``."""
        path = (self.dir / where) if where else self.bin / name
        script = f"#!/bin/sh\necho $$ >> {self.pids}/{path.name}.pid\n{body}\n"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(script)
        path.chmod(0o755)
        return path

    def gcc_lib(self, name: str, constructor_body: str) -> Path:
        """A shared library built with gcc whose constructor runs ``constructor_body`` (C)."""
        src = self.dir / "c" / f"{name}.c"
        src.parent.mkdir(parents=True, exist_ok=True)
        src.write_text(
            textwrap.dedent(f"""
            #include <signal.h>
            #include <stdio.h>
            #include <stdlib.h>
            #include <unistd.h>
            __attribute__((constructor)) static void init(void) {{
                FILE *f = fopen("{self.pids}/{name}.pid", "a");
                if (f) {{ fprintf(f, "%d\\n", getpid()); fclose(f); }}
                {constructor_body}
            }}
            int nvmlInitWithFlags(unsigned int flags) {{ return 0; }}
            int cuInit(unsigned int flags) {{ return 0; }}
        """)
        )
        out = self.dir / "lib" / name
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(src)], check=True, capture_output=True)
        return out


@dataclass
class Case:
    """One broken environment or hostile input, and what must happen."""

    id: str
    setup: Callable[[Ctx], None]
    codes: tuple[int, ...]
    budget_s: float = 60.0
    signal_at: tuple[int, str] | None = None  # (signal, pid file in pids/ or a glob under the case dir)
    signal_delay_s: float = 0.3
    fix_confirmed: bool = False
    must_contain: tuple[str, ...] = ()
    extra: Callable[[Result, Ctx], None] | None = None
    #: files (relative to the case directory) the run is asked to write: they may appear or change
    writes: tuple[str, ...] = ()


@dataclass
class Result:
    case: Case
    ctx: Ctx
    rc: int | None
    out: str
    err: str
    wall_s: float
    survivors: list[int]
    changed: list[str]
    killed_by_harness: bool = False
    budget_s: float = 0.0  # the case's budget times the load factor
    written: str = ""  # the text of every file the run created or changed

    @property
    def unexpected_changes(self) -> list[str]:
        """Files changed or replaced that the case did not ask for (none allowed unless a fix
        was confirmed)."""
        if self.case.fix_confirmed:
            return []
        return [k for k in self.changed if k not in self.case.writes]

    @property
    def text(self) -> str:
        return self.out + self.err

    @property
    def tracebacks(self) -> int:
        return len(TRACEBACK.findall(self.text))

    @property
    def leaked(self) -> list[str]:
        return [s for s in ALL_SECRETS if s in self.text or s in self.written]

    @property
    def hung(self) -> bool:
        return self.killed_by_harness or self.wall_s > self.budget_s


def _snapshot(ctx: Ctx) -> dict[str, str]:
    out = {}
    for base in (ctx.root, ctx.host, ctx.home):
        if not base.exists():
            continue
        for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
            rel_dir = Path(dirpath)
            if ".local/state" in str(rel_dir) or ".cache" in str(rel_dir):
                continue  # the fix journal and caches are the tool's own state
            for name in filenames + [d for d in dirnames if (rel_dir / d).is_symlink()]:
                p = rel_dir / name
                key = str(p.relative_to(ctx.dir))
                try:
                    if p.is_symlink():
                        out[key] = "link:" + os.readlink(p)
                    elif p.is_file():
                        out[key] = hashlib.sha256(p.read_bytes()).hexdigest()
                    else:
                        out[key] = "special"
                except OSError as exc:
                    out[key] = f"error:{exc.errno}"
    return out


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _pids(ctx: Ctx) -> list[int]:
    pids = []
    for f in ctx.pids.glob("*.pid"):
        for line in f.read_text().split():
            if line.strip().isdigit():
                pids.append(int(line))
    return pids


def load_factor(runs: int = 3) -> float:
    """How many times longer than its CPU time a short gpudoctor run (``--version``) takes on
    this machine now: the median of ``runs``, at least 1, at most 10. Waiting for a CPU is what
    a loaded machine adds; the budgets and timeouts of the matrix are multiplied by this."""
    ratios = []
    for _ in range(runs):
        start = time.monotonic()
        proc = subprocess.Popen([*GPUDOCTOR, "--version"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _pid, _status, usage = os.wait4(proc.pid, 0)
        proc.returncode = 0  # reaped by wait4
        wall = time.monotonic() - start
        ratios.append(wall / max(usage.ru_utime + usage.ru_stime, 0.05))
    return min(10.0, max(1.0, sorted(ratios)[len(ratios) // 2]))


def _default_signals() -> None:
    for sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)


def run_case(case: Case, base: Path, factor: float = 1.0) -> Result:
    ctx = Ctx(base / case.id)
    for d in (ctx.home, ctx.bin, ctx.root, ctx.host, ctx.pids, ctx.dir / "tmp"):
        d.mkdir(parents=True, exist_ok=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PIP_", "UV_", "CONDA", "JUPYTER", "GPUDOCTOR_", "XDG_", "CUDA_"))
    }
    env.update(
        HOME=str(ctx.home),
        XDG_CONFIG_HOME=str(ctx.home / ".config"),
        XDG_STATE_HOME=str(ctx.home / ".local/state"),
        XDG_CACHE_HOME=str(ctx.home / ".cache"),
        XDG_DATA_HOME=str(ctx.home / ".local/share"),
        TMPDIR=str(ctx.dir / "tmp"),
        PATH=f"{ctx.bin}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        NO_COLOR="1",
        GPUDOCTOR_LOOPBACK_ONLY="1",
        PIP_INDEX_URL=f"https://user:{URL_SECRET}@mirror.example.org/simple",
        # raised for a loaded machine (a case may set its own, as the plug-in cases do)
        GPUDOCTOR_CHECK_TIMEOUT_S=f"{30 * factor:.0f}",
        GPUDOCTOR_COLLECT_TIMEOUT_SCALE=f"{factor:.2f}",
        **SECRETS,
    )
    budget = case.budget_s * factor
    ctx.env = env
    case.setup(ctx)
    before = _snapshot(ctx)
    start = time.monotonic()
    proc = subprocess.Popen(
        [*GPUDOCTOR, *ctx.argv],
        stdin=subprocess.PIPE if ctx.stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ctx.env,
        cwd=ctx.dir,
        # default dispositions however the matrix was started (under `nohup` SIGHUP arrives
        # ignored, and gpudoctor rightly keeps an inherited SIG_IGN)
        preexec_fn=_default_signals,
    )
    if case.signal_at:
        sig, trigger = case.signal_at

        def send() -> None:
            deadline = time.monotonic() + budget
            while time.monotonic() < deadline and proc.poll() is None:
                if (ctx.pids / trigger).exists() or (("/" in trigger) and list(ctx.dir.glob(trigger))):
                    time.sleep(case.signal_delay_s)  # let the doctor settle into waiting on it
                    proc.send_signal(sig)
                    return
                time.sleep(0.05)

        threading.Thread(target=send, daemon=True).start()
    killed = False
    try:
        out, err = proc.communicate(input=ctx.stdin, timeout=budget + 30)
    except subprocess.TimeoutExpired:
        killed = True
        proc.kill()
        out, err = proc.communicate()
    wall = time.monotonic() - start
    deadline = time.monotonic() + 5
    survivors = [p for p in _pids(ctx) if _alive(p)]
    while survivors and time.monotonic() < deadline:
        time.sleep(0.1)
        survivors = [p for p in survivors if _alive(p)]
    for p in survivors:  # do not leave them to the next test
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    after = _snapshot(ctx)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    written = []
    for rel in changed:
        path = ctx.dir / rel
        if path.is_file():
            with open(path, "rb") as fh:
                written.append(fh.read(64 * 1024 * 1024).decode("utf-8", "replace"))
    return Result(
        case,
        ctx,
        proc.returncode,
        out.decode("utf-8", "replace"),
        err.decode("utf-8", "replace"),
        wall,
        survivors,
        changed,
        killed,
        budget,
        "\n".join(written),
    )


#: the figures of every matrix run in this session, summed (printed in pytest's terminal summary by
#: tests/conftest.py): one total however many matrix modules ran
FIGURES: dict[str, float] = {}


def run_matrix(
    cases: Sequence[Case], base: Path, workers: int = 10, known_open: Collection[str] = ()
) -> dict[str, Result]:
    """Run every case as a real CLI process, ``workers`` at a time (most cases wait, not compute),
    with budgets and timeouts multiplied by the machine's :func:`load_factor`; add the figures to
    :data:`FIGURES` (the ``known_open`` cases, strict expected failures, counted apart)."""
    factor = load_factor()
    order = sorted(cases, key=lambda c: -c.budget_s)  # long ones first
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(lambda c: run_case(c, base, factor), order))
    counted = figures([r for r in results if r.case.id not in known_open])
    counted["known_open"] = sum(1 for r in results if r.case.id in known_open)
    for key, value in counted.items():
        FIGURES[key] = FIGURES.get(key, 0) + value
    FIGURES["load_factor"] = round(max(factor, FIGURES.get("load_factor", 0)), 2)
    FIGURES["wall_s"] = FIGURES.get("wall_s", 0) + round(time.monotonic() - start)
    return {r.case.id: r for r in results}


def figures(results: Sequence[Result]) -> dict[str, int]:
    """The matrix's figures: inputs tried, then what must all be zero."""
    return {
        "inputs": len(results),
        "tracebacks": sum(r.tracebacks for r in results),
        "hangs": sum(r.hung for r in results),
        "leaks": sum(len(r.leaked) + len(r.survivors) for r in results),
        "files_corrupted_or_replaced": sum(1 for r in results if r.unexpected_changes),
        "wrong_exit_codes": sum(1 for r in results if r.rc not in r.case.codes),
    }
