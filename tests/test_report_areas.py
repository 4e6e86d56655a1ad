"""The report a person reads: areas, folded noise, headline first, next steps last.

Rendered through the real CLI from facts fixtures of a healthy GPU machine, a
broken one and a CPU-only one, plus the live machine (``check --offline``);
the assertions are about structure (headers, folded counts, next steps), not
exact prose.
"""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console

from _foundation import env_with, run_gpudoctor
from conftest import FIXTURES
from gpudoctor.areas import AREAS, area_for, area_rank
from gpudoctor.engine import Report, evaluate
from gpudoctor.model import Check, Command, Finding, Status
from gpudoctor.render.console import render_console
from gpudoctor.render.layout import layout
from gpudoctor.testing import make_facts

GPU = FIXTURES / "facts" / "gpu"
HEALTHY = GPU / "devices-ok.json"
BROKEN = GPU / "driver-too-old-a100.json"
CPU_ONLY = FIXTURES / "facts" / "no-gpu-cpu-torch.json"

HEADER_RE = re.compile(r"^\[(ok|n/a|warn|FAIL|ERROR)\] (.+) \((\d+) checks?(?:, \d+ findings)?\): (.+)$")


def headers(out: str) -> dict[str, tuple[str, int, str]]:
    """Area title -> (mark, number of checks, counts text), from the piped console output."""
    found = {}
    for line in out.splitlines()[1:]:
        m = HEADER_RE.match(line)
        if m:
            found[m.group(2)] = (m.group(1), int(m.group(3)), m.group(4))
    return found


def check(*args: str):
    return run_gpudoctor("check", *args)


def test_healthy_gpu_machine_reads_as_one_line_per_area():
    proc = check("--facts", str(HEALTHY))
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("[ok] gpudoctor: OK — CUDA works in [current]")
    hs = headers(proc.stdout)
    assert list(hs)[:2] == ["GPU stack", "CUDA libraries and frameworks"]
    doc = json.loads(check("--facts", str(HEALTHY), "--format", "json").stdout)
    assert hs["GPU stack"][0] == "ok"
    assert hs["GPU stack"][1] == len({f["check"] for f in doc["findings"] if f["area"] == "gpu"})
    # nothing needs attention: no finding on a line of its own except info, no next steps
    assert not [ln for ln in lines if re.match(r"^  \[(ok|skip|warn|FAIL|ERROR)\]", ln)]
    assert "Next steps:" not in proc.stdout


def test_broken_machine_headline_details_and_next_steps():
    proc = check("--facts", str(BROKEN))
    assert proc.returncode == 1
    lines = proc.stdout.rstrip().splitlines()
    assert lines[0].startswith("[FAIL] gpudoctor: FAIL — CUDA is unavailable in [current]: the NVIDIA driver 470.82.01")
    assert headers(proc.stdout)["GPU stack"][0] == "FAIL"
    # the failing findings are shown with their explanation; the headline's copy of the
    # root cause is not repeated in full
    assert any(ln.startswith("  [FAIL] cuda.driver  the NVIDIA driver 470.82.01") for ln in lines)
    assert proc.stdout.count("Fix it one of these ways") == 1
    assert "      root cause and remedy: see cuda.driver below" in lines
    # the next steps come last, numbered, the preferred remedy first
    i = lines.index("Next steps:")
    steps = lines[i + 1 :]
    assert steps and all(re.match(rf"^  {n}\. ", s) for n, s in enumerate(steps, 1))
    assert steps[0] == "  1. sudo ubuntu-drivers install   # cuda.driver (needs root)"


@pytest.mark.parametrize(
    "fixture, follower, cause, step",
    [
        # a container started without the NVIDIA runtime: libcuda missing follows from the unusable driver
        (GPU / "libcuda-missing-in-container.json", "cuda.libcuda", "nvidia.driver", "docker run --gpus all <image>"),
        # an empty CUDA_VISIBLE_DEVICES: cuda.devices and platform.visibility see the same cause
        (
            GPU / "devices-cuda-visible-empty.json",
            "cuda.devices",
            "platform.visibility",
            "unset CUDA_VISIBLE_DEVICES",
        ),
    ],
)
def test_a_finding_with_the_same_cause_points_at_it_instead_of_repeating_the_remedy(fixture, follower, cause, step):
    out = check("--facts", str(fixture)).stdout
    lines = out.splitlines()
    i = next(n for n, ln in enumerate(lines) if ln.startswith(f"  [FAIL] {follower}  "))
    assert lines[i + 1] == f"      same cause as {cause}: its remedy repairs this too"
    # the headline points at the finding that carries the remedy, not at the follower
    assert "      root cause and remedy: see " + cause + " below" in lines
    steps = lines[lines.index("Next steps:") + 1 :]
    assert len(steps) == 1 and steps[0].startswith(f"  1. {step}") and cause in steps[0]
    # -v prints every explanation in full
    verbose = check("--facts", str(fixture), "-v").stdout
    assert "same cause as" not in verbose
    doc = json.loads(check("--facts", str(fixture), "--format", "json").stdout)
    (f,) = [f for f in doc["findings"] if f["check"] == follower]
    assert f["caused_by"] == [cause] and f["explanation"]  # the document keeps the full text


def test_a_kernel_whose_interpreter_is_gone_is_told_once_by_jupyter_kernels(tmp_path):
    """torch.install cannot probe the kernel's interpreter because it was deleted: jupyter.kernels names
    that cause with the fix, so torch.install points at it and the headline names jupyter.kernels."""
    spec = tmp_path / "share" / "jupyter" / "kernels" / "gpu"
    spec.mkdir(parents=True)
    argv = ["/nonexistent/venv/bin/python", "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "GPU", "language": "python"}))
    env = env_with(JUPYTER_PATH=str(tmp_path / "share" / "jupyter"), NO_COLOR="1")
    out = run_gpudoctor("check", "--offline", "torch.install", "jupyter.kernels", env=env).stdout
    lines = out.splitlines()
    assert lines[0].startswith("[FAIL] gpudoctor: FAIL — jupyter.kernels: kernel gpu runs"), lines[0]
    i = next(n for n, ln in enumerate(lines) if ln.startswith("  [FAIL] torch.install  could not inspect [kernel:gpu]"))
    assert lines[i + 1] == "      same cause as jupyter.kernels: its remedy repairs this too"
    steps = lines[lines.index("Next steps:") + 1 :]
    assert steps[0].startswith("  1. gpudoctor fix jupyter.kernel-argv")
    assert not any("torch.install" in s for s in steps)


def test_nouveau_without_torch_points_at_the_driver_then_torch_install():
    out = check("--facts", str(FIXTURES / "facts" / "gpu-nouveau-no-torch.json")).stdout
    lines = out.splitlines()
    assert "nouveau" not in lines[0] and "no usable NVIDIA driver; and torch is not installed" in lines[0]
    assert "      root cause and remedy: see nvidia.driver, then torch.install below" in lines
    steps = lines[lines.index("Next steps:") + 1 :]
    assert steps[0].startswith("  1. sudo ubuntu-drivers install   # nvidia.driver (needs root)")
    assert steps[1].startswith("  2. gpudoctor check   # torch.install")  # the wheel is chosen once the driver works


def test_cpu_only_machine_folds_every_skip_into_its_area():
    proc = check("--facts", str(CPU_ONLY))
    out = proc.stdout
    assert proc.returncode == 0
    assert out.splitlines()[0].startswith("[ok] gpudoctor: OK — CUDA is unavailable in [current]: no NVIDIA GPU")
    assert not [ln for ln in out.splitlines() if ln.lstrip().startswith("[skip]")]
    gpu = headers(out)["GPU stack"]
    folded = re.search(r"^  (\d+) not applicable: (.*)$", out, re.MULTILINE)
    assert folded and int(folded.group(1)) == int(re.search(r"(\d+) not applicable", gpu[2]).group(1))
    # the same reason shared by two checks is said once, naming both
    assert out.count("is a CPU-only build: no CUDA runtime, cuDNN or kernels (cuda.driver, cuda.arch)") == 1
    verbose = check("--facts", str(CPU_ONLY), "-v").stdout
    skips = [ln for ln in verbose.splitlines() if ln.startswith("  [skip] ")]
    n_skip = json.loads(check("--facts", str(CPU_ONLY), "--format", "json").stdout)["counts"]["skip"]
    assert len(skips) == n_skip > 5


@pytest.mark.slow
def test_live_offline_report_lists_no_skip_on_its_own_line_and_verbose_lists_them(tmp_path):
    env = env_with(
        HOME=str(tmp_path),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
    )
    plain = run_gpudoctor("check", "--offline", env=env)
    assert plain.returncode in (0, 1), plain.stderr
    assert not [ln for ln in plain.stdout.splitlines() if "[skip]" in ln]
    assert "GPU stack" in headers(plain.stdout) and "Package sources" in headers(plain.stdout)
    doc = json.loads(run_gpudoctor("check", "--offline", "--format", "json", env=env).stdout)
    verbose = run_gpudoctor("check", "--offline", "-v", env=env).stdout
    assert len([ln for ln in verbose.splitlines() if ln.startswith("  [skip] ")]) == doc["counts"]["skip"]
    assert {f["area"] for f in doc["findings"]} <= set(AREAS)


def test_area_for_uses_the_declared_area_then_the_longest_id_prefix():
    assert area_for("cudnn.load") == "libraries"
    assert area_for("cuda.driver") == "gpu"
    assert area_for("cuda.libraries") == "libraries"  # the longer prefix wins over "cuda"
    assert area_for("pip.mirror") == "sources"
    assert area_for("jupyter.kernels") == "notebooks"
    assert area_for("acme.thing") == "other"
    assert area_for("cuda.driver", "platform") == "platform"
    assert area_rank("gpudoctor") < area_rank("gpu") < area_rank("sources") < area_rank("acme") < area_rank("other")


def test_a_plugin_declares_its_own_area_and_it_gets_a_header():
    plugin = Check(
        "acme.fabric",
        "fabric",
        (),
        lambda facts: [
            Finding("acme.fabric", Status.WARN, "fabric degraded", "Run:\n\n```\nacme-ctl repair --all\n```")
        ],
        area="Acme fabric",
    )
    builtin = Check("cuda.toolkit", "toolkit", (), lambda facts: [Finding("cuda.toolkit", Status.OK, "fine")])
    findings = evaluate([builtin, plugin], make_facts())
    assert [f.area for f in findings] == ["gpu", "Acme fabric"]
    buf = io.StringIO()
    render_console(Report(tuple(findings), make_facts()), Console(file=buf, no_color=True, soft_wrap=True), False)
    out = buf.getvalue()
    assert "[warn] Acme fabric (1 check): 1 warning" in out
    assert out.index("GPU stack") < out.index("Acme fabric")
    # a command in a plug-in's explanation that gpudoctor does not know is not offered as a step
    assert "Next steps:\n  1. read acme.fabric above" in out


def test_next_steps_read_the_commands_field_never_the_explanation():
    """The remedy is data (``Finding.commands``): a command written only in the Markdown is not a step,
    and the first command (with its safety note) is, whatever its first word."""
    from gpudoctor.model import Command

    prose = Finding(check="x.prose", status=Status.FAIL, summary="prose", explanation="Run `sudo apt-get install foo`.")
    data = Finding(
        check="x.data",
        status=Status.FAIL,
        summary="data",
        explanation="anything",
        commands=(
            Command("acme-tool --repair /dev/acme0", "repair the fabric", "root"),
            Command("acme-tool --status", "show the fabric", "safe"),
        ),
    )
    lay = layout(Report(findings=(prose, data), facts=make_facts()))
    steps = [(s.command, s.is_command, s.note) for s in lay.next_steps]
    assert steps == [("read x.prose above", False, ""), ("acme-tool --repair /dev/acme0", True, "needs root")]


def test_info_summaries_are_said_once_and_the_headline_is_not_repeated():
    fs = (
        Finding("cuda.available", Status.INFO, "CUDA is unavailable: no GPU", area="gpu"),
        Finding("jupyter.kernels", Status.INFO, "pitfall", target="kernel:a"),
        Finding("jupyter.kernels", Status.INFO, "pitfall", target="kernel:a"),
        Finding("jupyter.kernels", Status.SKIP, "no kernel", target="kernel:b"),
        Finding("jupyter.kernels", Status.SKIP, "no kernel", target="kernel:b"),
    )
    lay = layout(Report(fs, make_facts()))
    gpu, notebooks = lay.areas
    assert gpu.info == () and lay.headline == "CUDA is unavailable: no GPU"
    assert len(notebooks.info) == 1
    assert [(g.reason, g.checks) for g in notebooks.skipped] == [("[kernel:b] no kernel", ("jupyter.kernels",))]


def test_every_installed_check_has_a_known_area():
    """A built-in check never lands in ``other``: its id prefix (or its declared area) names one."""
    from gpudoctor.registry import load_registry

    registry = load_registry()
    assert registry.checks
    unplaced = [
        c.id
        for c in registry.checks.values()
        if area_for(c.id, c.area) not in AREAS or area_for(c.id, c.area) == "other"
    ]
    assert unplaced == []


def test_the_headline_names_the_worst_problem_even_when_cuda_works():
    proc = check("--facts", str(FIXTURES / "facts" / "devices" / "xid-79-fallen-off-bus.json"))
    first = proc.stdout.splitlines()[0]
    assert proc.returncode == 1
    assert first.startswith("[FAIL] gpudoctor: FAIL — devices.xid: fatal XID 79")
    assert first.endswith("CUDA works in [current]: 1 GPU (NVIDIA H100 80GB HBM3)")


def test_several_failures_are_counted_in_the_headline_and_each_target_is_labelled():
    out = check("--facts", str(FIXTURES / "facts" / "three-targets.json")).stdout
    assert re.match(r"^\[FAIL\] gpudoctor: FAIL — torch\.install: .* \(\+1 more\); CUDA is unavailable", out)
    assert "  [info] torch.install  [current] torch 2.13.0+cpu" in out  # several targets: each one named
    assert "GPU stack (9 checks, 23 findings)" in out or re.search(r"GPU stack \(\d+ checks, \d+ findings\)", out)


def test_next_steps_skip_placeholders_and_repeated_verdicts():
    fs = (
        Finding("cuda.available", Status.FAIL, "CUDA is unusable: Ray gave no GPU", "See `platform.visibility`."),
        Finding("platform.visibility", Status.FAIL, "Ray gave no GPU", "Ask for one: `@ray.remote(num_gpus=1)`."),
        Finding("cuda.devices", Status.FAIL, "Ray gave no GPU", "Same."),
        Finding(
            "torch.install",
            Status.WARN,
            "old",
            "Run `pip install torch ... --index-url` then\n\n```\n/venv/bin/python -m pip install torch==2.5.1\n```",
            commands=(Command("/venv/bin/python -m pip install torch==2.5.1", "torch 2.5.1", "changes"),),
        ),
    )
    steps = layout(Report(fs, make_facts())).next_steps
    assert [(s.command, s.check) for s in steps] == [
        ("read platform.visibility above", "platform.visibility"),
        ("/venv/bin/python -m pip install torch==2.5.1", "torch.install"),
    ]


def _image_with_broken_user_pip_conf(root):
    """An image root whose /root/.config/pip/pip.conf has a damaged section header."""
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "os-release").write_text('ID=debian\nVERSION_ID="12"\nVERSION_CODENAME=bookworm\n')
    conf = root / "root" / ".config" / "pip" / "pip.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text("[global\nindex-url = https://mirror.example.org/simple\n")
    return conf


def test_next_steps_of_an_image_root_repeat_the_root_so_the_fix_edits_the_image(tmp_path):
    root = tmp_path / "image root"  # a space: the suggested command must stay copy-pasteable
    conf = _image_with_broken_user_pip_conf(root)
    flag = f"--root '{root}'"
    out = check("pip", "--root", str(root), "--offline").stdout
    steps = out.splitlines()[out.splitlines().index("Next steps:") + 1 :]
    assert steps == [f"  1. gpudoctor fix pip.index-url {flag}   # pip.config"]
    assert f"      fix: gpudoctor fix pip.index-url {flag}" in out.splitlines()
    md = check("pip", "--root", str(root), "--offline", "--format", "markdown").stdout
    assert f"Fix: `gpudoctor fix pip.index-url {flag}`" in md
    assert f"1. `gpudoctor fix pip.index-url {flag}` (pip.config)" in md
    # `gpudoctor fix` without an id lists the offers with the same options
    listed = run_gpudoctor("fix", "--root", str(root), "--offline").stdout
    assert f"apply with: gpudoctor fix pip.index-url {flag} --offline   " in listed
    assert f"(or gpudoctor fix --all {flag} --offline;" in listed
    # and the suggested command plans the edit of the image's file
    dry = run_gpudoctor("fix", "pip.index-url", "--root", str(root), "--offline", "--dry-run")
    assert dry.returncode == 0 and f"edit /root/.config/pip/pip.conf (in --root {root})" in dry.stdout
    assert conf.read_text().startswith("[global\n")  # a dry run


def test_next_steps_on_the_live_machine_add_no_root_or_python(tmp_path):
    home = tmp_path / "home"
    (home / ".config" / "pip").mkdir(parents=True)
    (home / ".config" / "pip" / "pip.conf").write_text("[global\nindex-url = https://mirror.example.org/simple\n")
    env = env_with(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    out = run_gpudoctor("check", "pip", "--offline", env=env).stdout
    assert "  1. gpudoctor fix pip.index-url   # pip.config" in out.splitlines()


def test_fix_steps_about_a_python_target_repeat_its_python_and_machine_wide_ones_do_not():
    from gpudoctor.testing import probe_facts, target, targets

    py = "/srv/train env/bin/python"
    facts = make_facts(targets=targets(target(probe_facts(py), label=py, kind="python")))
    fs = (
        Finding(
            "jupyter.kernels",
            Status.FAIL,
            "kernel gpu is broken",
            "",
            target="kernel:gpu",
            fixes=("jupyter.kernel-argv",),
        ),
        Finding("pip.config", Status.FAIL, "pip.conf broken", "", fixes=("pip.index-url",)),
        Finding(
            "uv.mirror",
            Status.WARN,
            "uv.toml broken",
            "Then run `gpudoctor check uv.mirror` again.",
            commands=(Command("gpudoctor check uv.mirror"),),
        ),
        Finding(
            "torch.install",
            Status.WARN,
            "old",
            "Run `gpudoctor check torch --python /other/python`.",
            commands=(Command("gpudoctor check torch --python /other/python"),),
        ),
    )
    lay = layout(Report(fs, facts))
    assert [s.command for s in lay.next_steps] == [
        "gpudoctor fix jupyter.kernel-argv --python '/srv/train env/bin/python'",
        "gpudoctor fix pip.index-url",
        "gpudoctor check uv.mirror",
        "gpudoctor check torch --python /other/python",  # a command that names its own target is kept
    ]
    assert lay.fix_command(fs[0]) == "gpudoctor fix jupyter.kernel-argv --python '/srv/train env/bin/python'"


def test_two_findings_naming_each_other_as_their_cause_are_both_shown():
    """A plug-in (or a future check) could set caused_by both ways; folding both would hide the remedy."""
    from gpudoctor.render.layout import consequence_of

    a = Finding(check="x.a", status=Status.FAIL, summary="a", explanation="run a", caused_by=("x.b",))
    b = Finding(check="x.b", status=Status.FAIL, summary="b", explanation="run b", caused_by=("x.a",))
    c = Finding(check="x.c", status=Status.FAIL, summary="c", explanation="run c", caused_by=("x.b",))
    assert consequence_of(a, [a, b]) is None and consequence_of(b, [a, b]) is None
    assert consequence_of(c, [b, c]) == "x.b"  # one way only: folded
    lay = layout(Report(findings=(a, b), facts=make_facts()))
    assert lay.headline.startswith("x.a: a")


def test_every_explain_signature_lands_in_a_report_area():
    """`explain --format json` gives each match the area of its id; a signature family missing
    from PREFIX_AREAS (lib., jax., slurm., nvrm., ...) used to land in "other"."""
    from gpudoctor.explain import load_signatures

    sigs = load_signatures()
    assert len(sigs) > 200
    assert [s.id for s in sigs if area_for(s.id) == "other"] == []
    assert area_for("lib.cudnn-missing") == "libraries" and area_for("slurm.gres-undefined") == "platform"
    assert area_for("nvrm.xid") == "devices" and area_for("python.no-module-torch") == "gpu"
    assert area_for("python.headers-absent") == "libraries" and area_for("net.connect-failed") == "sources"
