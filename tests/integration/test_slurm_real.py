"""Slurm for real (issue 31): Debian's slurm-wlm and munge run a one-node cluster on 127.0.0.1
inside a temporary directory, with the example HealthCheckProgram
(examples/slurm/gpudoctor-healthcheck.sh) as the node's health check. A healthy node runs the
job; a node made unhealthy (the gate is told to require a GPU this machine lacks) is drained with
gpudoctor's one-line reason in `sinfo -R` and the job does not run there; once healthy again the
node resumes by itself; `srun` over the node collects `check --format json` reports that
`report merge` turns into the fleet table.

Runs in CI's integration step (`pytest -m integration`), which installs the Debian packages;
skipped, saying so, where they are not installed or not run as root (the daemons need it).
Nothing outside the temporary directory is written: the daemons' configuration, state, spool,
logs, munge key and socket all live there (SLURM_CONF and munged's options point at them).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "slurm"
BINARIES = ("slurmctld", "slurmd", "srun", "sinfo", "scontrol", "munged")
MISSING = [b for b in BINARIES if shutil.which(b) is None]
NODE = socket.gethostname().split(".")[0]
BIN = str(Path(sys.executable).parent)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, probe, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"waited {timeout:g} s for {what}")


class Cluster:
    def __init__(self, root: Path):
        self.root = root
        self.env = {
            "PATH": f"{BIN}:/usr/sbin:/usr/bin:/sbin:/bin",
            "SLURM_CONF": str(root / "slurm.conf"),
            "HOME": str(root / "home"),
        }

    def run(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=timeout)

    def node(self) -> tuple[str, str]:
        """(state, reason) of the node as sinfo reports them."""
        out = self.run("sinfo", "-h", "-N", "-n", NODE, "-o", "%T|%E").stdout.strip()
        state, _, reason = out.partition("|")
        return state, reason

    def require_gpus(self, n: int) -> None:
        (self.root / "require-gpus").write_text(str(n))


@pytest.fixture
def cluster(tmp_path):
    if MISSING:
        pytest.skip(f"Debian packages slurm-wlm/munge not installed ({', '.join(MISSING)})")
    if os.geteuid() != 0:
        pytest.skip("the Slurm daemons of this test run as root")
    root = tmp_path
    for d in ("munge", "state", "spool", "log", "home", "reports"):
        (root / d).mkdir()
    (root / "munge").chmod(0o700)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    sock = root / "munge" / "munge.socket"
    c = Cluster(root)
    c.require_gpus(0)
    hc = root / "healthcheck.sh"  # what an operator's wrapper would set; then the shipped script
    hc.write_text(
        "#!/bin/sh\n"
        f"export PATH='{c.env['PATH']}' SLURM_CONF='{c.env['SLURM_CONF']}' HOME='{root / 'home'}'\n"
        f"export GPUDOCTOR_STATUS_FILE='{root / 'status.json'}'\n"
        f"export GPUDOCTOR_REQUIRE_GPUS=$(cat '{root / 'require-gpus'}')\n"
        f"exec sh '{EXAMPLES / 'gpudoctor-healthcheck.sh'}'\n"
    )
    hc.chmod(0o755)
    (root / "slurm.conf").write_text(
        f"""ClusterName=gpudoctortest
SlurmctldHost={NODE}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root / "state"}
SlurmdSpoolDir={root / "spool"}
SlurmctldPidFile={root / "slurmctld.pid"}
SlurmdPidFile={root / "slurmd.pid"}
SlurmctldLogFile={root / "log" / "slurmctld.log"}
SlurmdLogFile={root / "log" / "slurmd.log"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
HealthCheckProgram={hc}
HealthCheckInterval=3
HealthCheckNodeState=ANY
NodeName={NODE} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
    )
    munged = [
        "munged",
        "-f",
        f"--key-file={key}",
        f"--socket={sock}",
        f"--pid-file={root / 'munge' / 'munged.pid'}",
        f"--log-file={root / 'munge' / 'munged.log'}",
        f"--seed-file={root / 'munge' / 'munged.seed'}",
    ]
    try:
        assert c.run(*munged).returncode == 0
        assert c.run("slurmctld", "-i").returncode == 0
        wait_for("slurmctld", lambda: c.run("scontrol", "ping").stdout.count("UP"))
        assert c.run("slurmd").returncode == 0
        wait_for("the node to come up", lambda: c.node()[0] in ("idle", "drained", "draining", "mixed"))
        yield c
    finally:
        c.run("scontrol", "shutdown")
        for pid_file in ("slurmctld.pid", "slurmd.pid"):
            _stop(root / pid_file)
        c.run("munged", "-s", f"--socket={sock}")
        _stop(root / "munge" / "munged.pid")


def _stop(pid_file: Path) -> None:
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass


def test_the_health_check_drains_an_unhealthy_node_and_resumes_it(cluster, tmp_path):
    ran = tmp_path / "ran"
    healthy = cluster.run("srun", "-N1", "--immediate=30", "sh", "-c", f"touch {ran}")
    assert healthy.returncode == 0 and ran.exists(), healthy.stderr

    cluster.require_gpus(1)  # the node lacks the GPU the gate now requires
    state, reason = wait_for(
        "the drain", lambda: (lambda s: s if s[1].startswith("gpudoctor:") else None)(cluster.node())
    )
    assert state in ("drained", "draining") and reason.startswith("gpudoctor: required: gate.gpus"), (state, reason)
    listed = cluster.run("sinfo", "-R", "-h", "-o", "%E|%N").stdout  # %E: the whole reason
    assert "gpudoctor: required: gate.gpus" in listed and listed.strip().endswith(f"|{NODE}")

    ran.unlink()
    blocked = cluster.run("srun", "-N1", "--immediate=3", "sh", "-c", f"touch {ran}")
    assert blocked.returncode != 0 and not ran.exists()

    cluster.require_gpus(0)  # healthy again: the script undoes its own drain
    wait_for("the resume", lambda: cluster.node()[0] == "idle")
    again = cluster.run("srun", "-N1", "--immediate=30", "sh", "-c", f"touch {ran}")
    assert again.returncode == 0 and ran.exists()


def test_srun_collects_reports_that_report_merge_tables(cluster, tmp_path):
    reports = cluster.root / "reports"
    collect = cluster.run(
        "srun",
        "-N1",
        "--immediate=30",
        "sh",
        "-c",
        f"gpudoctor check nvidia platform.container --offline --format json -o {reports}/$(hostname -s).json",
        timeout=180,
    )
    assert collect.returncode in (0, 1), collect.stderr
    assert (reports / f"{NODE}.json").exists()
    merged = cluster.run("gpudoctor", "report", "merge", str(reports))
    assert merged.returncode in (0, 1), merged.stderr
    assert NODE in merged.stdout and merged.stdout.split()[:4] == ["node", "verdict", "gpu", "platform"]  # by area
    wide = cluster.run("gpudoctor", "report", "merge", "--wide", str(reports))  # every check
    assert wide.returncode == merged.returncode and NODE in wide.stdout and "nvidia.driver" in wide.stdout
