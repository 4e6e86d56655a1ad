"""Build real shared libraries that look like a CUDA wheel install, with gcc.

Used by the loader-model tests: a torch-like ``libtorch_cuda.so`` whose
RUNPATH (``$ORIGIN``) points at wheel-like ``nvidia/<component>/lib``
directories, a ``libcusparse.so.12`` that needs a versioned nvJitLink symbol,
two ``libnvJitLink.so.12`` copies (a 12.4 wheel one and an older toolkit one,
symbol versions set by a linker version script), and a tiny executable that
links the lot and waits on stdin so its ``/proc/<pid>/maps`` can be read.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

SITE = "/home/user/venv/lib/python3.10/site-packages"
TOOLKIT = "/usr/local/cuda-12.2/lib64"


def gcc() -> str | None:
    return shutil.which("gcc") or shutil.which("cc")


def build_so(
    out: Path,
    soname: str,
    source: str,
    *,
    version_script: str | None = None,
    link: Sequence[Path] = (),
    runpath: Iterable[str] = (),
    new_dtags: bool = True,
) -> Path:
    """Compile ``source`` into ``out`` with DT_SONAME ``soname``; ``link``: libraries it needs
    (by file); ``runpath``: DT_RUNPATH entries (DT_RPATH when ``new_dtags`` is False)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.parent / f".{out.name}.c"
    src.write_text(source)
    argv = [gcc(), "-shared", "-fPIC", "-o", str(out), str(src), f"-Wl,-soname,{soname}", "-Wl,--no-as-needed"]
    if version_script:
        vs = out.parent / f".{out.name}.map"
        vs.write_text(version_script)
        argv.append(f"-Wl,--version-script={vs}")
    for lib in link:
        argv += [f"-L{lib.parent}", f"-l:{lib.name}"]
    rp = ":".join(runpath)
    if rp:
        argv += [f"-Wl,-rpath,{rp}", "-Wl,--enable-new-dtags" if new_dtags else "-Wl,--disable-new-dtags"]
    subprocess.run(argv, check=True, capture_output=True)
    src.unlink()
    return out


def nvjitlink(out: Path, versions: Sequence[str]) -> Path:
    """A ``libnvJitLink.so.12`` exporting ``__nvJitLinkComplete_<v>`` for each ``12_X`` in ``versions``,
    all in the version node ``libnvJitLink.so.12`` (as NVIDIA's library does)."""
    body = "".join(f"int __nvJitLinkComplete_{v}(void) {{ return {i}; }}\n" for i, v in enumerate(versions))
    script = (
        "libnvJitLink.so.12 { global: " + " ".join(f"__nvJitLinkComplete_{v};" for v in versions) + " local: *; };\n"
    )
    return build_so(out, "libnvJitLink.so.12", body, version_script=script)


def write_dist(root: Path, site: str, dist: str, version: str, files: Iterable[str] = ()) -> None:
    info = root / site.lstrip("/") / f"{dist}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "RECORD").write_text("".join(f"{f},sha256=x,1\n" for f in files))


def wheel_tree(
    root: Path,
    *,
    site: str = SITE,
    toolkit: str = TOOLKIT,
    rpath_style: bool = False,
    toolkit_versions: Sequence[str] = ("12_0", "12_1", "12_2"),
    cusparse_needs: str = "12_4",
    toolkit_file: str = "libnvJitLink.so.12.2.140",
    dists: dict[str, str] | None = None,
) -> dict[str, str]:
    """Build the case-33 layout under ``root`` (paths inside it are returned, keyed by role).

    ``rpath_style``: libcusparse gets DT_RPATH instead of DT_RUNPATH (then its
    directory list beats LD_LIBRARY_PATH).
    """
    r = lambda p: root / p.lstrip("/")
    wheel_jit = f"{site}/nvidia/nvjitlink/lib/libnvJitLink.so.12"
    nvjitlink(r(wheel_jit), ("12_0", "12_1", "12_2", "12_3", "12_4"))
    tk_real = f"{toolkit}/{toolkit_file}"
    nvjitlink(r(tk_real), toolkit_versions)
    os.symlink(toolkit_file, r(f"{toolkit}/libnvJitLink.so.12"))
    cusparse = f"{site}/nvidia/cusparse/lib/libcusparse.so.12"
    build_so(
        r(cusparse),
        "libcusparse.so.12",
        f"int __nvJitLinkComplete_{cusparse_needs}(void);\n"
        f"int cusparseCreate(void) {{ return __nvJitLinkComplete_{cusparse_needs}(); }}\n",
        link=[r(wheel_jit)],
        runpath=["$ORIGIN/../../nvjitlink/lib"],
        new_dtags=not rpath_style,
    )
    torch_cuda = f"{site}/torch/lib/libtorch_cuda.so"
    build_so(
        r(torch_cuda),
        "libtorch_cuda.so",
        "int cusparseCreate(void);\nint torch_cuda_init(void) { return cusparseCreate(); }\n",
        link=[r(cusparse)],
        runpath=["$ORIGIN/../../nvidia/cusparse/lib", "$ORIGIN/../../nvidia/nvjitlink/lib"],
    )
    app = f"{site}/torch/bin/app"
    src = r(app).parent / "app.c"
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(
        "#include <unistd.h>\nint torch_cuda_init(void);\n"
        "int main(int c, char **v) { char b; if (c > 1) return torch_cuda_init(); "
        'if (write(1, "ready\\n", 6) != 6) return 9; return (int)read(0, &b, 1); }\n'
    )
    subprocess.run(
        [
            gcc(),
            "-o",
            str(r(app)),
            str(src),
            f"-L{r(torch_cuda).parent}",
            "-l:libtorch_cuda.so",
            "-Wl,--no-as-needed",
            "-Wl,-rpath,$ORIGIN/../lib",
            "-Wl,--enable-new-dtags",
        ],
        check=True,
        capture_output=True,
    )
    dists = dists or {"torch": "2.5.1", "nvidia-nvjitlink-cu12": "12.4.127", "nvidia-cusparse-cu12": "12.3.1.170"}
    owned = {
        "nvidia-nvjitlink-cu12": ["nvidia/nvjitlink/lib/libnvJitLink.so.12"],
        "nvidia-cusparse-cu12": ["nvidia/cusparse/lib/libcusparse.so.12"],
    }
    for dist, version in dists.items():
        write_dist(root, site, dist.replace("-", "_"), version, owned.get(dist, ()))
    return {
        "wheel_jit": wheel_jit,
        "toolkit_jit": f"{toolkit}/libnvJitLink.so.12",
        "toolkit_real": tk_real,
        "cusparse": cusparse,
        "torch_cuda": torch_cuda,
        "app": app,
        "site": site,
        "toolkit": toolkit,
    }
