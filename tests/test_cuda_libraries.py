"""The CUDA library loader model (issue 11), tested for real and on the handed-out cases.

- Real: libraries built with gcc (SONAMEs, a version script, RUNPATH/RPATH with
  ``$ORIGIN``, a toolkit copy on LD_LIBRARY_PATH shadowing a wheel-like one),
  loaded by a real child process; the model's prediction is compared with
  ``/proc/<pid>/maps`` of that child and with the real loader's error.
- Cases 07, 33, 35 through the real collectors on fake roots.
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
from pathlib import Path

import pytest

import _cudalibs as cl
from gpudoctor.collect import CollectContext, CollectOptions
from gpudoctor.collect.elfread import read_elf
from gpudoctor.collect.host import collect_os
from gpudoctor.collect.libraries import LoaderModel, collect_cuda_libraries, family_of
from gpudoctor.collect.loader import collect_loader
from gpudoctor.engine import evaluate
from gpudoctor.facts.targets import (
    CudnnProbe,
    LibcudaProbe,
    LibraryLoad,
    ToolchainFacts,
    TritonFacts,
)
from gpudoctor.model import Status
from gpudoctor.registry import load_registry
from gpudoctor.system import Files
from gpudoctor.testing import (
    ScriptedRunner,
    fake_system,
    make_facts,
    nvidia_facts,
    nvml_device,
    ok,
    os_facts,
    probe_facts,
    target,
    targets,
    torch_facts,
    write_tree,
)

CASES = Path(__file__).resolve().parent / "fixtures" / "cases"
needs_gcc = pytest.mark.skipif(cl.gcc() is None, reason="no C compiler to build test libraries")


@pytest.fixture(scope="module")
def registry():
    return load_registry()


def run(facts, registry, *ids):
    out = {}
    for f in evaluate([registry.checks[i] for i in ids], facts):
        out.setdefault(f.check, f)
    return out


def text_of(f):
    return f.summary + "\n" + f.explanation


# --------------------------------------------------------------------------- the model against the real loader


def _maps_of_child(app: Path, env: dict) -> list:
    """Start ``app`` (it blocks on stdin), read /proc/<pid>/maps, let it exit."""
    proc = subprocess.Popen([str(app)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        assert proc.stdout.readline() == b"ready\n"  # main runs: the loader has mapped everything
        maps = Path(f"/proc/{proc.pid}/maps").read_text()
        return sorted(
            {
                line.split(None, 5)[5].strip()
                for line in maps.splitlines()
                if len(line.split(None, 5)) == 6 and family_of(os.path.basename(line.split(None, 5)[5]))
            }
        )
    finally:
        proc.communicate(b"x", timeout=10)


def _predict(tree: dict, ld_library_path: str) -> list:
    model = LoaderModel(Files(Path("/")), [d for d in ld_library_path.split(":") if d], [], [])
    resolutions = model.load([tree["torch_cuda"]])
    return sorted({os.path.realpath(r.path) for r in resolutions if r.path}), resolutions


@needs_gcc
@pytest.mark.parametrize(
    "rpath_style,with_env,expect",
    [
        (False, True, "toolkit"),  # RUNPATH: LD_LIBRARY_PATH wins -> the old toolkit copy
        (False, False, "wheel"),  # healthy twin: no LD_LIBRARY_PATH -> the wheel's copy
        (True, True, "wheel"),  # DT_RPATH is searched before LD_LIBRARY_PATH
    ],
)
def test_model_predicts_the_copy_the_real_loader_maps(tmp_path, rpath_style, with_env, expect):
    tree = cl.wheel_tree(
        Path("/"), site=f"{tmp_path}/site-packages", toolkit=f"{tmp_path}/cuda-12.2/lib64", rpath_style=rpath_style
    )
    # a copy with another SONAME major next to the toolkit one must never be picked for .so.12
    cl.build_so(tmp_path / "cuda-12.2/lib64/libnvJitLink.so.11", "libnvJitLink.so.11", "int x11(void){return 1;}\n")
    llp = tree["toolkit"] if with_env else ""
    env = {"PATH": "/usr/bin:/bin"}
    if llp:
        env["LD_LIBRARY_PATH"] = llp
    predicted, resolutions = _predict(tree, llp)
    mapped = _maps_of_child(Path(tree["app"]), env)
    assert [os.path.realpath(p) for p in mapped] == predicted
    chosen = os.path.realpath(tree["toolkit_real"] if expect == "toolkit" else tree["wheel_jit"])
    assert chosen in predicted
    jit = next(r for r in resolutions if r.needed == "libnvJitLink.so.12")
    if expect == "toolkit":
        assert jit.via == "LD_LIBRARY_PATH entry 1"
        assert jit.missing == ("__nvJitLinkComplete_12_4, version libnvJitLink.so.12",)
        # the real loader agrees: binding everything now fails on exactly that symbol
        proc = subprocess.run([tree["app"], "call"], env={**env, "LD_BIND_NOW": "1"}, capture_output=True, text=True)
        assert proc.returncode != 0
        assert "undefined symbol: __nvJitLinkComplete_12_4, version libnvJitLink.so.12" in proc.stderr
    else:
        assert jit.missing == () and jit.via == ("RPATH" if rpath_style else "RUNPATH")
        assert subprocess.run([tree["app"], "call"], env={**env, "LD_BIND_NOW": "1"}).returncode == 4


@needs_gcc
def test_a_newer_toolkit_copy_on_the_path_has_every_symbol(tmp_path):
    """Neighbour: a 12.6 toolkit first on LD_LIBRARY_PATH defines _12_4 too: nothing missing, and it really loads."""
    tree = cl.wheel_tree(
        Path("/"),
        site=f"{tmp_path}/sp",
        toolkit=f"{tmp_path}/cuda-12.6/lib64",
        toolkit_versions=("12_0", "12_2", "12_4", "12_6"),
        toolkit_file="libnvJitLink.so.12.6.77",
    )
    _predicted, resolutions = _predict(tree, tree["toolkit"])
    jit = next(r for r in resolutions if r.needed == "libnvJitLink.so.12")
    assert jit.via == "LD_LIBRARY_PATH entry 1" and jit.missing == ()
    env = {"LD_LIBRARY_PATH": tree["toolkit"], "LD_BIND_NOW": "1"}
    assert (
        subprocess.run([tree["app"], "call"], env=env).returncode == 2
    )  # _12_4 of the 12.6 copy (the wheel returns 4)


@needs_gcc
def test_elf_reader_sees_soname_runpath_and_symbol_versions(tmp_path):
    tree = cl.wheel_tree(Path("/"), site=f"{tmp_path}/sp", toolkit=f"{tmp_path}/tk")
    files = Files(Path("/"))
    cus = read_elf(files, tree["cusparse"])
    assert cus.soname == "libcusparse.so.12" and "libnvJitLink.so.12" in cus.needed
    assert cus.runpath == ("$ORIGIN/../../nvjitlink/lib",) and cus.rpath == ()
    assert ("libnvJitLink.so.12", "libnvJitLink.so.12", "__nvJitLinkComplete_12_4") in cus.needs
    old = read_elf(files, tree["toolkit_jit"])
    assert old.elf_class == 64 and old.defined_versions == {"libnvJitLink.so.12"}
    assert "__nvJitLinkComplete_12_2@libnvJitLink.so.12" in old.defined
    assert "__nvJitLinkComplete_12_4@libnvJitLink.so.12" not in old.defined
    bad = tmp_path / "libcudnn.so.9"
    bad.write_text("not an ELF\n")
    assert read_elf(files, str(bad)).error == "not an ELF file"


# --------------------------------------------------------------------------- case 33


def _env(case: Path) -> dict:
    return dict(
        line.split("=", 1)
        for line in (case / "env.txt").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    )


def _case33_facts(tmp_path: Path, with_ld_library_path: bool):
    case = CASES / "33-nvjitlink-ld-library-path-shadow"
    env = _env(case)
    if not with_ld_library_path:
        env.pop("LD_LIBRARY_PATH")
    wheel_dir = re.search(r"ls -l (\S+)/\s*$", (case / "ls-wheel-nvjitlink.txt").read_text(), re.MULTILINE).group(1)
    site = wheel_dir.rsplit("/nvidia/", 1)[0]
    listing = (case / "ls-cuda-12.2-lib64.txt").read_text()
    toolkit = re.search(r"ls -l (\S+?)/? ", listing).group(1)
    toolkit_file = re.search(r"libnvJitLink\.so\.12 -> (\S+)", listing).group(1)
    needs = re.search(r"undefined symbol: __nvJitLinkComplete_(\d+_\d+)", (case / "traceback.txt").read_text()).group(1)
    dists = dict(re.findall(r"^(torch|nvidia-\S+)\s+(\S+)$", (case / "pip-list.txt").read_text(), re.MULTILINE))
    tk_minor = int(re.search(r"\.so\.12\.(\d+)\.", toolkit_file).group(1))
    cl.wheel_tree(
        tmp_path,
        site=site,
        toolkit=toolkit,
        cusparse_needs=needs,
        toolkit_file=toolkit_file,
        toolkit_versions=tuple(f"12_{i}" for i in range(tk_minor + 1)),
        dists=dists,
    )
    py = f"{env['VIRTUAL_ENV']}/bin/python"
    probe = probe_facts(
        py,
        torch_facts(
            dists["torch"],
            None,
            installed=True,
            import_error=(case / "traceback.txt").read_text().strip().splitlines()[-1],
        ),
        python_version="3.10.12",
        env=env,
        site_packages=(site,),
    )
    tg = targets(target(probe))
    system = fake_system(tmp_path, env=env, runner=ScriptedRunner(default=ok("")))
    ctx = CollectContext(system, CollectOptions(), {"targets": tg})
    loader = collect_loader(ctx)
    ctx = CollectContext(system, CollectOptions(), {"targets": tg, "loader": loader})
    libs = collect_cuda_libraries(ctx)
    return make_facts(targets=tg, loader=loader, cuda_libraries=libs), site, toolkit, dists


@needs_gcc
def test_case_33_toolkit_on_ld_library_path_shadows_the_wheels_nvjitlink(tmp_path, registry):
    facts, site, toolkit, dists = _case33_facts(tmp_path, True)
    f = run(facts, registry, "cuda.libraries")["cuda.libraries"]
    text = text_of(f)
    assert f.status == Status.FAIL
    for needle in (
        toolkit,
        "LD_LIBRARY_PATH entry 1",
        "libnvJitLink.so.12",
        "12.2.140",
        dists["nvidia-nvjitlink-cu12"],
        "__nvJitLinkComplete_12_4",
    ):
        assert needle in f.summary, needle
    assert "unset LD_LIBRARY_PATH" in text  # the only entry: drop it
    assert f"export LD_LIBRARY_PATH={site}/nvidia/nvjitlink/lib:$LD_LIBRARY_PATH" in text
    assert "Reinstalling torch does not help" in text and "--force-reinstall" not in text
    # the import failure itself is blamed on the search order, not on torch's files
    ti = run(facts, registry, "torch.install")["torch.install"]
    assert ti.status == Status.FAIL and toolkit in ti.summary and "12.2.140" in ti.summary
    assert "Reinstalling torch does not help" in ti.explanation and "--force-reinstall" not in ti.explanation
    model = facts.get("cuda_libraries").targets[0]
    copies = {c.path: c for c in model.copies}
    assert copies[f"{toolkit}/libnvJitLink.so.12"].version_source == "file name"
    assert (
        copies[f"{site}/nvidia/nvjitlink/lib/libnvJitLink.so.12"].version_source
        == "wheel metadata nvidia-nvjitlink-cu12"
    )
    assert copies[f"{toolkit}/libnvJitLink.so.12"].origin == "LD_LIBRARY_PATH"


@needs_gcc
def test_case_33_healthy_twin_without_ld_library_path(tmp_path, registry):
    facts, *_ = _case33_facts(tmp_path, False)
    f = run(facts, registry, "cuda.libraries")["cuda.libraries"]
    assert f.status == Status.OK, f.summary


# --------------------------------------------------------------------------- case 07


def _case07_facts(tmp_path: Path, fixed: bool):
    case = CASES / "07-wsl-libcuda-unresolvable"
    env = _env(case)
    wsl_dir, wsl_files = _ls(case / "ls-usr-lib-wsl-lib.txt")
    conf_dir, conf_files = _ls(case / "ls-etc-ld.so.conf.d.txt")
    tree = {
        "/proc/version": (case / "proc-version.txt").read_text(),
        "/etc/ld.so.cache": b"cache",
        "/etc/os-release": 'ID=ubuntu\nVERSION_ID="22.04"\nVERSION_CODENAME=jammy\n',
        "/etc/ld.so.conf": "include /etc/ld.so.conf.d/*.conf\n",
    }
    for name in wsl_files:
        tree[f"{wsl_dir}/{name}"] = b"driver library from Windows"
    for name in conf_files:
        tree[f"{conf_dir}/{name}"] = {"libc.conf": "/usr/local/lib\n"}.get(name, "/usr/lib/x86_64-linux-gnu\n")
    site = next(e for e in env["LD_LIBRARY_PATH"].split(":") if "site-packages" in e).rsplit("/nvidia/", 1)[0]
    cudnn_lib = f"{site}/nvidia/cudnn/lib"
    tree[f"{cudnn_lib}/libcudnn_cnn_infer.so.8"] = b"x"
    ldconfig = (case / "ldconfig-p.txt").read_text()
    if fixed:  # the remedy applied: ld.wsl.conf + ldconfig
        tree[f"{conf_dir}/ld.wsl.conf"] = f"{wsl_dir}\n"
        ldconfig = "".join(f"\t{n} (libc6,x86-64) => {wsl_dir}/{n}\n" for n in wsl_files if n.startswith("lib"))
    write_tree(tmp_path, tree)
    runner = ScriptedRunner({("ldconfig", "-p", "-C", str(tmp_path / "etc/ld.so.cache")): ok(ldconfig)})
    probe = probe_facts(
        f"{env['CONDA_PREFIX']}/bin/python",
        torch_facts(installed=False),
        python_version="3.10.9",
        env=env,
        site_packages=(site,),
        is_conda=True,
    )
    tg = targets(target(probe))
    system = fake_system(tmp_path, env=env, runner=runner)
    ctx = CollectContext(system, CollectOptions(), {"targets": tg})
    loader = collect_loader(ctx)
    libs = collect_cuda_libraries(CollectContext(system, CollectOptions(), {"targets": tg, "loader": loader}))
    return make_facts(targets=tg, loader=loader, cuda_libraries=libs, os=collect_os(ctx)), wsl_dir


def _ls(path: Path):
    lines = path.read_text().strip().splitlines()
    return lines[0].rstrip(":"), [line.split()[-1] for line in lines[1:]]


def test_case_07_wsl_libcuda_not_resolvable(tmp_path, registry):
    facts, wsl_dir = _case07_facts(tmp_path, fixed=False)
    assert facts.get("os").wsl is True
    f = run(facts, registry, "cuda.wsl")["cuda.wsl"]
    text = text_of(f)
    assert f.status == Status.FAIL
    assert "libcuda.so" in f.summary and "not resolvable" in f.summary and wsl_dir in f.summary
    assert f"echo {wsl_dir} | sudo tee /etc/ld.so.conf.d/ld.wsl.conf\nsudo ldconfig" in text
    assert f"export LD_LIBRARY_PATH={wsl_dir}:$LD_LIBRARY_PATH" in text
    assert "/home/user/miniconda3/envs/textgen/etc/conda/activate.d/" in text
    assert "Do not install a Linux NVIDIA driver inside WSL" in text
    assert "reinstalling cuDNN does not help" in text


def test_case_07_healthy_twin_after_ld_wsl_conf(tmp_path, registry):
    facts, wsl_dir = _case07_facts(tmp_path, fixed=True)
    f = run(facts, registry, "cuda.wsl")["cuda.wsl"]
    assert f.status == Status.OK and wsl_dir in f.summary


@pytest.mark.parametrize("wsl,needle", [(True, "ld.wsl.conf"), (False, "libnvidia-compute-535")])
def test_a_cudnn_sublibrary_error_naming_libcuda_is_a_driver_problem(wsl, needle, registry):
    error = (CASES / "07-wsl-libcuda-unresolvable" / "traceback.txt").read_text().splitlines()[1]
    lib_error = re.search(r"Error: (.*)$", error).group(1)
    subs = (
        LibraryLoad("libcudnn_ops_infer.so.8", True, "/x/libcudnn_ops_infer.so.8"),
        LibraryLoad("libcudnn_cnn_infer.so.8", False, "/x/libcudnn_cnn_infer.so.8", lib_error),
    )
    probe = probe_facts(
        torch=torch_facts("2.0.1+cu118", "11.8", cudnn_compile_version="8.7.0"),
        cudnn=CudnnProbe(True, "", 8, "/x/libcudnn.so.8", ("/x/libcudnn.so.8",), 8700, None, ("/x",), subs),
        libcuda=LibcudaProbe(False, None, "libcuda.so.1: cannot open shared object file"),
    )
    facts = make_facts(
        targets=targets(target(probe)),
        os=os_facts("ubuntu", "22.04", "jammy", wsl=wsl),
        nvidia=nvidia_facts("535.183.01", "12.2", [nvml_device()]),
    )
    f = run(facts, registry, "cudnn.load")["cudnn.load"]
    assert f.status == Status.FAIL and "driver/loader problem" in f.summary
    assert needle in f.explanation and "--force-reinstall" not in f.explanation


# --------------------------------------------------------------------------- case 35


def elf_header(bits: int) -> bytes:
    """A minimal ELF shared-object header (x86-64 or i386), enough for class/machine."""
    ident = b"\x7fELF" + bytes([1 if bits == 32 else 2, 1, 1, 0]) + bytes(8)
    if bits == 64:
        return ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, 0, 0, 64, 56, 0, 64, 0, 0)
    return ident + struct.pack("<HHIIIIIHHHHHH", 3, 3, 1, 0, 0, 0, 0, 52, 32, 0, 40, 0, 0)


def _case35_facts(tmp_path: Path, torch_version=None, add_link=False, extra_env=None):
    case = CASES / "35-torch-compile-no-unversioned-libcuda"
    doc = json.loads((case / "torch-facts.json").read_text())
    tree = {"/etc/ld.so.cache": b"cache"}
    links = {}
    for line in (case / "ls-libcuda.txt").read_text().splitlines()[1:]:
        parts = line.split()
        if "->" in parts:
            links[parts[parts.index("->") - 1]] = parts[-1]
        else:
            tree[parts[-1]] = elf_header(32 if "i386" in parts[-1] else 64)
    write_tree(tmp_path, tree)
    for path, target_name in links.items():
        (tmp_path / path.lstrip("/")).symlink_to(target_name)
    if add_link:
        (tmp_path / "usr/lib/x86_64-linux-gnu/libcuda.so").symlink_to("libcuda.so.1")
    ldconfig = (case / "ldconfig-p.txt").read_text()
    if add_link:
        ldconfig += "\tlibcuda.so (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so\n"
    runner = ScriptedRunner({("ldconfig", "-p", "-C", str(tmp_path / "etc/ld.so.cache")): ok(ldconfig)})
    py = doc["python"].split()[0]
    version = torch_version or doc["torch.__version__"]
    cuda = re.search(r"\+cu(\d+)(\d)$", version)
    env = {"PATH": f"{py.rsplit('/', 1)[0]}:/usr/bin:/bin", **(extra_env or {})}
    probe = probe_facts(
        py,
        torch_facts(version, f"{cuda.group(1)}.{cuda.group(2)}", cuda_available=True),
        python_version="3.10.14",
        env=env,
        is_conda=True,
        include_dir=f"{py.rsplit('/bin/', 1)[0]}/include/python3.10",
        toolchain=ToolchainFacts(True, "/x/Python.h", "/usr/bin/gcc", "/usr/bin/g++"),
        triton=TritonFacts(True, doc["triton"], True),
    )
    tg = targets(target(probe))
    system = fake_system(tmp_path, env=env, runner=runner)
    ctx = CollectContext(system, CollectOptions(), {"targets": tg})
    loader = collect_loader(ctx)
    libs = collect_cuda_libraries(CollectContext(system, CollectOptions(), {"targets": tg, "loader": loader}))
    driver = re.match(r"[\d.]+", doc["driver (nvidia-smi)"]).group(0)
    return make_facts(
        targets=tg,
        loader=loader,
        cuda_libraries=libs,
        os=os_facts("ubuntu", "18.04", "bionic"),
        nvidia=nvidia_facts(driver, "12.1", [nvml_device(name=doc["torch.cuda.get_device_name(0)"], cc="8.6")]),
    )


def test_case_35_no_64bit_unversioned_libcuda_for_triton(tmp_path, registry):
    f = run(_case35_facts(tmp_path), registry, "torch.compile")["torch.compile"]
    text = text_of(f)
    assert f.status == Status.FAIL
    assert "no 64-bit libcuda.so" in f.summary and "cannot find -lcuda" in f.summary
    assert "32-bit one in `/usr/lib/i386-linux-gnu`" in text and "`libc6`" in text
    assert "sudo ln -s libcuda.so.1 /usr/lib/x86_64-linux-gnu/libcuda.so && sudo ldconfig" in text
    assert "export LIBRARY_PATH=~/.local/lib/cuda-link" in text and "TRITON_LIBCUDA_PATH" in text
    assert "~/.triton/cache" in text


def test_case_35_healthy_twin_with_the_link(tmp_path, registry):
    f = run(_case35_facts(tmp_path, add_link=True), registry, "torch.compile")["torch.compile"]
    assert f.status == Status.INFO, f.summary


def test_case_35_library_path_with_a_link_dir_satisfies_the_linker(tmp_path, registry):
    link_dir = tmp_path / "home/user/.local/lib/cuda-link"
    link_dir.mkdir(parents=True)
    (link_dir / "libcuda.so").symlink_to("../../../../../usr/lib/x86_64-linux-gnu/libcuda.so.1")
    facts = _case35_facts(tmp_path, extra_env={"LIBRARY_PATH": "/home/user/.local/lib/cuda-link"})
    f = run(facts, registry, "torch.compile")["torch.compile"]
    assert f.status == Status.INFO, f.summary


def test_torch_compile_is_skipped_below_torch_2(tmp_path, registry):
    f = run(_case35_facts(tmp_path, torch_version="1.13.1+cu117"), registry, "torch.compile")["torch.compile"]
    assert f.status == Status.SKIP and "torch 2.0" in f.summary


@needs_gcc
def test_rpath_of_the_executable_reaches_a_library_without_runpath(tmp_path):
    """A library with neither RUNPATH nor RPATH inherits the DT_RPATH walk up to the executable
    (conda's python carries RPATH $ORIGIN/../lib): an old copy there beats the wheel's."""
    old_dir, wheel_dir, cus_dir, torch_dir = (tmp_path / d for d in ("env/lib", "wheel", "cusparse", "torch"))
    cl.nvjitlink(old_dir / "libnvJitLink.so.12", ("12_0", "12_1"))
    cl.nvjitlink(wheel_dir / "libnvJitLink.so.12", ("12_0", "12_1", "12_4"))
    cus = cl.build_so(
        cus_dir / "libcusparse.so.12",
        "libcusparse.so.12",
        "int __nvJitLinkComplete_12_4(void);\nint cusparseCreate(void) { return __nvJitLinkComplete_12_4(); }\n",
        link=[wheel_dir / "libnvJitLink.so.12"],
    )
    tc = cl.build_so(
        torch_dir / "libtorch_cuda.so",
        "libtorch_cuda.so",
        "int cusparseCreate(void);\nint torch_cuda_init(void) { return cusparseCreate(); }\n",
        link=[cus],
        runpath=[str(cus_dir), str(wheel_dir)],
    )
    app = tmp_path / "env/bin/app"
    app.parent.mkdir(parents=True)
    src = tmp_path / "app.c"
    src.write_text(
        "#include <unistd.h>\nint torch_cuda_init(void);\nint main(int c, char **v) { char b; "
        'if (c > 1) return torch_cuda_init(); if (write(1, "ready\\n", 6) != 6) return 9; '
        "return (int)read(0, &b, 1); }\n"
    )
    subprocess.run(
        [
            cl.gcc(),
            "-o",
            str(app),
            str(src),
            f"-L{torch_dir}",
            "-l:libtorch_cuda.so",
            "-Wl,--no-as-needed",
            f"-Wl,-rpath,$ORIGIN/../lib:{torch_dir}",
            "-Wl,--disable-new-dtags",
            f"-Wl,-rpath-link,{wheel_dir}",
        ],
        check=True,
    )
    model = LoaderModel(Files(Path("/")), [], [], [], executable=str(app))
    resolutions = model.load([str(tc)])
    jit = next(r for r in resolutions if r.needed == "libnvJitLink.so.12")
    assert jit.via == "RPATH" and os.path.realpath(jit.path) == str(old_dir / "libnvJitLink.so.12")
    assert jit.missing == ("__nvJitLinkComplete_12_4, version libnvJitLink.so.12",)
    mapped = _maps_of_child(app, {"PATH": "/usr/bin:/bin"})
    assert sorted(os.path.realpath(p) for p in mapped) == sorted({os.path.realpath(r.path) for r in resolutions})


@needs_gcc
def test_copy_version_from_exported_symbol_versions(tmp_path):
    """A toolkit copy without a versioned file name gets its version from its `_12_X` symbols."""
    from gpudoctor.collect.libraries import describe_copy

    lib = cl.nvjitlink(tmp_path / "tk/libnvJitLink.so.12", ("12_0", "12_1", "12_3"))
    c = describe_copy(Files(Path("/")), str(lib), "LD_LIBRARY_PATH", {}, symbols=True)
    assert (c.version, c.version_source, c.soname, c.elf_class) == ("12.3", "symbol versions", "libnvJitLink.so.12", 64)
    assert describe_copy(Files(Path("/")), str(lib), "LD_LIBRARY_PATH", {}, symbols=False).version is None


def test_ld_so_cache_entries_of_another_architecture_are_skipped(tmp_path):
    """`libcuda.so.1 (libc6)` is the 32-bit copy: a 64-bit process never gets it from the cache."""
    from gpudoctor.facts.loader import LdconfigEntry

    write_tree(
        tmp_path,
        {
            "/usr/lib/i386-linux-gnu/libcuda.so.1": elf_header(32),
            "/usr/lib/x86_64-linux-gnu/libcuda.so.1": elf_header(64),
        },
    )
    cache = [
        LdconfigEntry("libcuda.so.1", "libc6", "/usr/lib/i386-linux-gnu/libcuda.so.1"),
        LdconfigEntry("libcuda.so.1", "libc6,x86-64", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"),
    ]
    model = LoaderModel(Files(tmp_path), [], [], cache, default_dirs=())
    assert model.resolve("libcuda.so.1", None, arch=(64, "EM_X86_64")).path == "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
    assert model.resolve("libcuda.so.1", None, arch=(32, "EM_386")).path == "/usr/lib/i386-linux-gnu/libcuda.so.1"
    # a 32-bit file on LD_LIBRARY_PATH is skipped as ld.so skips it ("wrong ELF class")
    model = LoaderModel(Files(tmp_path), ["/usr/lib/i386-linux-gnu"], [], cache, default_dirs=())
    r = model.resolve("libcuda.so.1", None, arch=(64, "EM_X86_64"))
    assert r.path == "/usr/lib/x86_64-linux-gnu/libcuda.so.1" and r.via == "ld.so cache"


@pytest.mark.parametrize("dxg", [True, False])
def test_wsl_detected_from_dev_dxg_on_an_image_root(tmp_path, dxg):
    tree = {"/etc/os-release": 'ID=ubuntu\nVERSION_ID="22.04"\n'}
    if dxg:
        tree["/dev/dxg"] = ""
    write_tree(tmp_path, tree)
    assert collect_os(CollectContext(fake_system(tmp_path), CollectOptions())).wsl is dxg


@pytest.mark.parametrize(
    "proc_version,dxg,version",
    [
        # WSL 1 (Windows 10 2004): the kernel release ends in -Microsoft, no /dev/dxg
        (
            "Linux version 4.4.0-19041-Microsoft (Microsoft@Microsoft.com) (gcc version 5.4.0 (GCC) ) #488-Microsoft",
            False,
            1,
        ),
        # WSL 2, current and first kernels; /dev/dxg alone also says WSL 2
        (
            "Linux version 5.15.90.1-microsoft-standard-WSL2 (oe-user@oe-host) (x86_64-msft-linux-gcc (GCC) 9.3.0)",
            False,
            2,
        ),
        ("Linux version 4.19.121-microsoft-standard (oe-user@oe-host) (gcc version 8.2.0 (GCC))", False, 2),
        ("Linux version 6.1.0-18-amd64 (debian-kernel@lists.debian.org)", True, 2),
        ("Linux version 6.1.0-18-amd64 (debian-kernel@lists.debian.org)", False, None),  # not WSL
        ("Linux version", False, None),  # truncated: neither
    ],
)
def test_wsl_version_from_proc_version_and_dev_dxg(tmp_path, proc_version, dxg, version):
    tree = {"/etc/os-release": 'ID=ubuntu\nVERSION_ID="20.04"\n', "/proc/version": proc_version + "\n"}
    if dxg:
        tree["/dev/dxg"] = ""
    write_tree(tmp_path, tree)
    facts = collect_os(CollectContext(fake_system(tmp_path), CollectOptions()))
    assert facts.wsl_version == version
    assert facts.wsl is (version is not None)


@pytest.mark.parametrize("version,status", [(1, Status.FAIL), (2, Status.FAIL), (None, Status.FAIL)])
def test_wsl_1_is_named_with_its_conversion_not_the_driver_remedy(tmp_path, registry, version, status):
    """WSL 1 has no GPU device and no /usr/lib/wsl/lib (microsoft/WSL#3847, #1788: GPU compute came
    with WSL 2): the remedy is `wsl --set-version`, not a Windows driver. Twin: WSL 2 without the
    driver's libcuda keeps the driver remedy (and an unknown version too)."""
    from dataclasses import replace

    facts, _ = _case07_facts(tmp_path, fixed=False)
    os_facts = replace(facts.get("os"), kernel="4.4.0-19041-Microsoft" if version == 1 else "", wsl_version=version)
    libs = replace(facts.get("cuda_libraries"), wsl_lib=())
    facts = make_facts(targets=facts.get("targets"), loader=facts.get("loader"), cuda_libraries=libs, os=os_facts)
    f = run(facts, registry, "cuda.wsl")["cuda.wsl"]
    assert f.status is status
    if version == 1:
        assert f.summary.startswith("WSL 1 (kernel 4.4.0-19041-Microsoft): WSL 1 has no GPU access")
        assert [c.text for c in f.commands] == ["wsl -l -v", "wsl --set-version <distro> 2"]
    else:
        assert "WSL 2 without the Windows driver's libcuda.so.1" in f.summary and "wsl --set-version" not in text_of(f)


@pytest.mark.parametrize(
    "dists,status,needles",
    [
        # torch-free: two frameworks from metadata only, different cuDNN majors
        (
            {"onnxruntime_gpu": "1.19.2", "tensorflow": "2.16.1"},
            "fail",
            [
                "tensorflow 2.16.1 needs cuDNN 8",
                "onnxruntime-gpu 1.19.2 needs cuDNN 9",
                "`onnxruntime-gpu>=1.15,<1.18`",
            ],
        ),
        ({"onnxruntime_gpu": "1.19.2", "tensorflow": "2.18.0"}, "ok", ["cuDNN 9"]),
        ({"cupy_cuda11x": "13.3.0", "torch": "2.5.1+cu124"}, "fail", ["needs CUDA 11", "needs CUDA 12"]),
        (
            {"paddlepaddle_gpu": "2.6.1.post120", "jax_cuda12_plugin": "0.4.35"},
            "ok",
            ["paddlepaddle-gpu 2.6.1.post120 (CUDA 12)", "jax-cuda12-plugin 0.4.35 (CUDA 12, cuDNN 9)"],
        ),
    ],
)
def test_frameworks_found_from_metadata_without_importing(tmp_path, registry, dists, status, needles):
    site = "/home/user/venv/lib/python3.11/site-packages"
    for dist, version in dists.items():
        cl.write_dist(tmp_path, site, dist, version)
    write_tree(tmp_path, {f"{site}/onnxruntime/capi/libonnxruntime_providers_cuda.so": b"x"})
    probe = probe_facts(torch=torch_facts(installed=False), site_packages=(site,))
    tg = targets(target(probe))
    system = fake_system(tmp_path, runner=ScriptedRunner(default=ok("")))
    libs = collect_cuda_libraries(CollectContext(system, CollectOptions(), {"targets": tg}))
    ort = [f for f in libs.frameworks if f.name == "onnxruntime-gpu"]
    if ort:
        assert ort[0].gpu_libs == (f"{site}/onnxruntime/capi/libonnxruntime_providers_cuda.so",)
    f = run(make_facts(targets=tg, cuda_libraries=libs), registry, "cuda.frameworks")["cuda.frameworks"]
    assert f.status.value == status, f.summary
    for needle in needles:
        assert needle in text_of(f), needle


def test_a_cpu_torch_build_is_not_a_cuda_framework(tmp_path):
    site = "/venv/lib/python3.11/site-packages"
    cl.write_dist(tmp_path, site, "torch", "2.13.0+cpu")
    cl.write_dist(tmp_path, site, "cupy_cuda12x", "13.3.0")
    probe = probe_facts("/venv/bin/python", site_packages=(site,))
    libs = collect_cuda_libraries(
        CollectContext(fake_system(tmp_path), CollectOptions(), {"targets": targets(target(probe))})
    )
    assert [(f.name, f.cuda_major, f.cudnn_major) for f in libs.frameworks] == [("cupy", 12, 0)]


@needs_gcc
@pytest.mark.parametrize("versioned_file,status", [(False, "warn"), (True, "fail")])
def test_case_05_kind_cudnn_module_before_torch_lib(tmp_path, registry, versioned_file, status):
    """Case 05's layout for the loader model: torch/lib bundles libcudnn.so.8 (RUNPATH $ORIGIN), a cuDNN
    module on LD_LIBRARY_PATH supplies 8.0.3. Without a version for the bundled copy the swap is a warn;
    with one (8.3.2 in its file name) the older module copy is a fail."""
    case = CASES / "05-cudnn-ld-library-path-shadow"
    env = _env(case)
    module_dir, entries = _ls(case / "ls-cudnn-module.txt")
    torch_lib, _ = _ls(case / "ls-torch-lib.txt")
    r = lambda p: tmp_path / p.lstrip("/")
    links = {}
    for line in (case / "ls-cudnn-module.txt").read_text().splitlines()[1:]:
        parts = line.split()
        if "->" in parts:
            links[parts[-3]] = parts[-1]
        else:
            stem, _, ver = parts[-1].partition(".so.")
            cl.build_so(
                r(f"{module_dir}/{parts[-1]}"), f"{stem}.so.{ver.split('.')[0]}", "int cudnn_v(void){return 8003;}\n"
            )
    for name, link in links.items():
        r(f"{module_dir}/{name}").symlink_to(link)
    bundled = "libcudnn.so.8.3.2" if versioned_file else "libcudnn.so.8"
    cl.build_so(r(f"{torch_lib}/{bundled}"), "libcudnn.so.8", "int cudnn_v(void){return 8302;}\n")
    if versioned_file:
        r(f"{torch_lib}/libcudnn.so.8").symlink_to(bundled)
    cl.build_so(
        r(f"{torch_lib}/libtorch_cuda.so"),
        "libtorch_cuda.so",
        "int cudnn_v(void);int t(void){return cudnn_v();}\n",
        link=[r(f"{torch_lib}/libcudnn.so.8")],
        runpath=["$ORIGIN"],
    )
    site = torch_lib.rsplit("/torch/lib", 1)[0]
    cl.write_dist(tmp_path, site, "torch", "1.12.0+cu113")
    probe = probe_facts(
        f"{env['CONDA_PREFIX']}/bin/python", torch_facts("1.12.0+cu113", "11.3"), env=env, site_packages=(site,)
    )
    tg = targets(target(probe))
    libs = collect_cuda_libraries(CollectContext(fake_system(tmp_path, env=env), CollectOptions(), {"targets": tg}))
    f = run(make_facts(targets=tg, cuda_libraries=libs), registry, "cuda.libraries")["cuda.libraries"]
    assert f.status.value == status, f.summary
    assert module_dir in f.summary and "libcudnn.so.8" in f.summary
    assert "export LD_LIBRARY_PATH=" + env["LD_LIBRARY_PATH"].split(":", 1)[1] + "\n" in f.explanation
    if versioned_file:
        assert "8.0.3" in f.summary and "8.3.2" in f.summary


def test_the_loader_reads_the_ld_so_cache_while_the_probes_still_run(tmp_path):
    """``ldconfig -p`` does not depend on the probes: the loader collector runs it before it waits
    for the targets domain, so a ``check`` does not pay for it after the torch import."""
    import threading

    from gpudoctor.collect import Collector
    from gpudoctor.collect.loader import COLLECTORS as LOADER_COLLECTORS
    from gpudoctor.engine import collect_facts
    from gpudoctor.testing import targets

    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/ld.so.cache").write_bytes(b"")
    ran = threading.Event()
    cache = "1 libs found in cache `/etc/ld.so.cache'\n\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"

    def ldconfig(argv):
        ran.set()
        return ok(cache)(argv)

    system = fake_system(tmp_path, runner=ScriptedRunner(default=ldconfig))

    def probes_still_running(ctx):
        assert ran.wait(10), "the loader collector waited for the probes before running ldconfig"
        return targets()

    collectors = {c.domain: c for c in LOADER_COLLECTORS}
    collectors["targets"] = Collector(domain="targets", collect=probes_still_running)
    facts, errors = collect_facts(["targets", "loader"], system, CollectOptions(), collectors)
    assert errors == []
    loader = facts.get("loader")
    assert [e.name for e in loader.ldconfig] == ["libcuda.so.1"]
    assert any(argv[:2] == ("ldconfig", "-p") for argv, _t, _e in system.runner.calls)
