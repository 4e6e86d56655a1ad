"""Bad input is one line and exit 2; a config file that cannot be read or parsed is a
finding that says so; output survives an ASCII-only encoding."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from _foundation import env_with, run_gpudoctor
from gpudoctor.collect import CollectOptions, all_collectors
from gpudoctor.engine import collect_facts, evaluate
from gpudoctor.model import Status
from gpudoctor.testing import fake_system, write_tree

SNAP = sorted((Path(__file__).parent / "fixtures" / "facts").glob("*.json"))[0]


def _one_line_exit_2(proc, *words):
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    err = proc.stderr.strip()
    assert "Traceback" not in proc.stderr + proc.stdout
    assert len(err.splitlines()) == 1 and err.startswith("gpudoctor: error:"), err
    for w in words:
        assert w in err, err


def test_deeply_nested_facts_json(tmp_path):
    f = tmp_path / "deep.json"
    f.write_text("[" * 100_000 + "]" * 100_000)
    _one_line_exit_2(run_gpudoctor("check", "--facts", str(f)), "nested deeper than")


def test_oversized_facts_file(tmp_path):
    f = tmp_path / "huge.json"
    with open(f, "wb") as fh:
        fh.truncate(65 * 1024 * 1024)  # sparse: costs no disk
    _one_line_exit_2(run_gpudoctor("check", "--facts", str(f)), "too large")


@pytest.mark.parametrize(
    "make, word",
    [
        (lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary"), "binary"),
        (lambda p: p.write_bytes(b"\xff\xfe[[mirror]]"), "not UTF-8"),
        (lambda p: (os.symlink(p.name + ".b", p), os.symlink(p.name, str(p) + ".b")), "symlink loop"),
        (lambda p: os.mkfifo(p), "not a regular file"),
        (lambda p: p.mkdir(), "is a directory"),
    ],
)
@pytest.mark.parametrize("option", ["--facts", "--catalogue"])
def test_unusable_input_files(tmp_path, make, word, option):
    p = tmp_path / "input"
    make(p)
    args = ["check", option, str(p)] + (["--offline", "pip"] if option == "--catalogue" else [])
    _one_line_exit_2(run_gpudoctor(*args, timeout=60), word)


def test_facts_document_of_the_wrong_shape(tmp_path):
    f = tmp_path / "odd.json"
    f.write_text(json.dumps({"schema_version": 1, "domains": [1, 2, 3]}))
    _one_line_exit_2(run_gpudoctor("check", "--facts", str(f)), "not a gpudoctor facts snapshot")


def _facts(root, domains, env=None):
    system = fake_system(root, env=env or {"PATH": "/usr/bin"}, home="/home/user")
    return collect_facts(domains, system, CollectOptions(offline=True), all_collectors())[0]


def test_pip_conf_that_cannot_be_read_is_not_read_silently(tmp_path):
    write_tree(tmp_path, {"/etc/os-release": "ID=debian\n"})
    (tmp_path / "etc" / "pip.conf").symlink_to("/etc/pip.conf")  # loops on itself
    from gpudoctor.checks.pip_config import CHECK

    findings = evaluate([CHECK], _facts(tmp_path, ["pip"]))
    warn = [f for f in findings if f.status is Status.WARN]
    assert warn and "pip cannot read /etc/pip.conf" in warn[0].summary and "symlink loop" in warn[0].summary
    assert not any(f.summary.startswith("pip reads its configuration") for f in findings)


@pytest.mark.parametrize(
    "path, text, check_id, word, status",
    [
        ("/home/user/.condarc", "channels: [defaults\n", "conda.mirror", "not valid YAML", Status.WARN),
        ("/home/user/.condarc", "- defaults\n- conda-forge\n", "conda.mirror", "not a mapping", Status.WARN),
        # uv refuses to run on a uv.toml it cannot parse: a fail
        ("/home/user/.config/uv/uv.toml", "[[index]\nurl = 'x'\n", "uv.mirror", "not valid TOML", Status.FAIL),
    ],
)
def test_invalid_condarc_or_uv_toml_is_not_not_configured(tmp_path, path, text, check_id, word, status):
    write_tree(tmp_path, {path: text, "/etc/os-release": "ID=debian\n"})
    from gpudoctor.registry import load_registry

    check = load_registry().checks[check_id]
    findings = evaluate([check], _facts(tmp_path, ["os", "apt", "uv", "conda", "pip", "mirrors"]))
    assert findings[0].status is status, findings[0]
    assert "cannot be read" in findings[0].summary and word in findings[0].summary
    # the explanation adds to the summary instead of repeating it, and names the syntax to fix
    assert word not in findings[0].explanation
    assert ("Fix its TOML syntax" if check_id == "uv.mirror" else "Fix its YAML syntax") in findings[0].explanation
    assert "not configured" not in findings[0].summary


def test_ascii_only_output_encoding_works():
    for fmt in ("console", "markdown", "json"):
        proc = run_gpudoctor(
            "check", "--facts", str(SNAP), "-v", "--format", fmt, env=env_with(PYTHONIOENCODING="ascii")
        )
        assert proc.returncode in (0, 1), proc.stderr
        assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
        proc.stdout.encode("ascii")
    proc = run_gpudoctor("list", env=env_with(PYTHONIOENCODING="ascii"))
    assert proc.returncode == 0 and "pip.config" in proc.stdout


def test_a_report_or_status_document_given_as_facts_says_what_it_is(tmp_path):
    """A report (schema_version 1, like old snapshots) once replayed as an empty snapshot: exit 0."""
    report = tmp_path / "report.json"
    proc = run_gpudoctor("check", "--facts", str(SNAP), "--format", "json", "-o", str(report))
    assert proc.returncode in (0, 1) and json.loads(report.read_text())["findings"]
    _one_line_exit_2(
        run_gpudoctor("check", "--facts", str(report)),
        "`gpudoctor check --format json` report",
        "gpudoctor facts -o FILE",
    )
    status = tmp_path / "status.json"
    status.write_text(json.dumps({"healthy": True, "time": "", "hostname": "n1", "checks": {}, "failures": []}))
    _one_line_exit_2(run_gpudoctor("check", "--facts", str(status)), "`gpudoctor gate` status document")
    _one_line_exit_2(
        run_gpudoctor("check", "--facts", "-", input=json.dumps({"foo": 1})),
        "the file has none",
        "not a gpudoctor facts",
    )
    # the real snapshot still replays
    assert run_gpudoctor("check", "--facts", str(SNAP)).returncode in (0, 1)


@pytest.mark.parametrize(
    "args",
    [
        ["check", "--offline", "pip"],
        ["check", "--offline", "pip", "--format", "prometheus"],
        ["facts", "--offline", "pip"],
        ["mirrors", "--offline", "pip"],
        ["gate", "--status-file"],
        ["explain", "--no-check", "--", "sh", "-c", "echo RAN; touch ran; exit 1"],
    ],
)
@pytest.mark.parametrize("bad", ["missing-dir/out", "a-file/out", "."])
def test_an_output_path_that_cannot_be_written_is_refused_before_anything_runs(tmp_path, args, bad):
    (tmp_path / "a-file").write_text("x")
    args = list(args)  # the parametrized list is shared between the runs
    flag = args.pop() if args[-1] == "--status-file" else "-o"
    out = str(tmp_path / bad)
    if "--" in args:
        i = args.index("--")
        argv = [*args[:i], flag, out, *args[i:]]
    else:
        argv = [*args, flag, out]
    proc = run_gpudoctor(*argv, cwd=tmp_path, timeout=60)
    word = {"missing-dir/out": "does not exist", "a-file/out": "is not a directory", ".": "is a directory"}[bad]
    _one_line_exit_2(proc, f"{flag} {out}", word)
    assert "RAN" not in proc.stdout and not (tmp_path / "ran").exists()  # the command never started
