"""`gpudoctor report merge` a fleet can trust (issue 32, item 7): types and schema versions checked,
one bad file skipped while the rest merge, nodes identified by hostname + machine id + time,
duplicates detected, a compact table by area (`--wide`: every check), 141 on a closed pipe."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures" / "facts"


def _run(*args, stdout=subprocess.PIPE):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUDOCTOR_")}
    env.update(GPUDOCTOR_CONFIG="", NO_COLOR="1")
    return subprocess.run(
        [sys.executable, "-m", "gpudoctor", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        env=env,
    )


def _report(path, host, statuses, machine="", time="", **extra):
    findings = [
        {"check": c, "status": st, "summary": f"{c} is {st}", "explanation": "", "evidence": {}, "fixes": []}
        for c, st in statuses.items()
    ]
    doc = {"schema_version": 2, "gpudoctor_version": "x", "hostname": host, "status": "ok", "counts": {}}
    doc.update(duration_ms=1, findings=findings, machine_id=machine, time=time, **extra)
    path.write_text(json.dumps(doc))


def _gate(path, host, healthy, checks, machine="m-gate", time="2026-12-01T10:00:00+00:00"):
    doc = {"healthy": healthy, "time": time, "hostname": host, "machine_id": machine, "checks": checks}
    doc["failures"] = [] if healthy is True else [{"check": "cuda.context", "summary": "no context"}]
    path.write_text(json.dumps(doc))


def test_a_string_false_is_not_healthy_and_one_bad_file_is_skipped_while_the_rest_merge(tmp_path):
    _gate(tmp_path / "a.json", "gpu-a", "false", {"cuda.context": "fail"})  # a string: truthy, once "healthy"
    _gate(tmp_path / "b.json", "gpu-b", True, {"cuda.context": "ok"}, machine="m-b")
    _report(tmp_path / "c.json", "gpu-c", {"cuda.context": "ok"}, machine="m-c", time="2026-12-01T10:00:00+00:00")
    proc = _run("report", "merge", str(tmp_path))
    assert proc.returncode == 4, proc.stderr  # nothing failing, but the fleet's state is not fully known
    assert (
        f"gpudoctor: warning: {tmp_path / 'a.json'}: skipped: healthy is str 'false', not true or false" in proc.stderr
    )
    assert "gpu-a" not in proc.stdout and "gpu-b" in proc.stdout and "gpu-c" in proc.stdout
    assert "2 nodes: 2 healthy, 0 failing; 1 files skipped (see stderr)" in proc.stdout
    _gate(tmp_path / "a.json", "gpu-a", False, {"cuda.context": "fail"}, machine="m-a")  # the twin: a real false
    fixed = _run("report", "merge", str(tmp_path))
    assert fixed.returncode == 1 and fixed.stdout.splitlines()[1].startswith("gpu-a") and fixed.stderr == ""


def test_schema_versions_and_types_are_checked(tmp_path):
    bad = {
        "v99.json": ({"cuda.context": "ok"}, {"schema_version": 99}),
        "vtrue.json": ({"cuda.context": "ok"}, {"schema_version": True}),
        "status.json": ({"cuda.context": "maybe"}, {}),
        "host.json": ({"cuda.context": "ok"}, {"hostname": ["gpu-x"]}),
    }
    for name, (statuses, extra) in bad.items():
        _report(tmp_path / name, "gpu-x", statuses)
        doc = json.loads((tmp_path / name).read_text())
        doc.update(extra)
        (tmp_path / name).write_text(json.dumps(doc))
    (tmp_path / "findings.json").write_text(json.dumps({"schema_version": 2, "findings": {"a": 1}}))
    (tmp_path / "checks.json").write_text(json.dumps({"healthy": True, "checks": {"cuda.context": 1}}))
    proc = _run("report", "merge", str(tmp_path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr  # nothing readable: a usage error
    for text in (
        "v99.json: skipped: schema_version 99: this gpudoctor reads report schemas 1, 2",
        "vtrue.json: skipped: schema_version True",
        "status.json: skipped: findings[0].status is 'maybe', not one of ok, info, skip, warn, fail, error",
        "host.json: skipped: hostname is list",
        "findings.json: skipped: findings is dict, not a list",
        "checks.json: skipped: checks['cuda.context'] is int 1, not a string",
    ):
        assert text in proc.stderr, proc.stderr
    assert len(proc.stderr.splitlines()) == 7  # six files, one line each, and the error


def test_nodes_are_identified_by_hostname_machine_id_and_time(tmp_path):
    t1, t2 = "2026-12-01T10:00:00+00:00", "2026-12-01T11:00:00+00:00"
    # two machines that share a hostname (a re-imaged node, a default hostname) are two rows
    _report(tmp_path / "n1.json", "node", {"cuda.context": "ok"}, machine="aaaaaaaa1111", time=t1)
    _report(tmp_path / "n2.json", "node", {"cuda.context": "fail"}, machine="bbbbbbbb2222", time=t1)
    # one machine's older report is superseded by its newer one
    _report(tmp_path / "old.json", "gpu-7", {"cuda.context": "fail"}, machine="c7", time=t1)
    _report(tmp_path / "new.json", "gpu-7", {"cuda.context": "ok"}, machine="c7", time=t2)
    shutil.copy(tmp_path / "new.json", tmp_path / "new-copy.json")  # the same report twice
    proc = _run("report", "merge", str(tmp_path), "--wide")
    assert proc.returncode == 1, proc.stderr
    rows = [line.split()[0:3] for line in proc.stdout.splitlines()[1:4]]
    assert ["node", "[bbbbbbbb]", "FAILING"] in rows and ["node", "[aaaaaaaa]", "healthy"] in rows
    assert ["gpu-7", "healthy", "ok"] in rows
    # new-copy.json sorts before new.json: it is the one kept, new.json the duplicate
    assert f"left out: {tmp_path / 'new.json'}: duplicate of {tmp_path / 'new-copy.json'}" in proc.stdout
    assert f"left out: {tmp_path / 'old.json'}: superseded by {tmp_path / 'new-copy.json'} ({t2})" in proc.stdout
    assert "3 nodes: 2 healthy, 1 failing" in proc.stdout
    js = json.loads(_run("report", "merge", str(tmp_path), "--format", "json").stdout)
    assert js["nodes"] == 3 and len(js["left_out"]) == 2
    assert {r["machine_id"] for r in js["rows"]} == {"aaaaaaaa1111", "bbbbbbbb2222", "c7"}


def test_the_table_is_compact_by_area_and_wide_shows_every_check(tmp_path):
    _report(tmp_path / "a.json", "gpu-a", {"cuda.context": "ok", "cuda.arch": "warn", "pip.mirror": "ok"}, machine="a")
    _report(tmp_path / "b.json", "gpu-b", {"cuda.context": "skip", "jupyter.kernels": "skip"}, machine="b")
    compact = _run("report", "merge", str(tmp_path))
    header = compact.stdout.splitlines()[0].split()
    assert header[:2] == ["node", "verdict"] and "cuda.context" not in header
    assert "gpu" in header and "sources" in header and "notebooks" in header
    row_a = compact.stdout.splitlines()[1].split()
    assert row_a[:2] == ["gpu-a", "warn"] and row_a[2 + header[2:].index("gpu")] == "WARN"
    # a node whose every check was skipped judged nothing: unknown, and the merge says so (exit 4)
    assert compact.stdout.splitlines()[2].split()[:2] == ["gpu-b", "unknown"] and compact.returncode == 4
    wide = _run("report", "merge", str(tmp_path), "--wide")
    assert {"cuda.context", "cuda.arch", "pip.mirror", "jupyter.kernels"} <= set(wide.stdout.splitlines()[0].split())


def test_real_reports_carry_machine_id_and_time_and_merge(tmp_path):
    out = tmp_path / "node.json"
    proc = _run("check", "--facts", str(FIXTURES / "no-gpu-cpu-torch.json"), "--format", "json", "-o", str(out))
    assert proc.returncode in (0, 1), proc.stderr
    doc = json.loads(out.read_text())
    machine = Path("/etc/machine-id").read_text().strip() if Path("/etc/machine-id").exists() else ""
    assert doc["machine_id"] == machine and doc["time"]  # a replay: the snapshot's collection time
    merged = _run("report", "merge", str(out))
    assert merged.returncode in (0, 1) and merged.stderr == ""


def test_a_closed_pipe_exits_141_quietly(tmp_path):
    for i in range(50):
        _report(tmp_path / f"n{i}.json", f"gpu-{i:03d}", {"cuda.context": "ok"}, machine=f"m{i}")
    r, w = os.pipe()
    os.close(r)  # the reader is gone before the first byte (`| head -0`)
    try:
        proc = _run("report", "merge", str(tmp_path), stdout=w)
    finally:
        os.close(w)
    assert proc.returncode == 141 and "Traceback" not in proc.stderr and proc.stderr == ""


def test_merge_reads_every_report_schema_this_gpudoctor_writes():
    from gpudoctor.engine import REPORT_SCHEMA_VERSION
    from gpudoctor.fleet import REPORT_SCHEMAS

    assert REPORT_SCHEMAS == tuple(range(1, REPORT_SCHEMA_VERSION + 1))
