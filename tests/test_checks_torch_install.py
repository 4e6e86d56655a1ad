"""``torch.install``: every status path, from JSON snapshots and from builders."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES
from gpudoctor.checks.torch_install import CHECK
from gpudoctor.engine import evaluate
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.model import Status
from gpudoctor.testing import (
    make_facts,
    no_nvidia,
    nvidia_facts,
    nvml_device,
    pci_gpus,
    probe_facts,
    target,
    targets,
    torch_facts,
)


def run_check(facts: Facts):
    findings = evaluate([CHECK], facts)
    assert findings and all(f.check == "torch.install" for f in findings)
    return findings


def from_fixture(name: str) -> Facts:
    return Facts.from_json(json.loads((FIXTURES / "facts" / name).read_text()))


def no_gpu(**domains):
    return make_facts(gpu=pci_gpus(0), nvidia=no_nvidia(), **domains)


def gpu(driver="550.54.15", **domains):
    return make_facts(gpu=pci_gpus(1), nvidia=nvidia_facts(driver, "12.4", [nvml_device()]), **domains)


# ----------------------------------------------------------------- snapshots


@pytest.mark.parametrize(
    "fixture, expected",
    [
        (
            "no-gpu-cpu-torch.json",
            [(Status.INFO, "torch 2.13.0+cpu is a CPU-only build; this machine has no NVIDIA GPU")],
        ),
        ("gpu-driver-550-cpu-torch.json", [(Status.FAIL, "is a CPU-only build, but this machine has 1 NVIDIA GPU")]),
        ("case01-driver-470-torch-cu121.json", [(Status.OK, "torch 2.1.0+cu121 (CUDA 12.1 build) imports")]),
        ("gpu-nouveau-no-torch.json", [(Status.FAIL, "PyTorch is not installed in /home/user/venv/bin/python")]),
        (
            "container-no-runtime-cudnn-missing.json",
            [(Status.FAIL, "OSError: libcudnn.so.8: cannot open shared object file: No such file or directory")],
        ),
        ("image-root-proc-470.json", [(Status.SKIP, "interpreters inside --root /mnt/image cannot be run")]),
        ("empty.json", [(Status.SKIP, "the targets facts were not collected")]),
        (
            "three-targets.json",
            [
                (Status.INFO, "CPU-only build"),
                (Status.FAIL, "undefined symbol"),
                (Status.FAIL, "did not finish within 60 s"),
            ],
        ),
    ],
)
def test_snapshot_status_paths(fixture, expected):
    findings = run_check(from_fixture(fixture))
    assert [(f.status, f.summary) for f in findings] == [
        (status, next(f.summary for f in findings if text in f.summary)) for status, text in expected
    ]
    assert len(findings) == len(expected)


def test_snapshot_cpu_build_on_gpu_machine_offers_the_exact_cuda_install_command():
    (f,) = run_check(from_fixture("gpu-driver-550-cpu-torch.json"))
    assert (
        "/home/user/venv/bin/python -m pip install --force-reinstall torch "
        "--index-url https://download.pytorch.org/whl/cu126"
    ) in f.explanation


def test_snapshot_targets_are_labelled():
    findings = run_check(from_fixture("three-targets.json"))
    assert [f.target for f in findings] == ["current", "/opt/envs/old/bin/python", "/opt/envs/hang/bin/python"]
    assert "libtorch_cuda.so" in findings[1].evidence["import_error"]
    assert "force-reinstall" in findings[1].explanation


# ----------------------------------------------------------------- builders


def test_targets_unavailable_skips():
    (f,) = run_check(no_gpu(targets=Unavailable("interpreters inside --root /img cannot be run from here")))
    assert f.status is Status.SKIP
    assert "--root /img" in f.summary


def test_probe_failure_fails_with_the_reason():
    t = target(
        Unavailable("the interpreter /opt/py/bin/python does not exist"),
        label="/opt/py/bin/python",
        kind="python",
        python="/opt/py/bin/python",
    )
    (f,) = run_check(no_gpu(targets=targets(t)))
    assert f.status is Status.FAIL
    assert f.summary == "could not inspect /opt/py/bin/python: the interpreter /opt/py/bin/python does not exist"
    assert f.target == "/opt/py/bin/python"


def test_not_installed_without_gpu_offers_cpu_wheels():
    (f,) = run_check(no_gpu(targets=targets(target(probe_facts(torch=torch_facts(installed=False))))))
    assert f.status is Status.FAIL
    assert f.summary == "PyTorch is not installed in /home/user/venv/bin/python"
    assert (
        "/home/user/venv/bin/python -m pip install --force-reinstall torch --index-url "
        "https://download.pytorch.org/whl/cpu" in f.explanation
    )


def test_not_installed_with_new_driver_offers_newest_cuda_wheels():
    facts = make_facts(
        gpu=pci_gpus(1),
        nvidia=nvidia_facts("580.65.06", "13.0", [nvml_device()]),
        targets=targets(target(probe_facts(torch=torch_facts(installed=False)))),
    )
    (f,) = run_check(facts)
    assert f.status is Status.FAIL
    assert "--index-url https://download.pytorch.org/whl/cu130" in f.explanation


def test_not_installed_with_gpu_but_no_driver_offers_a_cuda_build():
    facts = make_facts(
        gpu=pci_gpus(1, driver=None),
        nvidia=no_nvidia(),
        targets=targets(target(probe_facts(torch=torch_facts(installed=False)))),
    )
    (f,) = run_check(facts)
    assert f.status is Status.FAIL
    assert "whl/cpu" not in f.explanation
    # no driver version to match: install order first, then one command per driver branch
    text = f.explanation
    assert text.index("Make the driver work first") < text.index("--index-url")
    assert "see `nvidia.driver`" in text
    newest = "- driver 580.65.06 or newer (CUDA 13.2 build)"
    older = "- driver 525.60.13 up to 580.65.06 (CUDA 12.6 build)"
    assert text.index(newest) < text.index("whl/cu132") < text.index(older) < text.index("whl/cu126")


def test_not_installed_with_an_old_python_and_no_driver_caps_both_branches():
    """The per-branch commands respect what the target's Python can install (3.8: torch 2.4.1 at most)."""
    facts = make_facts(
        gpu=pci_gpus(1, driver=None),
        nvidia=no_nvidia(),
        targets=targets(target(probe_facts(torch=torch_facts(installed=False), python_version="3.8.18"))),
    )
    (f,) = run_check(facts)
    assert "whl/cu13" not in f.explanation  # no CUDA 13 build carries a torch for Python 3.8
    assert "torch==2.4.1" in f.explanation


@pytest.mark.parametrize(
    "error, cause",
    [
        (
            "OSError: libcudnn.so.8: cannot open shared object file: No such file or directory",
            "`libcudnn.so.8` is a CUDA library",
        ),
        ("OSError: libcublas.so.12: cannot open shared object file: No such file or directory", "`libcublas.so.12`"),
        (
            "ImportError: libcuda.so.1: cannot open shared object file: No such file or directory",
            "belongs to the NVIDIA driver",
        ),
        (
            "OSError: libgomp.so.1: cannot open shared object file: No such file or directory",
            "`libgomp.so.1` could not be found by the dynamic loader",
        ),
        (
            "ImportError: /venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so: undefined symbol: iJIT_NotifyEvent",
            "undefined symbol means torch and one of its libraries come from different versions",
        ),
        ("ImportError: numpy.core.multiarray failed to import", "pip install -U numpy"),
        ("SystemExit: 3", "pip install --force-reinstall torch"),
    ],
)
def test_import_error_fails_with_error_verbatim_and_cause(error, cause):
    tf = torch_facts("2.1.0+cu121", import_error=error)
    (f,) = run_check(no_gpu(targets=targets(target(probe_facts(torch=tf)))))
    assert f.status is Status.FAIL
    assert f.summary == f"`import torch` fails in /home/user/venv/bin/python: {error}"
    assert f"```\n{error}\n```" in f.explanation
    assert cause in f.explanation
    assert f.evidence["import_error"] == error
    assert f.evidence["torch"] == "2.1.0+cu121"


def test_rocm_build_is_info():
    tf = torch_facts("2.3.0+rocm6.0", hip="6.0.32830")
    (f,) = run_check(gpu(targets=targets(target(probe_facts(torch=tf)))))
    assert f.status is Status.INFO
    assert "ROCm (HIP 6.0.32830)" in f.summary


def test_cuda_build_is_ok():
    (f,) = run_check(gpu(targets=targets(target(probe_facts(torch=torch_facts("2.4.1+cu124", "12.4"))))))
    assert f.status is Status.OK
    assert f.summary == "torch 2.4.1+cu124 (CUDA 12.4 build) imports in /home/user/venv/bin/python"
    assert f.evidence["cuda"] == "12.4"


@pytest.mark.parametrize(
    "driver, wheel",
    [
        ("550.54.15", "cu126"),  # R550: every 12.x wheel runs; cu126 is the newest still published
        ("580.82.07", "cu130"),  # R580 runs CUDA 13.0
        ("470.86", "cu118"),  # case 01's driver: only CUDA 11.x wheels run (minor-version compatibility)
    ],
)
def test_cpu_build_on_gpu_machine_fails_with_matching_cuda_wheel(driver, wheel):
    facts = make_facts(
        gpu=pci_gpus(1),
        nvidia=nvidia_facts(driver, "12.4", [nvml_device()]),
        targets=targets(target(probe_facts("/srv/env/bin/python", torch=torch_facts("2.5.1+cpu")))),
    )
    (f,) = run_check(facts)
    assert f.status is Status.FAIL
    assert f.summary == "torch 2.5.1+cpu in /srv/env/bin/python is a CPU-only build, but this machine has 1 NVIDIA GPU"
    assert (
        f"/srv/env/bin/python -m pip install --force-reinstall torch "
        f"--index-url https://download.pytorch.org/whl/{wheel}"
    ) in f.explanation


def test_cpu_build_with_driver_too_old_for_any_wheel_says_upgrade_driver():
    facts = make_facts(
        gpu=pci_gpus(1),
        nvidia=nvidia_facts("418.87.01", "10.1", [nvml_device()]),
        targets=targets(target(probe_facts(torch=torch_facts("2.5.1+cpu")))),
    )
    (f,) = run_check(facts)
    assert f.status is Status.FAIL
    assert "too old for any current PyTorch CUDA build" in f.explanation
    assert "pip install" not in f.explanation


def test_cpu_build_counts_gpus_on_pci_when_nvml_has_none():
    facts = make_facts(
        gpu=pci_gpus(2, driver=None),
        nvidia=no_nvidia(),
        targets=targets(target(probe_facts(torch=torch_facts("2.13.0+cpu")))),
    )
    (f,) = run_check(facts)
    assert f.status is Status.FAIL
    assert "2 NVIDIA GPUs" in f.summary


def test_cpu_build_without_gpu_is_info():
    (f,) = run_check(no_gpu(targets=targets(target(probe_facts(torch=torch_facts("2.13.0+cpu"))))))
    assert f.status is Status.INFO
    assert f.summary.startswith("torch 2.13.0+cpu is a CPU-only build; this machine has no NVIDIA GPU")


def test_one_finding_per_target_in_order():
    ts = targets(
        target(probe_facts(torch=torch_facts("2.13.0+cpu"))),
        target(probe_facts("/a/bin/python", torch=torch_facts(installed=False)), label="/a/bin/python", kind="python"),
    )
    findings = run_check(no_gpu(targets=ts))
    assert [(f.target, f.status) for f in findings] == [("current", Status.INFO), ("/a/bin/python", Status.FAIL)]


def test_a_kernel_running_the_terminals_interpreter_is_reported_once():
    from gpudoctor.checks.torch_install import CHECK
    from gpudoctor.testing import (
        make_facts,
        no_nvidia,
        pci_gpus,
        probe_facts,
        target,
        targets,
    )

    same = probe_facts("/srv/venv/bin/python")
    hidden = probe_facts("/srv/venv/bin/python", env={"CUDA_VISIBLE_DEVICES": ""})
    facts = make_facts(
        targets=targets(
            target(same),
            target(same, label="kernel:python3", kind="kernel"),
            target(hidden, label="kernel:hidden", kind="kernel"),
        ),
        nvidia=no_nvidia(),
        gpu=pci_gpus(0),
    )
    assert [f.target for f in CHECK.evaluate(facts)] == ["current", "kernel:hidden"]


# ----------------------------------------------------------------- the headline when torch is missing


def _cuda_available(facts: Facts):
    from gpudoctor.checks.cuda_available import CHECK as CUDA_AVAILABLE

    (f,) = evaluate([CUDA_AVAILABLE], facts)
    return f


def test_headline_names_the_missing_driver_before_the_missing_torch():
    """nouveau bound and no torch: both are missing, and the driver comes first (the wheel is chosen for it)."""
    f = _cuda_available(from_fixture("gpu-nouveau-no-torch.json"))
    assert f.status is Status.FAIL
    assert f.summary == (
        "CUDA is unavailable in /home/user/venv/bin/python: 1 NVIDIA GPU on the PCI bus, but no usable NVIDIA "
        "driver; and torch is not installed"
    )
    assert f.evidence["root_cause_check"] == "nvidia.driver"
    assert f.explanation.index("1. The driver") < f.explanation.index("nouveau") < f.explanation.index("2. torch")


def test_headline_with_a_working_driver_does_not_blame_the_missing_torch():
    """The healthy-driver twin (issue 25): torch's absence is a fact about torch, not a verdict on CUDA. Without
    a driver API result the headline says usability is not known; with one, CUDA works."""
    f = _cuda_available(gpu(targets=targets(target(probe_facts(torch=torch_facts(installed=False))))))
    assert f.status is Status.SKIP
    assert "is not known: no GPU framework is installed (torch is not installed" in f.summary
    assert "root_cause_check" not in f.evidence
    from gpudoctor.facts.targets import CudaDriverDevice, CudaDriverProbe

    drv = CudaDriverProbe(True, None, True, None, 12040, 1, (CudaDriverDevice(0, "NVIDIA A100", context_ok=True),))
    f = _cuda_available(gpu(targets=targets(target(probe_facts(torch=torch_facts(installed=False), cuda_driver=drv)))))
    assert f.status is Status.OK
    assert f.summary == (
        "CUDA works in /home/user/venv/bin/python: cuInit works and the driver API sees 1 GPU; no GPU framework is "
        "installed (torch is not installed)"
    )
    # neighbour: cuInit fails -> the driver API's own cause, still not torch
    bad = CudaDriverProbe(True, None, False, "CUDA_ERROR_UNKNOWN (999): unknown error", 12040, 0)
    f = _cuda_available(gpu(targets=targets(target(probe_facts(torch=torch_facts(installed=False), cuda_driver=bad)))))
    assert f.status is Status.FAIL and "nvidia_uvm" in f.summary and "torch" not in f.summary


def test_cpu_build_in_a_conda_env_offers_the_conda_way_first_and_a_venv_does_not():
    """pytorch/pytorch #32369: conda gave `pytorch 1.4.0 py3.7_cpu_0 [cpuonly]`; replacing it with pip
    mixes two package managers over one package. Neighbour: the same CPU build in a venv."""
    from gpudoctor.checks.torch_install import CHECK as TI
    from gpudoctor.testing import make_facts, nvidia_facts, nvml_device, pci_gpus, probe_facts, target, targets
    from gpudoctor.testing import torch_facts as tfacts

    def finding(python, conda):
        probe = probe_facts(python, tfacts("2.1.2", None), is_conda=conda, is_venv=not conda)
        facts = make_facts(
            targets=targets(target(probe)), nvidia=nvidia_facts("535.183.01", "12.2", [nvml_device()]), gpu=pci_gpus(1)
        )
        (f,) = TI.evaluate(facts)
        return f

    f = finding("/home/user/anaconda3/envs/env2/bin/python", conda=True)
    assert f.status is Status.FAIL
    assert "conda list -p /home/user/anaconda3/envs/env2" in f.explanation
    assert 'conda install -p /home/user/anaconda3/envs/env2 -c conda-forge "pytorch=*=cuda*"' in f.explanation
    assert f.explanation.index("conda install") < f.explanation.index("pip install")
    v = finding("/home/user/venv/bin/python", conda=False)
    assert v.status is Status.FAIL and "conda" not in v.explanation


@pytest.mark.parametrize("creator", ["uv", "venv", None])
def test_the_torch_command_uses_uv_in_a_venv_made_by_uv(creator):
    """A venv made by `uv venv` has no pip: `python -m pip install` fails there with "No module named
    pip" (astral-sh/uv#2405, #2390; the kernel case vscode#254093); the command is uv's, with `--reinstall`.
    Twins: a venv made by `python -m venv` and an unknown creator keep pip's command."""
    facts = make_facts(
        gpu=pci_gpus(1),
        nvidia=nvidia_facts("550.54.15", "12.4", [nvml_device()]),
        targets=targets(
            target(probe_facts("/srv/uvenv/bin/python", torch=torch_facts("2.5.1+cpu"), venv_creator=creator))
        ),
    )
    (f,) = run_check(facts)
    assert f.status is Status.FAIL
    texts = [c.text for c in f.commands]
    if creator == "uv":
        want = "uv pip install --python /srv/uvenv/bin/python --reinstall torch"
        assert all("-m pip install" not in t for t in texts)
    else:
        want = "/srv/uvenv/bin/python -m pip install --force-reinstall torch"
        assert all("uv pip" not in t for t in texts)
    assert any(t.startswith(want) for t in texts), texts
    assert want in f.explanation


def test_install_command_forms():
    from gpudoctor.checks._common import install_command, pip_command

    assert install_command("/v/bin/python", "ipykernel") == "/v/bin/python -m pip install ipykernel"
    assert install_command("/v/bin/python", "ipykernel", "uv") == "uv pip install --python /v/bin/python ipykernel"
    assert (
        install_command("/a b/python", "--force-reinstall torch==2.5.1 --index-url https://x.example.org/whl", "uv")
        == "uv pip install --python '/a b/python' --reinstall torch==2.5.1 --index-url https://x.example.org/whl"
    )
    assert install_command("py", "--force-reinstall torch", "virtualenv") == "py -m pip install --force-reinstall torch"
    assert install_command("/v/bin/python", "'torch==2.6.*'") == "/v/bin/python -m pip install 'torch==2.6.*'"
    assert pip_command("/a b/python", "check", "", "uv") == "uv pip check --python '/a b/python'"
    assert pip_command("/v/bin/python", "check") == "/v/bin/python -m pip check"


@pytest.mark.parametrize("creator", ["uv", "venv"])
@pytest.mark.parametrize("shell", ["sh", "bash"])
def test_install_command_runs_as_printed_from_a_path_with_spaces_and_quotes(tmp_path, creator, shell):
    """The printed command, pasted into a shell, reaches the interpreter with the words intact: a
    path with a space and a quote, and ``torch==2.6.*`` next to a file the glob would match.
    The interpreter (and ``uv``) are stand-in scripts that record their argv."""
    import shutil
    import subprocess

    from gpudoctor.checks._common import pip_install_command

    if shutil.which(shell) is None:
        pytest.skip(f"no {shell}")
    bindir = tmp_path / "my env's dir" / "bin"
    bindir.mkdir(parents=True)
    record = tmp_path / "argv.txt"
    for tool in ("python", "uv"):
        (bindir / tool).write_text(f"#!/bin/sh\nprintf '%s\\n' \"$0\" \"$@\" > '{record}'\n")
        (bindir / tool).chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    (work / "torch==2.6.1").write_text("")  # what an unquoted torch==2.6.* would expand to
    python = str(bindir / "python")
    cmd = pip_install_command(python, {"index_url": "https://x.example.org/whl"}, "2.6.*", venv_creator=creator)
    env = {"PATH": f"{bindir}:/usr/bin:/bin"}
    subprocess.run([shell, "-c", cmd], cwd=work, env=env, check=True, timeout=30)
    argv = record.read_text().splitlines()
    if creator == "uv":
        assert argv[1:] == [
            "pip",
            "install",
            "--python",
            python,
            "--reinstall",
            "torch==2.6.*",
            "--index-url",
            "https://x.example.org/whl",
        ]
    else:
        assert argv[0] == python
        assert argv[1:] == [
            "-m",
            "pip",
            "install",
            "--force-reinstall",
            "torch==2.6.*",
            "--index-url",
            "https://x.example.org/whl",
        ]


def _corpus_commands(creator):
    """Every command of every check over the facts fixtures and the field corpus, with each probed
    target's venv marked as made by ``creator``."""
    import dataclasses
    import json
    from pathlib import Path

    from gpudoctor.checks import SkipCheck
    from gpudoctor.facts import Facts
    from gpudoctor.facts.targets import ProbeFacts, TargetsFacts
    from gpudoctor.registry import load_registry

    here = Path(__file__).parent
    checks = load_registry().checks.values()
    out = []
    for path in [*here.glob("fixtures/facts/**/*.json"), *here.glob("field/cases/**/facts.json")]:
        try:
            facts = Facts.from_json(json.loads(path.read_text()))
        except Exception:  # a fixture of another shape (devices/, frameworks/)
            continue
        tf = facts.of(TargetsFacts)
        if not isinstance(tf, TargetsFacts):
            continue
        marked = tuple(
            dataclasses.replace(t, probe=dataclasses.replace(t.probe, venv_creator=creator))
            if isinstance(t.probe, ProbeFacts)
            else t
            for t in tf.targets
        )
        facts = facts.with_domains(targets=dataclasses.replace(tf, targets=marked))
        exes = [t.probe.executable for t in tf.targets if isinstance(t.probe, ProbeFacts)]
        for check in checks:
            try:
                findings = check.evaluate(facts)
            except SkipCheck:
                continue
            out.extend((check.id, c.text) for f in findings for c in f.commands)
            # the explanation's own commands for a probed interpreter, marked "explanation"
            out.extend(
                (check.id, "explanation: " + f.explanation[f.explanation.index(f"{e} -m pip ") :][:80])
                for f in findings
                for e in exes
                if f"{e} -m pip " in f.explanation
            )
    return out


def test_no_install_command_uses_pip_in_a_venv_made_by_uv():
    """Every check that installs into a probed target (torch builds, CUDA wheels for other frameworks,
    cuDNN, nvcc pins, Triton, the driver-branch pins, pip check) uses uv's installer in a venv made by
    `uv venv`, in its commands and in its explanation. Twin: the same corpus in a venv made by
    `python -m venv` uses pip and never uv."""
    uv = [(cid, t) for cid, t in _corpus_commands("uv") if " pip " in t]
    assert len({cid for cid, _ in uv}) >= 6, uv
    assert any(t.startswith("uv pip check --python ") for _, t in uv)
    # the one pip form left: a command for no probed interpreter (literally `python`)
    assert [(cid, t) for cid, t in uv if "-m pip " in t and not t.startswith("python -m")] == []
    venv_all = [(cid, t) for cid, t in _corpus_commands("venv") if " pip " in t]
    venv = [(cid, t) for cid, t in venv_all if not t.startswith("explanation: ")]
    assert len(venv) == len(uv) and all("uv pip" not in t for _, t in venv)
    assert len(venv_all) > len(venv)  # the twin's explanations do show pip for the probed interpreter
