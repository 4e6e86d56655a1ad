"""Jupyter kernels: kernelspec collection, kernels as targets, ``jupyter.kernels``, kernel.json fix planners.

Real kernelspecs in temporary JUPYTER_PATH/HOME, real interpreters (this
test venv with torch 2.13.0 and ipykernel, a bare ``--without-pip`` venv, a
deleted one), jupyter_client itself as the judge of what Jupyter lists, and
facts fixtures for the GPU-side cases no CPU machine can produce.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from gpudoctor import engine
from gpudoctor.checks.jupyter_kernels import CHECK, cvd_hides_all, gpu_hiding_vars
from gpudoctor.collect import CollectContext, CollectOptions, all_collectors
from gpudoctor.collect.jupyter import collect as collect_jupyter
from gpudoctor.collect.jupyter import kernel_environment, resolve_interpreter
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.base import from_jsonable, to_jsonable
from gpudoctor.facts.jupyter import JupyterFacts, KernelInterpreter, KernelSpecFacts
from gpudoctor.facts.targets import TargetsFacts
from gpudoctor.fixes import jupyter_kernel_argv, jupyter_kernel_env, jupyter_register
from gpudoctor.model import FixRefused, Status
from gpudoctor.system import Files, System
from gpudoctor.testing import make_facts, probe_facts, target, targets, torch_facts

CASE13 = Path(__file__).resolve().parent / "fixtures" / "cases" / "13-kernel-argv-system-python"


def spec_json(argv, display, env=None, language="python", indent=1):
    d = {"argv": list(argv), "display_name": display, "language": language}
    if env is not None:
        d["env"] = env
    return json.dumps(d, indent=indent) + "\n"


def write_spec(kdir: Path, name: str, text: str) -> Path:
    (kdir / name).mkdir(parents=True, exist_ok=True)
    (kdir / name / "kernel.json").write_text(text)
    return kdir / name / "kernel.json"


def ipk_argv(python):
    return [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"]


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    """A real venv without pip, torch or ipykernel."""
    d = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(d)], check=True)
    return str(d / "bin" / "python")


def live_system(home: Path, **env) -> System:
    base = {
        "HOME": str(home),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "JUPYTER_PREFER_ENV_PATH": "0",
    }
    base.update({k: str(v) for k, v in env.items()})
    return System(env=base, home=str(home))


def collect_domains(system: System, options: CollectOptions, *checks):
    collectors = all_collectors()
    domains = engine.needed_domains(checks, collectors)
    facts, errors = engine.collect_facts(domains, system, options, collectors)
    assert errors == []
    return facts


def jupyter_client_listing(env: dict) -> dict:
    """What jupyter_client itself lists (name -> {resource_dir, argv}), in a clean process with ``env``."""
    code = (
        "import json; from jupyter_client.kernelspec import KernelSpecManager as K; m = K(); "
        "print(json.dumps({n: {'resource_dir': d['resource_dir'], 'argv': d['spec']['argv']} "
        "for n, d in m.get_all_specs().items()}))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


# --------------------------------------------------------------------------- collector


def test_collector_finds_every_kernelspec_as_jupyter_does_and_resolves_interpreters(tmp_path, python):
    home = tmp_path / "home"
    jp1, jp2, data = tmp_path / "jp1" / "kernels", tmp_path / "jp2" / "kernels", tmp_path / "data"
    conda = tmp_path / "conda"
    (conda / "bin").mkdir(parents=True)
    (conda / "bin" / "conda").write_text("#!/bin/sh\n")
    (conda / "bin" / "conda").chmod(0o755)
    (conda / "envs" / "ml" / "bin").mkdir(parents=True)
    os.symlink(python, conda / "envs" / "ml" / "bin" / "python")
    write_spec(jp1, "Plain", spec_json(ipk_argv("python"), "Plain"))
    write_spec(
        jp1,
        "condaml",
        spec_json(
            [
                str(conda / "bin" / "conda"),
                "run",
                "--no-capture-output",
                "-n",
                "ml",
                "python",
                "-m",
                "ipykernel_launcher",
                "-f",
                "{connection_file}",
            ],
            "ML",
        ),
    )
    write_spec(
        jp1,
        "wrapped",
        spec_json(
            [
                "env",
                "OMP_NUM_THREADS=4",
                "CUDA_DEVICE_ORDER=PCI_BUS_ID",
                "python3",
                "-m",
                "ipykernel_launcher",
                "-f",
                "{connection_file}",
            ],
            "W",
            env={"LD_LIBRARY_PATH": "/opt/cudnn/lib:${LD_LIBRARY_PATH}", "X": "$UNSET_VAR"},
        ),
    )
    write_spec(jp1, "gone", spec_json(ipk_argv("/nonexistent/venv/bin/python"), "Gone"))
    write_spec(jp1, "ir", spec_json(["R", "--slave", "-f", "{connection_file}"], "R", language="R"))
    write_spec(jp2, "gone", spec_json(ipk_argv(python), "Gone (older copy)"))
    write_spec(data / "kernels", "datadir", spec_json(ipk_argv(python), "From JUPYTER_DATA_DIR"))
    (jp1 / "broken").mkdir()
    (jp1 / "broken" / "kernel.json").write_text("{not json")
    system = live_system(
        home,
        JUPYTER_PATH=f"{jp1.parent}{os.pathsep}{jp2.parent}",
        JUPYTER_DATA_DIR=data,
        LD_LIBRARY_PATH="/usr/local/cuda/lib64",
        PATH=f"{Path(python).parent}:/usr/bin:/bin",
    )
    facts = collect_jupyter(CollectContext(system, CollectOptions(extra={"jupyter_python": python})))
    assert isinstance(facts, JupyterFacts)

    # same names and directories as jupyter_client itself lists with that environment
    listed = jupyter_client_listing(dict(system.env))
    ours = {k.name: k for k in facts.kernels}
    assert {n: d["resource_dir"] for n, d in listed.items()} == {
        n: k.resource_dir for n, k in ours.items() if k.error is None
    }
    assert facts.kernel_dirs[:2] == (str(jp1), str(jp2))
    assert str(data / "kernels") in facts.kernel_dirs and facts.data_dir == str(data)

    plain = ours["plain"]  # directory "Plain": the name is lower-cased
    assert plain.interpreter == KernelInterpreter(
        python, 0, "server-python", True, note="`python` is replaced by the Jupyter server's interpreter"
    )
    ml = ours["condaml"].interpreter
    assert (ml.via, ml.conda_env, ml.path, ml.argv_index, ml.exists) == (
        "conda-run",
        "ml",
        str(conda / "envs" / "ml" / "bin" / "python"),
        5,
        True,
    )
    w = ours["wrapped"]
    assert w.interpreter.via == "env" and w.interpreter.argv_index == 3
    assert w.interpreter.path == str(Path(python).parent / "python3")
    assert w.interpreter.wrapper_env == {"OMP_NUM_THREADS": "4", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    # ${VAR} substituted from the server's environment; unknown names left verbatim (safe_substitute)
    assert w.env_resolved == {"LD_LIBRARY_PATH": "/opt/cudnn/lib:/usr/local/cuda/lib64", "X": "$UNSET_VAR"}
    kenv = kernel_environment(dict(system.env, PYTHONEXECUTABLE="/x"), w.env, "python")
    assert kenv["LD_LIBRARY_PATH"] == "/opt/cudnn/lib:/usr/local/cuda/lib64" and "PYTHONEXECUTABLE" not in kenv
    gone = ours["gone"]
    assert gone.interpreter.exists is False and gone.shadowed == (str(jp2 / "gone"),)
    assert ours["ir"].is_python is False and ours["ir"].interpreter is None
    assert ours["broken"].error and "broken" not in listed
    assert ours["datadir"].display_name == "From JUPYTER_DATA_DIR"
    assert plain.kernel_json_text == (jp1 / "Plain" / "kernel.json").read_text()


def test_server_python_comes_from_the_jupyter_command_on_path(tmp_path, python):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "jupyter").write_text(f"#!{python}\nimport sys\n")
    (bindir / "jupyter").chmod(0o755)
    system = live_system(tmp_path, PATH=f"{bindir}:/usr/bin:/bin", JUPYTER_PATH=tmp_path / "none")
    facts = collect_jupyter(CollectContext(system, CollectOptions()))
    assert facts.server_python == python
    assert str(bindir / "jupyter") in facts.server_python_source


def test_resolve_interpreter_cases(tmp_path):
    files = Files(Path("/"))
    env = {"PATH": "/nonexistent-dir"}
    assert resolve_interpreter((), "/srv/py", "3.11", env, files) is None
    other = resolve_interpreter(("python3.8", "-m", "ipykernel"), "/srv/py", "3.11", env, files)
    assert (other.via, other.exists, other.path) == ("path-lookup", False, "python3.8")  # not the server's version
    same = resolve_interpreter(("python3.11",), "/srv/py", "3.11", env, files)
    assert (same.via, same.path) == ("server-python", "/srv/py")
    missing_env = resolve_interpreter(
        ("conda", "run", "-n", "nope", "python"), "/srv/py", "3.11", env, files, home=str(tmp_path)
    )
    assert missing_env.via == "conda-run" and missing_env.exists is False


def test_collector_is_unavailable_inside_an_image_root(tmp_path):
    system = System(files=Files(tmp_path), env={})
    assert isinstance(collect_jupyter(CollectContext(system, CollectOptions())), Unavailable)


# --------------------------------------------------------------------------- check with real interpreters


@pytest.mark.slow
def test_check_judges_real_kernels_against_the_terminal(tmp_path, python, bare_python):
    jp = tmp_path / "jp" / "kernels"
    write_spec(jp, "good", spec_json(ipk_argv(python), "Python (good)"))
    write_spec(jp, "plain", spec_json(ipk_argv("python"), "Python (good)"))
    write_spec(jp, "bare", spec_json(ipk_argv(bare_python), "Bare"))
    write_spec(jp, "gone", spec_json(ipk_argv(str(tmp_path / "deleted" / "bin" / "python")), "Gone"))
    write_spec(jp, "hidden", spec_json(ipk_argv(python), "Hidden", env={"CUDA_VISIBLE_DEVICES": ""}))
    system = live_system(tmp_path, JUPYTER_PATH=jp.parent)
    options = CollectOptions(extra={"jupyter_python": python})
    facts = collect_domains(system, options, CHECK)

    tf = facts.of(TargetsFacts)
    assert tf.targets[0].kind == "current"
    kt = {t.label: t for t in tf.targets if t.kind == "kernel"}
    assert {"kernel:good", "kernel:plain", "kernel:bare", "kernel:gone", "kernel:hidden"} <= set(kt)
    assert kt["kernel:good"].probe.torch.version.startswith("2.13.0")
    assert kt["kernel:good"].probe.distributions["ipykernel"]
    assert kt["kernel:plain"].python == python
    assert kt["kernel:bare"].probe.torch.installed is False and kt["kernel:bare"].probe.distributions == {}
    assert isinstance(kt["kernel:gone"].probe, Unavailable)
    assert kt["kernel:hidden"].probe.env["CUDA_VISIBLE_DEVICES"] == ""
    assert kt["kernel:hidden"].env_overrides == {"CUDA_VISIBLE_DEVICES": ""}

    findings = CHECK.evaluate(facts)
    by = {f.evidence.get("kernel"): f for f in findings if f.evidence.get("kernel")}
    assert by["good"].status is Status.OK and by["plain"].status is Status.OK
    assert by["gone"].status is Status.FAIL and "does not exist" in by["gone"].summary
    assert set(by["gone"].fixes) == {"jupyter.kernel-argv", "jupyter.register"}
    assert by["bare"].status is Status.FAIL and "ipykernel is not installed" in by["bare"].summary
    assert f"{bare_python} -m pip install ipykernel" in by["bare"].explanation
    assert by["hidden"].status is Status.FAIL and "hides every GPU" in by["hidden"].summary
    assert by["hidden"].fixes == ("jupyter.kernel-env",)
    dup = [f for f in findings if f.status is Status.WARN]
    assert len(dup) == 1 and dup[0].evidence["kernels"] == ["good", "plain"]
    summary = findings[-1]
    assert summary.status is Status.FAIL and set(summary.evidence["failing"]) == {"bare", "gone", "hidden"}

    # the fixes plan real edits of the real files
    assert jupyter_kernel_env.plan(facts, by["hidden"], {"kernel": "gone"}) is None  # --set kernel=gone
    assert "gpudoctor fix jupyter.kernel-env --set kernel=hidden" in by["hidden"].explanation
    plan = jupyter_kernel_env.plan(facts, by["hidden"], {"kernel": "hidden"})
    (edit,) = plan.edits
    assert edit.path == str(jp / "hidden" / "kernel.json") and edit.old_text == Path(edit.path).read_text()
    assert json.loads(edit.new_text) == {"argv": ipk_argv(python), "display_name": "Hidden", "language": "python"}
    plan = jupyter_kernel_argv.plan(facts, by["gone"], {})
    assert json.loads(plan.edits[0].new_text)["argv"][0] == facts.of(TargetsFacts).targets[0].probe.executable


# --------------------------------------------------------------------------- facts fixtures (GPU side)


def kspec(name="train", argv0="/usr/bin/python3", env=None, text=None, via="absolute", display=None, **kw):
    argv = tuple(ipk_argv(argv0))
    text = text if text is not None else spec_json(argv, display or name, env)
    path = f"/home/user/.local/share/jupyter/kernels/{name}/kernel.json"
    return KernelSpecFacts(
        name=name,
        resource_dir=path.rsplit("/", 1)[0],
        kernel_json=path,
        kernel_json_text=text,
        builtin=False,
        error=None,
        display_name=display or name,
        language="python",
        argv=argv,
        env=dict(env or {}),
        env_resolved=dict(env or {}),
        is_python=True,
        interpreter=KernelInterpreter(argv0, 0, via, kw.pop("exists", True)),
        **kw,
    )


def jfacts(*kernels):
    return JupyterFacts(
        "/usr/bin/python3",
        "test",
        "3.11",
        "8.10.0",
        "/home/user/.local/share/jupyter",
        ("/home/user/.local/share/jupyter/kernels", "/usr/local/share/jupyter/kernels"),
        kernels,
    )


CUDA_TERMINAL = probe_facts(
    "/home/user/venvs/train/bin/python",
    torch_facts("2.3.1+cu121", cuda="12.1", cuda_available=True, device_count=2, cudnn_version=8902),
    env={"LD_LIBRARY_PATH": "/usr/local/cuda-12.1/lib64:/opt/cudnn/lib"},
    distributions={"ipykernel": "7.4.0"},
)


def facts_for(kernels, kernel_probes):
    ts = [target(CUDA_TERMINAL)] + [target(p, label=f"kernel:{n}", kind="kernel") for n, p in kernel_probes.items()]
    return make_facts(jupyter=jfacts(*kernels), targets=targets(*ts))


def test_cpu_torch_in_kernel_while_terminal_has_cuda_fails_naming_both():
    kernel_probe = probe_facts(
        "/usr/bin/python3", torch_facts("2.3.1+cpu"), prefix="/usr", distributions={"ipykernel": "6.29.5"}
    )
    facts = facts_for([kspec()], {"train": kernel_probe})
    f = CHECK.evaluate(facts)[0]
    assert f.status is Status.FAIL
    assert "/usr/bin/python3" in f.summary and "/home/user/venvs/train/bin/python" in f.summary
    assert "CPU-only torch 2.3.1+cpu" in f.summary
    assert set(f.fixes) == {"jupyter.kernel-argv", "jupyter.register"}


def test_loader_path_missing_in_kernel_only():
    same = replace(
        CUDA_TERMINAL,
        env={},
        torch=torch_facts("2.3.1+cu121", cuda="12.1", cuda_available=False, cudnn_version=None, device_count=0),
    )
    k = kspec(argv0=CUDA_TERMINAL.executable)
    facts = facts_for([k], {"train": same})
    f = CHECK.evaluate(facts)[0]
    assert f.status is Status.FAIL and f.evidence["problems"] == ["loader-path"]
    assert "/usr/local/cuda-12.1/lib64:/opt/cudnn/lib" in f.summary and f.fixes == ("jupyter.kernel-env",)
    plan = jupyter_kernel_env.plan(facts, f, {})
    new = json.loads(plan.edits[0].new_text)
    assert new["env"] == {"LD_LIBRARY_PATH": "/usr/local/cuda-12.1/lib64:/opt/cudnn/lib"}
    assert list(new) == ["argv", "display_name", "language", "env"]


def test_kernel_env_plan_keeps_order_and_indentation_and_only_removes_hiders():
    text = (
        '{\n    "display_name": "GPU",\n    "env": {\n        "CUDA_VISIBLE_DEVICES": "-1",\n'
        '        "OMP_NUM_THREADS": "8"\n    },\n    "argv": [\n        "/usr/bin/python3",\n'
        '        "-m",\n        "ipykernel_launcher",\n        "-f",\n        "{connection_file}"\n    ],\n'
        '    "language": "python"\n}'
    )
    k = kspec(env={"CUDA_VISIBLE_DEVICES": "-1", "OMP_NUM_THREADS": "8"}, text=text)
    facts = facts_for([k], {"train": replace(CUDA_TERMINAL, executable="/usr/bin/python3", prefix="/usr")})
    f = CHECK.evaluate(facts)[0]
    assert f.status is Status.FAIL and "hides-gpus" in f.evidence["problems"]
    plan = jupyter_kernel_env.plan(facts, f, {})
    assert plan.edits[0].new_text == text.replace('        "CUDA_VISIBLE_DEVICES": "-1",\n', "")


def test_malformed_kernel_json_is_refused_not_guessed():
    k = kspec(env={"CUDA_VISIBLE_DEVICES": ""}, text='{"argv": [')
    facts = facts_for([k], {"train": CUDA_TERMINAL})
    f = CHECK.evaluate(facts)[0]
    with pytest.raises(FixRefused):
        jupyter_kernel_env.plan(facts, f, {})


@pytest.mark.parametrize(
    "value,hides",
    [
        ("", True),
        ("-1", True),
        ("none", True),
        ("-1,0", True),
        ("0", False),
        ("0,1", False),
        ("GPU-8f2c1a3e-aaaa", False),
        ("MIG-1c2d", False),
        ("1,-1,0", False),
    ],
)
def test_cuda_visible_devices_values(value, hides):
    assert cvd_hides_all(value) is hides


def test_nvidia_visible_devices_none_and_void_hide():
    assert gpu_hiding_vars({"NVIDIA_VISIBLE_DEVICES": "void"}) == {"NVIDIA_VISIBLE_DEVICES": "void"}
    assert gpu_hiding_vars({"NVIDIA_VISIBLE_DEVICES": "all", "CUDA_VISIBLE_DEVICES": "0"}) == {}


@pytest.mark.parametrize("creator", ["uv", "venv"])
def test_registration_installs_ipykernel_with_the_installer_the_venv_has(creator):
    """The terminal's venv lacks ipykernel: the registration command installs it first, with uv's
    installer in a venv made by `uv venv` (no pip there: astral-sh/uv#2405), with pip otherwise."""
    r_kernel = replace(kspec(name="ir"), is_python=False, language="R", interpreter=None, argv=("R",))
    terminal = replace(CUDA_TERMINAL, distributions={"numpy": "2.1.0"}, venv_creator=creator)
    facts = make_facts(jupyter=jfacts(r_kernel), targets=targets(target(terminal)))
    f = CHECK.evaluate(facts)[-1]
    py = "/home/user/venvs/train/bin/python"
    install = f"uv pip install --python {py} ipykernel" if creator == "uv" else f"{py} -m pip install ipykernel"
    assert f"{install} && {py} -m ipykernel install --user --name train" in f.explanation
    assert (creator == "uv") == ("-m pip install" not in f.explanation)


def test_no_python_kernel_is_info_with_registration_command_and_plan():
    r_kernel = replace(kspec(name="ir"), is_python=False, language="R", interpreter=None, argv=("R",))
    facts = make_facts(jupyter=jfacts(r_kernel), targets=targets(target(CUDA_TERMINAL)))
    findings = CHECK.evaluate(facts)
    assert [f.status for f in findings] == [Status.INFO, Status.INFO]
    f = findings[-1]
    assert "/home/user/venvs/train/bin/python -m ipykernel install --user --name train" in f.explanation
    plan = jupyter_register.plan(facts, f, {})
    (edit,) = plan.edits
    assert edit.path == "/home/user/.local/share/jupyter/kernels/train/kernel.json" and edit.old_text is None


def test_register_writes_what_ipykernel_install_writes(tmp_path, python):
    """Same bytes as `python -m ipykernel install --user --name NAME` (run for real here)."""
    env = {"HOME": str(tmp_path), "JUPYTER_DATA_DIR": str(tmp_path / "data"), "PATH": "/usr/bin:/bin"}
    subprocess.run(
        [python, "-m", "ipykernel", "install", "--user", "--name", "Train-GPU"],
        env=env,
        check=True,
        capture_output=True,
    )
    expected = (tmp_path / "data" / "kernels" / "train-gpu" / "kernel.json").read_text()
    terminal = probe_facts(python, distributions={"ipykernel": "7.4.0"})
    facts = make_facts(jupyter=replace(jfacts(), data_dir=str(tmp_path / "data")), targets=targets(target(terminal)))
    f = [x for x in CHECK.evaluate(facts) if x.fixes][0]
    plan = jupyter_register.plan(facts, f, {"name": "Train-GPU"})
    assert plan.edits[0].path == str(tmp_path / "data" / "kernels" / "train-gpu" / "kernel.json")
    assert plan.edits[0].new_text == expected


# --------------------------------------------------------------------------- case 13


def case13_facts(kernel_text: str, kernel_path: str, argv0: str) -> Facts:
    terminal_doc = json.loads((CASE13 / "terminal-facts.json").read_text())
    notebook_doc = json.loads((CASE13 / "notebook-facts.json").read_text())
    terminal = probe_facts(
        terminal_doc["sys.executable"],
        torch_facts(
            terminal_doc["torch.__version__"],
            cuda="12.1",
            cuda_available=terminal_doc["torch.cuda.is_available()"],
            device_count=1,
        ),
        distributions={"ipykernel": "7.4.0"},
    )
    notebook = probe_facts(
        argv0,
        torch_facts(notebook_doc["torch.__version__"], cuda=notebook_doc["torch.version.cuda"]),
        prefix="/usr",
        is_venv=False,
        distributions={"ipykernel": "6.29.5"},
    )
    data = json.loads(kernel_text)
    spec = KernelSpecFacts(
        name=notebook_doc["kernel"],
        resource_dir=kernel_path.rsplit("/", 1)[0],
        kernel_json=kernel_path,
        kernel_json_text=kernel_text,
        builtin=False,
        error=None,
        display_name=data["display_name"],
        language="python",
        argv=tuple(data["argv"]),
        is_python=True,
        interpreter=KernelInterpreter(argv0, 0, "absolute", True),
    )
    j = replace(jfacts(spec), data_dir=kernel_path.split("/kernels/")[0])
    return make_facts(
        jupyter=j, targets=targets(target(terminal), target(notebook, label="kernel:train-venv", kind="kernel"))
    )


def test_case13_kernel_runs_system_python_with_cpu_torch():
    text = (CASE13 / "kernel.json").read_text()
    path = "/home/user/.local/share/jupyter/kernels/train-venv/kernel.json"
    facts = case13_facts(text, path, "/usr/bin/python3")
    findings = CHECK.evaluate(facts)
    f = findings[0]
    assert f.status is Status.FAIL and f.target == "kernel:train-venv"
    assert "/usr/bin/python3" in f.summary and "/home/user/venvs/train/bin/python" in f.summary
    assert "2.3.1+cpu" in f.summary and "2.3.1+cu121" in f.summary
    assert set(f.fixes) == {"jupyter.kernel-argv", "jupyter.register"}
    assert (
        "/home/user/venvs/train/bin/python -m ipykernel install --user --name train-venv --display-name train-venv"
    ) in f.explanation
    assert findings[-1].status is Status.FAIL
    plan = jupyter_kernel_argv.plan(facts, f, {})
    (edit,) = plan.edits
    assert edit.path == path and edit.old_text == text
    assert edit.new_text == text.replace('"/usr/bin/python3"', '"/home/user/venvs/train/bin/python"')
    reg = jupyter_register.plan(facts, f, {"display_name": "Python (train venv)"})
    assert reg.edits[0].path == path and reg.edits[0].old_text == text  # replaces the spec, as ipykernel does
    new = json.loads(reg.edits[0].new_text)
    assert new["argv"][0] == "/home/user/venvs/train/bin/python" and new["display_name"] == "Python (train venv)"
    # once fixed, the kernel runs the terminal's interpreter: nothing left to plan
    fixed = case13_facts(edit.new_text, path, "/home/user/venvs/train/bin/python")
    fixed_f = CHECK.evaluate(fixed)[0]
    assert jupyter_kernel_argv.plan(fixed, replace(f, evidence=fixed_f.evidence), {}) is None


def test_case13_on_real_files_jupyter_client_sees_the_new_argv(tmp_path, bare_python):
    """The case's kernel.json in a real user data dir; the 'system python' is a bare venv (no torch)."""
    home = tmp_path / "home"
    kfile = home / ".local" / "share" / "jupyter" / "kernels" / "train-venv" / "kernel.json"
    kfile.parent.mkdir(parents=True)
    original = (CASE13 / "kernel.json").read_text().replace("/usr/bin/python3", bare_python)
    kfile.write_text(original)
    system = live_system(home)
    j = collect_jupyter(CollectContext(system, CollectOptions(extra={"jupyter_python": sys.executable})))
    spec = j.kernel("train-venv")
    assert spec.kernel_json == str(kfile) and spec.interpreter.path == bare_python
    facts = case13_facts(spec.kernel_json_text, spec.kernel_json, bare_python)
    f = CHECK.evaluate(facts)[0]
    plan = jupyter_kernel_argv.plan(facts, f, {})
    kfile.write_text(plan.edits[0].new_text)  # what `gpudoctor fix` writes (gpudoctor.apply is the writer)
    listed = jupyter_client_listing(dict(system.env))
    assert listed["train-venv"]["argv"][0] == "/home/user/venvs/train/bin/python"
    assert listed["train-venv"]["argv"][1:] == json.loads(original)["argv"][1:]


# --------------------------------------------------------------------------- --deep


def _running_with(token: str) -> list:
    pids = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if token.encode() in cmd:
                pids.append(int(pid))
    return pids


@pytest.mark.slow
def test_deep_launches_real_kernels_and_probes_inside(tmp_path, python, bare_python):
    jp = tmp_path / "jp" / "kernels"
    write_spec(jp, "good", spec_json(ipk_argv(python), "Good", env={"GPUDOCTOR_TEST_VAR": "${HOME}/x"}))
    write_spec(jp, "bare", spec_json(ipk_argv(bare_python), "Bare"))
    system = live_system(tmp_path, JUPYTER_PATH=jp.parent)
    j = collect_jupyter(
        CollectContext(system, CollectOptions(deep=True, probe_timeout_s=60, extra={"jupyter_python": python}))
    )
    good, bare = j.kernel("good"), j.kernel("bare")
    assert j.deep is True
    assert good.launch.ok, good.launch
    assert good.launch.probe.executable == python and good.launch.probe.torch.version.startswith("2.13.0")
    assert good.launch.probe.env.get("HOME") == str(tmp_path)
    assert good.launch.probe.distributions["ipykernel"]
    assert bare.launch.ok is False and "died on start" in bare.launch.error
    assert "ipykernel" in bare.launch.stderr_tail

    assert from_jsonable(JupyterFacts, json.loads(json.dumps(to_jsonable(j)))) == j  # snapshot round trip

    findings = CHECK.evaluate(
        make_facts(
            jupyter=j,
            targets=targets(
                target(probe_facts(python, torch_facts("2.13.0+cpu"), distributions={"ipykernel": "7.4.0"}))
            ),
        )
    )
    by = {f.evidence.get("kernel"): f for f in findings if f.evidence.get("kernel")}
    assert by["good"].status is Status.OK and "launch_ms" in by["good"].evidence
    assert by["bare"].status is Status.FAIL and "died on start" in by["bare"].summary


@pytest.mark.slow
def test_deep_kills_and_reports_a_kernel_that_hangs_on_start(tmp_path, python):
    token = f"gpudoctor-hang-{os.getpid()}-{tmp_path.name}"
    jp = tmp_path / "jp" / "kernels"
    write_spec(
        jp, "hang", spec_json([python, "-c", f"import time; time.sleep(120)  # {token}", "{connection_file}"], "Hang")
    )
    system = live_system(tmp_path, JUPYTER_PATH=jp.parent)
    j = collect_jupyter(
        CollectContext(system, CollectOptions(deep=True, probe_timeout_s=3, extra={"jupyter_python": python}))
    )
    hang = j.kernel("hang")
    assert hang.launch.ok is False and "did not answer within 3 s and was killed" in hang.launch.error
    assert _running_with(token) == []
    findings = CHECK.evaluate(make_facts(jupyter=j, targets=targets(target(probe_facts(python)))))
    f = [x for x in findings if x.evidence.get("kernel") == "hang"][0]
    assert f.status is Status.FAIL and "did not answer" in f.summary


@pytest.mark.slow
def test_cli_check_deep_reports_a_kernel_without_ipykernel(tmp_path, monkeypatch, bare_python, capsys):
    from gpudoctor.cli import main

    jp = tmp_path / "jp" / "kernels"
    write_spec(jp, "bare", spec_json(ipk_argv(bare_python), "Bare venv"))
    monkeypatch.setenv("JUPYTER_PATH", str(jp.parent))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    with pytest.raises(SystemExit) as exit_:
        main(["check", "jupyter.kernels", "--deep", "--format", "json", "--probe-timeout", "60"])
    assert exit_.value.code == 1
    doc = json.loads(capsys.readouterr().out)
    bare = [f for f in doc["findings"] if f["target"] == "kernel:bare"][0]
    assert bare["status"] == "fail" and "died on start" in bare["summary"]
    assert bare["evidence"]["problems"] == ["launch-failed", "no-ipykernel"]
    assert doc["findings"][-1]["evidence"]["failing"] == ["bare"]


def test_kernel_argv_plan_drops_a_conda_run_wrapper_and_keeps_an_env_wrapper():
    conda_argv = [
        "/opt/conda/bin/conda",
        "run",
        "-n",
        "cpu-env",
        "python",
        "-m",
        "ipykernel_launcher",
        "-f",
        "{connection_file}",
    ]
    text = spec_json(conda_argv, "conda cpu-env")
    k = replace(
        kspec(name="cpu-env", text=text),
        argv=tuple(conda_argv),
        interpreter=KernelInterpreter("/opt/conda/envs/cpu-env/bin/python", 4, "conda-run", True, "cpu-env"),
    )
    kprobe = probe_facts(
        "/opt/conda/envs/cpu-env/bin/python", torch_facts("2.3.1+cpu"), distributions={"ipykernel": "6.29.5"}
    )
    facts = facts_for([k], {"cpu-env": kprobe})
    f = CHECK.evaluate(facts)[0]
    assert f.status is Status.FAIL and "jupyter.kernel-argv" in f.fixes
    new = json.loads(jupyter_kernel_argv.plan(facts, f, {}).edits[0].new_text)
    assert new["argv"] == [CUDA_TERMINAL.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]

    env_argv = ["env", "OMP_NUM_THREADS=4", "/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    k2 = replace(
        kspec(name="wrapped", text=spec_json(env_argv, "wrapped")),
        argv=tuple(env_argv),
        interpreter=KernelInterpreter("/usr/bin/python3", 2, "env", True, wrapper_env={"OMP_NUM_THREADS": "4"}),
    )
    facts2 = facts_for([k2], {"wrapped": replace(kprobe, executable="/usr/bin/python3", prefix="/usr")})
    f2 = CHECK.evaluate(facts2)[0]
    new2 = json.loads(jupyter_kernel_argv.plan(facts2, f2, {"python": "/srv/venv/bin/python"}).edits[0].new_text)
    assert new2["argv"][:3] == ["env", "OMP_NUM_THREADS=4", "/srv/venv/bin/python"]


def test_kernel_argv_refuses_an_unknown_kernel_name_and_a_relative_python():
    text = (CASE13 / "kernel.json").read_text()
    path = "/home/user/.local/share/jupyter/kernels/train-venv/kernel.json"
    facts = case13_facts(text, path, "/usr/bin/python3")
    f = CHECK.evaluate(facts)[0]
    with pytest.raises(FixRefused, match="no kernelspec of that name.*train-venv"):
        jupyter_kernel_argv.plan(facts, f, {"kernel": "nope"})
    with pytest.raises(FixRefused, match="absolute path"):
        jupyter_kernel_argv.plan(facts, f, {"python": "python3"})
    # the named kernel and an absolute interpreter still plan
    plan = jupyter_kernel_argv.plan(facts, f, {"kernel": "train-venv", "python": "/opt/venv/bin/python"})
    assert '"/opt/venv/bin/python"' in plan.edits[0].new_text


@pytest.mark.slow
def test_gpu_hiding_variable_in_an_env_wrapper_is_flagged_like_kernel_env(tmp_path, python):
    jp = tmp_path / "jp" / "kernels"
    write_spec(jp, "wrapped", spec_json(["/usr/bin/env", "CUDA_VISIBLE_DEVICES=-1"] + ipk_argv(python), "Wrapped"))
    write_spec(
        jp, "mixed", spec_json(["env", "OMP_NUM_THREADS=4", "CUDA_VISIBLE_DEVICES="] + ipk_argv(python), "Mixed")
    )
    write_spec(jp, "fine", spec_json(["env", "CUDA_VISIBLE_DEVICES=0"] + ipk_argv(python), "Fine"))
    system = live_system(tmp_path, JUPYTER_PATH=jp.parent)
    facts = collect_domains(system, CollectOptions(extra={"jupyter_python": python}), CHECK)
    by = {f.evidence.get("kernel"): f for f in CHECK.evaluate(facts) if f.evidence.get("kernel")}
    assert by["wrapped"].status is Status.FAIL and "hides-gpus" in by["wrapped"].evidence["problems"]
    assert 'argv runs `env CUDA_VISIBLE_DEVICES="-1" ...`' in by["wrapped"].summary
    assert by["wrapped"].fixes == ("jupyter.kernel-env",)
    assert by["mixed"].status is Status.FAIL and by["fine"].status is Status.OK
    (edit,) = jupyter_kernel_env.plan(facts, by["wrapped"], {}).edits
    assert json.loads(edit.new_text)["argv"] == ipk_argv(python)  # nothing left for env: dropped
    (edit,) = jupyter_kernel_env.plan(facts, by["mixed"], {}).edits
    assert json.loads(edit.new_text)["argv"] == ["env", "OMP_NUM_THREADS=4"] + ipk_argv(python)


def test_register_writes_where_jupyter_finds_it_first_and_names_the_environment():
    shadowing = replace(
        kspec(name="train", argv0="/usr/bin/python3"),
        kernel_json="/opt/jp/kernels/train/kernel.json",
        resource_dir="/opt/jp/kernels/train",
    )
    stale = kspec(name="py38-old", argv0="/opt/old/bin/python", exists=False)
    jf = JupyterFacts(
        "/usr/bin/python3",
        "test",
        "3.11",
        "8.10.0",
        "/home/user/.local/share/jupyter",
        ("/opt/jp/kernels", "/home/user/.local/share/jupyter/kernels", "/usr/local/share/jupyter/kernels"),
        (shadowing, stale),
    )
    facts = make_facts(jupyter=jf, targets=targets(target(CUDA_TERMINAL)))
    by = {f.evidence.get("kernel"): f for f in CHECK.evaluate(facts) if f.evidence.get("kernel")}
    # the stale kernel's finding: the new kernel is named after the environment (train), not py38-old,
    # and written over the JUPYTER_PATH copy Jupyter finds first, not into the shadowed user directory
    plan = jupyter_register.plan(facts, by["py38-old"], {})
    (edit,) = plan.edits
    assert edit.path == "/opt/jp/kernels/train/kernel.json" and edit.old_text == shadowing.kernel_json_text
    assert json.loads(edit.new_text)["argv"][0] == CUDA_TERMINAL.executable
    assert any("earlier JUPYTER_PATH entry" in n for n in plan.notes)
    (edit,) = jupyter_register.plan(facts, by["py38-old"], {"name": "fresh"}).edits
    assert edit.path == "/home/user/.local/share/jupyter/kernels/fresh/kernel.json" and edit.old_text is None


@pytest.mark.slow
def test_interrupt_during_deep_kills_a_hung_kernel_at_once(tmp_path, python):
    """Ctrl-C runs kill_running_commands(): a kernel launched for --deep dies then, not at its timeout."""
    import threading
    import time

    from gpudoctor.system import kill_running_commands

    token = f"gpudoctor-intr-{os.getpid()}-{tmp_path.name}"
    jp = tmp_path / "jp" / "kernels"
    write_spec(
        jp, "hang", spec_json([python, "-c", f"import time; time.sleep(120)  # {token}", "{connection_file}"], "Hang")
    )
    system = live_system(tmp_path, JUPYTER_PATH=jp.parent)
    done = threading.Event()

    def work():
        collect_jupyter(
            CollectContext(system, CollectOptions(deep=True, probe_timeout_s=60, extra={"jupyter_python": python}))
        )
        done.set()

    threading.Thread(target=work, daemon=True).start()
    deadline = time.monotonic() + 30
    while not _running_with(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _running_with(token), "the kernel never started"
    start = time.monotonic()
    assert kill_running_commands() >= 1
    assert _running_with(token) == []
    assert done.wait(15) and time.monotonic() - start < 15  # well before the 60 s probe timeout


@pytest.mark.parametrize("creator", ["uv", "venv"])
def test_the_register_fix_notes_the_installer_the_venv_has(creator):
    """`gpudoctor fix jupyter.register` in a venv without ipykernel: its note installs it with uv's
    installer in a venv made by `uv venv`, with pip otherwise (as the check's command does)."""
    r_kernel = replace(kspec(name="ir"), is_python=False, language="R", interpreter=None, argv=("R",))
    terminal = replace(CUDA_TERMINAL, distributions={"numpy": "2.1.0"}, venv_creator=creator)
    facts = make_facts(jupyter=jfacts(r_kernel), targets=targets(target(terminal)))
    plan = jupyter_register.plan(facts, CHECK.evaluate(facts)[-1], {})
    py = "/home/user/venvs/train/bin/python"
    want = f"uv pip install --python {py} ipykernel" if creator == "uv" else f"{py} -m pip install ipykernel"
    assert any(n.endswith(want) for n in plan.notes), plan.notes
