"""gpudoctor diff: healthy vs broken twins from the fixtures and the field corpus; the difference
that explains the failing check comes first."""

from __future__ import annotations

import json
from pathlib import Path

from _foundation import run_gpudoctor
from gpudoctor import diffing
from gpudoctor.model import Finding, Status

HERE = Path(__file__).resolve().parent
FIELD = HERE / "field" / "cases" / "gpu"
BROKEN = FIELD / "fooocus-1313-driver-470-torch-cu121" / "facts.json"
HEALTHY = FIELD / "fooocus-1313-twin-driver-535" / "facts.json"
FACTS = HERE / "fixtures" / "facts"


def test_driver_twins_name_the_driver_first_with_the_checks_it_explains():
    proc = run_gpudoctor("diff", str(HEALTHY), str(BROKEN), "--format", "json")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert {(c["check"], c["a"], c["b"]) for c in doc["checks"]} >= {("cuda.driver", "ok", "fail")}
    first = doc["facts"][0]
    assert first["path"] in ("nvidia.driver_version", "nvidia.cuda_driver_version")
    assert "cuda.driver" in first["explains"]
    paths = [f["path"] for f in doc["facts"]]
    assert "nvidia.driver_version" in paths[:3]


def test_the_console_report_reads_a_to_b():
    proc = run_gpudoctor("diff", str(HEALTHY), str(BROKEN))
    assert proc.returncode == 1
    assert "cuda.driver     ok → fail" in proc.stdout
    assert "A: 535.183.01" in proc.stdout and "B: 470.86" in proc.stdout
    assert proc.stdout.index("checks whose verdict differs") < proc.stdout.index("facts that differ")


def test_a_snapshot_against_itself_does_not_differ():
    proc = run_gpudoctor("diff", str(BROKEN), str(BROKEN))
    assert proc.returncode == 0 and "do not differ" in proc.stdout


def test_two_reports_compare_verdicts_and_say_facts_are_needed(tmp_path):
    reports = []
    for name, src in (("a", HEALTHY), ("b", BROKEN)):
        out = tmp_path / f"{name}.json"
        run_gpudoctor("check", "--facts", str(src), "--format", "json", "-o", str(out))
        reports.append(str(out))
    proc = run_gpudoctor("diff", *reports, "--format", "markdown")
    assert proc.returncode == 1
    assert "| `cuda.driver` | ok | fail |" in proc.stdout and "reports carry no facts" in proc.stdout


def test_a_report_and_a_snapshot_are_a_usage_error(tmp_path):
    report = tmp_path / "r.json"
    run_gpudoctor("check", "--facts", str(BROKEN), "--format", "json", "-o", str(report))
    proc = run_gpudoctor("diff", str(report), str(BROKEN))
    assert proc.returncode == 2 and "compare two of the same kind" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    other = tmp_path / "x.json"
    other.write_text('{"hello": 1}')
    proc = run_gpudoctor("diff", str(other), str(BROKEN))
    assert proc.returncode == 2 and "neither a facts snapshot" in proc.stderr


def test_a_cpu_build_on_a_gpu_node_against_the_cuda_build():
    """Another pair of fixtures: the same kind of node, torch's build is what differs."""
    proc = run_gpudoctor(
        "diff",
        str(FACTS / "case01-driver-470-torch-cu121.json"),
        str(FACTS / "gpu-driver-550-cpu-torch.json"),
        "--format",
        "json",
    )
    doc = json.loads(proc.stdout)
    paths = [f["path"] for f in doc["facts"] if f["explains"]]
    assert any(p.endswith("probe.torch.cuda") or p.endswith("torch.version") for p in paths[:12]), paths[:12]


def test_flatten_keys_records_by_their_id_and_drops_timings():
    flat = dict(
        diffing.flatten(
            {
                "targets": [{"label": "current", "duration_ms": 5, "env": {"LD_LIBRARY_PATH": "/opt/a"}}],
                "arch": ["sm_80", "sm_90"],
            }
        )
    )
    assert flat == {
        "targets[label=current].label": "current",
        "targets[label=current].env.LD_LIBRARY_PATH": "/opt/a",
        "arch": ["sm_80", "sm_90"],
    }


def test_checks_that_got_worse_come_first():
    a = [Finding("x.one", Status.OK, "fine"), Finding("x.two", Status.OK, "fine")]
    b = [Finding("x.one", Status.WARN, "slow"), Finding("x.two", Status.FAIL, "broken")]
    assert [c.check for c in diffing.diff_findings(a, b)] == ["x.two", "x.one"]
