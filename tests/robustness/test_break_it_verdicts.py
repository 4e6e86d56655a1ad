"""The break-it matrix, issue 32 classes: verdicts that claim no more than was judged (item 4),
inputs validated up front (item 3) and `report merge` on hostile files (item 7).

Same harness and the same assertions as ``test_break_it.py`` (exit code, no traceback, no secret,
no changed or replaced file, no surviving child, within budget); every input lives in the case's
``host/`` directory, which the harness fingerprints before and after the run.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from hostile import SECRETS, Case, Ctx, Result, run_matrix

#: its own CI step (`python -m pytest -m robustness`): a plain `pytest` does not pay for it
pytestmark = pytest.mark.robustness

FACTS = Path(__file__).resolve().parents[1] / "fixtures" / "facts"
CPU_SNAP = str(FACTS / "no-gpu-cpu-torch.json")
IS_ROOT = os.geteuid() == 0


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


# --------------------------------------------------------------------------- item 4: verdicts

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
    """The background child was not waited for (the run ended long before it); then end it."""
    assert r.wall_s < 25, r.wall_s
    for line in (c.dir / "tmp" / "bg.pid").read_text().split():
        try:
            os.kill(int(line), 9)
        except OSError:
            pass


PROCESSES = [
    Case(
        "explain-background-child-holds-pipes",
        explain_job(
            'sleep 40 > /dev/stdout 2>&1 &\necho $! > "$TMPDIR/bg.pid"\necho "CUDA error: out of memory" >&2\nexit 3'
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


CASES = VERDICTS + VALIDATION + MERGE + PROCESSES


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    return run_matrix(CASES, tmp_path_factory.mktemp("break-it-32"))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(matrix, case):
    r = matrix[case.id]
    assert r.rc in case.codes, f"exit {r.rc} not in {case.codes}\nstdout: {r.out[-2000:]}\nstderr: {r.err[-2000:]}"
    assert r.tracebacks == 0, r.text[-3000:]
    assert r.leaked == [], (r.leaked, r.text[-2000:])
    assert not r.hung, f"ran {r.wall_s:.1f} s, budget {case.budget_s} s"
    assert r.survivors == [], f"child processes survived: {r.survivors}"
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
        "files_corrupted": sum(1 for r in results if r.changed),
        "wrong_exit_codes": sum(1 for r in results if r.rc not in r.case.codes),
    }
    with capsys.disabled():
        print(f"\nbreak-it matrix (issue 32 classes): {json.dumps(figures)}")
    assert figures["inputs_tried"] >= 85
    assert {k: v for k, v in figures.items() if k != "inputs_tried"} == dict.fromkeys(
        ["tracebacks", "hangs_past_budget", "leaks", "files_corrupted", "wrong_exit_codes"], 0
    )
