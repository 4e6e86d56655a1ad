"""The fleet examples: manifests parse, every gpudoctor command in them is valid for the real
CLI, the Dockerfile's instructions are those docs/fleet.md describes and its ENTRYPOINT really
gates and execs, the scripts are valid shell and honour their exit-code contracts."""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from _fakecuda import GccMissing, build_fake_cuda

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
DOCS = ROOT / "docs" / "fleet.md"


def _manifests():
    out = {}
    for path in sorted((EXAMPLES / "kubernetes").glob("*.yaml")):
        out[path.name] = list(yaml.safe_load_all(path.read_text()))
    return out


def test_manifests_parse_and_have_the_expected_kinds():
    docs = _manifests()
    kinds = {name: [d["kind"] for d in ds] for name, ds in docs.items()}
    assert kinds == {
        "daemonset-textfile.yaml": ["DaemonSet"],
        "gpu-pod-gate.yaml": ["Pod"],
        "node-problem-detector.yaml": ["ConfigMap"],
    }
    ds = docs["daemonset-textfile.yaml"][0]["spec"]["template"]["spec"]
    mount = ds["containers"][0]["volumeMounts"][0]["mountPath"]
    assert "--output " + mount + "/gpudoctor.prom" in ds["containers"][0]["args"][0]
    assert ds["volumes"][0]["hostPath"]["path"] == "/var/lib/node_exporter/textfile"
    pod = docs["gpu-pod-gate.yaml"][0]["spec"]
    assert pod["initContainers"][0]["command"][:2] == ["gpudoctor", "gate"]
    assert pod["containers"][0]["startupProbe"]["exec"]["command"][:2] == ["gpudoctor", "gate"]


@pytest.mark.parametrize("name", ["daemonset-textfile.yaml", "gpu-pod-gate.yaml", "node-problem-detector.yaml"])
def test_manifests_validate_against_the_kubernetes_openapi_schema(name):
    """Strict validation (unknown fields are errors) against the schema of a current Kubernetes
    release, with kubernetes-validate (Apache-2.0; it ships the published OpenAPI schemas)."""
    import kubernetes_validate

    version = kubernetes_validate.latest_version()
    for doc in _manifests()[name]:
        kubernetes_validate.validate(doc, version, strict=True)  # raises ValidationError


def test_the_validator_rejects_a_manifest_kubernetes_would_reject():
    import kubernetes_validate

    pod = _manifests()["gpu-pod-gate.yaml"][0]
    broken = json.loads(json.dumps(pod))
    broken["spec"]["containers"][0]["resourcess"] = broken["spec"]["containers"][0].pop("resources", {})
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, kubernetes_validate.latest_version(), strict=True)


def test_npd_plugin_config_is_consistent():
    cm = _manifests()["node-problem-detector.yaml"][0]["data"]
    monitor = json.loads(cm["gpudoctor-monitor.json"])
    assert monitor["plugin"] == "custom"
    rule = monitor["rules"][0]
    assert rule["condition"] == monitor["conditions"][0]["type"] == "GPUUnhealthy"
    assert rule["path"].endswith("/gpudoctor-npd.sh") and "gpudoctor-npd.sh" in cm


@pytest.mark.parametrize("gate_rc,expected", [(0, 0), (1, 1), (2, 3), (3, 3)])
def test_npd_wrapper_maps_exit_codes_to_the_npd_contract(tmp_path, gate_rc, expected):
    script = tmp_path / "npd.sh"
    script.write_text(_manifests()["node-problem-detector.yaml"][0]["data"]["gpudoctor-npd.sh"])
    fake = tmp_path / "bin" / "gpudoctor"
    fake.parent.mkdir()
    fake.write_text(
        f"#!/bin/sh\necho 'noise'\necho 'gpudoctor gate: failed: cuda.context: no context' >&2\nexit {gate_rc}\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    proc = subprocess.run(
        ["sh", str(script)],
        capture_output=True,
        text=True,
        env=dict(os.environ, PATH=f"{fake.parent}:{os.environ['PATH']}"),
    )
    assert proc.returncode == expected
    assert proc.stdout.strip() == "gpudoctor gate: failed: cuda.context: no context"


def _commands():
    """Every gpudoctor argv in the examples: k8s command lists and shell lines."""
    found = []
    for name, docs in _manifests().items():
        text = json.dumps(docs)
        for argv in re.findall(r'\["gpudoctor", [^\]]*\]', text):
            found.append((name, json.loads(argv)[1:]))
    sources = [p for p in EXAMPLES.rglob("*") if p.suffix in (".sh", ".nhc")]
    sources += [
        EXAMPLES / "kubernetes" / "daemonset-textfile.yaml",
        EXAMPLES / "kubernetes" / "node-problem-detector.yaml",
    ]
    for path in sources:
        text = path.read_text().replace("\\\n", " ")
        for line in text.splitlines():
            m = re.search(r"(?:^|[\s(=])gpudoctor (gate|check)\b([^|;)&]*)", line.split("#")[0])
            if m:
                rest = re.sub(r'"?\$\{?[A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?\}?"?', "1", m.group(2).split("2>")[0])
                args = shlex.split(rest)
                found.append((path.name, [m.group(1)] + args))
    return found


def test_every_gpudoctor_command_in_the_examples_is_valid(monkeypatch):
    from gpudoctor.cli import cli

    monkeypatch.setenv("GPUDOCTOR_CONFIG", "")
    commands = _commands()
    assert len(commands) >= 8
    for where, argv in commands:
        cmd = cli.get_command(None, argv[0])
        args = [a if not a.startswith("{") else "1" for a in argv[1:]]
        ctx = cmd.make_context(argv[0], args)  # raises a UsageError for an unknown or invalid option
        assert ctx.params is not None, where


def test_scripts_are_valid_shell():
    for path in (EXAMPLES / "slurm").glob("*.sh"):
        assert subprocess.run(["sh", "-n", str(path)]).returncode == 0, path
        assert os.access(path, os.X_OK), path
    nhc = EXAMPLES / "slurm" / "nhc" / "gpudoctor.nhc"
    assert subprocess.run(["bash", "-n", str(nhc)]).returncode == 0


def _instructions(text):
    """(KEYWORD, arguments) of each Dockerfile instruction, comments dropped, continuations joined."""
    out = []
    for line in text.replace("\\\n", " ").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _sep, rest = line.partition(" ")
            out.append((word.upper(), " ".join(rest.split())))
    return out


def test_dockerfile_instructions_are_the_ones_the_docs_describe():
    dockerfile = _instructions((EXAMPLES / "docker" / "Dockerfile").read_text())
    block = re.search(r"```dockerfile\n(.*?)```", DOCS.read_text(), re.DOTALL).group(1)
    assert _instructions(block) == dockerfile
    kw = dict(dockerfile)
    entry = json.loads(kw["ENTRYPOINT"])
    assert entry[:2] == ["gpudoctor", "gate"] and entry[-1] == "--"
    health = kw["HEALTHCHECK"]
    assert json.loads(health[health.index("CMD") + 4 :])[:2] == ["gpudoctor", "gate"]
    assert json.loads(kw["CMD"]) == ["python", "train.py"]


def test_dockerfile_entrypoint_gates_and_execs_for_real(tmp_path):
    try:
        site, libdir = build_fake_cuda(tmp_path / "fake")
    except GccMissing:
        pytest.skip("gcc is not installed: cannot build the fake libcuda.so.1")
    kw = _instructions((EXAMPLES / "docker" / "Dockerfile").read_text())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUDOCTOR_", "FAKE_CUDA"))}
    env.update(GPUDOCTOR_CONFIG="", PYTHONPATH=str(site), LD_LIBRARY_PATH=str(libdir))
    for word, args in kw:
        if word == "ENV":
            env.update(dict(pair.split("=", 1) for pair in shlex.split(args)))
    entry = json.loads(dict(kw)["ENTRYPOINT"])
    argv = [sys.executable, "-m", "gpudoctor"] + entry[1:] + [sys.executable, "-c", "import sys; sys.exit(5)"]
    healthy = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=dict(env, FAKE_CUDA_COUNT="1"))
    assert healthy.returncode == 5, healthy.stderr  # the job's own status: it was exec'd
    # the same ENTRYPOINT on a node whose GPU cannot open a context, waiting 2 s instead of 120 s
    short = [("2" if i and argv[i - 1] == "--wait" else a) for i, a in enumerate(argv)]
    broken = subprocess.run(
        short, capture_output=True, text=True, timeout=120, env=dict(env, FAKE_CUDA_COUNT="1", FAKE_CUDA_CTX_FAIL="0")
    )
    assert broken.returncode == 1 and "cuda.context" in broken.stderr and "job not started" in broken.stderr
