"""Prometheus for real (issue 31): Debian's node_exporter reads gpudoctor's textfile, a real
Prometheus on 127.0.0.1 scrapes it and evaluates the shipped alerting rules, and a failing check
appears as a firing alert in the server's API; its healthy twin fires none. The rules also pass
`promtool check rules` and their unit tests (`promtool test rules`).

Runs in CI's integration step (`pytest -m integration`), which installs the Debian packages
`prometheus` and `prometheus-node-exporter`; skipped, saying so, where they are not installed.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from _foundation import run_gpudoctor

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parents[1]
RULES = HERE.parent / "examples" / "prometheus" / "gpudoctor-rules.yml"
RULE_TESTS = RULES.with_name("gpudoctor-rules.test.yml")
FIELD = HERE / "field" / "cases" / "gpu"
BROKEN = FIELD / "fooocus-1313-driver-470-torch-cu121" / "facts.json"
HEALTHY = FIELD / "fooocus-1313-twin-driver-535" / "facts.json"
BINARIES = ("prometheus", "prometheus-node-exporter", "promtool")
MISSING = [b for b in BINARIES if shutil.which(b) is None]
needs_prometheus = pytest.mark.skipif(
    bool(MISSING), reason=f"Debian packages prometheus/prometheus-node-exporter not installed ({', '.join(MISSING)})"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get_json(url: str) -> dict:
    assert url.startswith("http://127.0.0.1:")  # loopback only
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


@needs_prometheus
def test_the_shipped_rules_pass_promtool_check_and_their_unit_tests():
    check = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0 and "SUCCESS: 4 rules found" in check.stdout, check.stdout + check.stderr
    unit = subprocess.run(["promtool", "test", "rules", str(RULE_TESTS)], capture_output=True, text=True, timeout=60)
    assert unit.returncode == 0 and "SUCCESS" in unit.stdout, unit.stdout + unit.stderr


def _firing(tmp_path: Path, facts: Path) -> list[dict]:
    """Write the textfile from ``facts``, run node_exporter and Prometheus on it, and return the
    alerts once the rules were evaluated on scraped data (bounded to 90 s)."""
    textdir = tmp_path / "textfile"
    textdir.mkdir()
    made = run_gpudoctor(
        "check", "--facts", str(facts), "--format", "prometheus", "-o", str(textdir / "gpudoctor.prom")
    )
    assert made.returncode in (0, 1), made.stderr
    ne_port, prom_port = free_port(), free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"rule_files:\n  - {RULES}\n"
        f"scrape_configs:\n  - job_name: node\n    static_configs:\n      - targets: ['127.0.0.1:{ne_port}']\n"
    )
    procs = [
        subprocess.Popen(
            [
                "prometheus-node-exporter",
                f"--web.listen-address=127.0.0.1:{ne_port}",
                "--collector.disable-defaults",
                "--collector.textfile",
                f"--collector.textfile.directory={textdir}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
        subprocess.Popen(
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
    ]
    try:
        api = f"http://127.0.0.1:{prom_port}/api/v1"
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            time.sleep(1)
            try:
                scraped = get_json(f"{api}/query?query=gpudoctor_findings")["data"]["result"]
            except OSError:
                continue  # not listening yet
            if scraped:
                time.sleep(3)  # three rule evaluations (1 s apart) on the scraped data
                return get_json(f"{api}/alerts")["data"]["alerts"]
        raise AssertionError("Prometheus did not scrape the textfile and evaluate the rules within 90 s")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@needs_prometheus
def test_a_failing_check_is_a_firing_alert_in_a_real_prometheus(tmp_path):
    alerts = _firing(tmp_path, BROKEN)
    failing = {(a["labels"]["alertname"], a["labels"].get("check"), a["state"]) for a in alerts}
    assert ("GpudoctorCheckFailing", "cuda.driver", "firing") in failing, alerts


@needs_prometheus
def test_the_healthy_twin_fires_no_alert(tmp_path):
    alerts = _firing(tmp_path, HEALTHY)
    assert [a for a in alerts if a["labels"]["alertname"] == "GpudoctorCheckFailing"] == []
