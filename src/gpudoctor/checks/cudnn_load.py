"""Check ``cudnn.load``: does each target load the right cuDNN, completely?

Evidence comes from the probe (after ``import torch``: the ``libcudnn*`` files
mapped in ``/proc/self/maps``, ``cudnnGetVersion()`` of the mapped library via
ctypes, and a real ``dlopen`` of every sub-library of the cuDNN major torch was
built for), from the ``cuda_wheels`` domain (the wheel's own copy) and the
target's ``LD_LIBRARY_PATH``/``PATH``.

In order:

1. a sub-library fails to load -> ``fail`` with the loader's error verbatim;
2. the runtime major differs from torch's, or is an older minor of it ->
   ``fail`` (torch refuses: "cuDNN version incompatibility"), naming the file;
3. the loaded cuDNN is not the wheel's copy (``LD_LIBRARY_PATH``, ``LD_PRELOAD``
   or a system copy shadows it) -> ``fail``, naming both files and the
   variable or directory to change;
4. no cuDNN mapped while the wheel's library directory sits on ``PATH``
   rather than the loader path -> ``fail``;
5. otherwise ``ok``. CPU and ROCm builds -> ``skip`` (not applicable).

PyTorch's check (torch/backends/cudnn/__init__.py): runtime major must equal
the compile major and runtime minor must be >= the compile minor.
"""

from __future__ import annotations

import os

from gpudoctor.checks._common import install_command
from gpudoctor.checks._gpu import cuda_build_skip, decode_cudnn, fmt_cudnn, per_target
from gpudoctor.checks._libcuda import libcuda_commands, libcuda_remedy
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.loader import (
    CudaWheelsFacts,
    LibraryDir,
    LoaderFacts,
    TargetWheels,
)
from gpudoctor.facts.targets import CudnnProbe, ProbeFacts, TargetFacts
from gpudoctor.model import Check, Command, Finding, Status


def _norm(path: str) -> str:
    return os.path.normpath(path) if path else path


def _wheels(facts: Facts, label: str) -> TargetWheels | None:
    cw = facts.of(CudaWheelsFacts)
    if isinstance(cw, Unavailable):
        return None
    return next((w for w in cw.targets if w.label == label), None)


def _own_copies(facts: Facts, t: TargetFacts, probe: ProbeFacts, major: int | None) -> list[str]:
    """Paths of the cuDNN shim shipped with this torch (nvidia-cudnn wheel or torch/lib)."""
    out: list[str] = []
    w = _wheels(facts, t.label)
    dirs: list[LibraryDir] = list(w.lib_dirs) if w else []
    for d in dirs:
        for lib in d.libraries:
            if lib.name.startswith("libcudnn.so") and (major is None or lib.name.startswith(f"libcudnn.so.{major}")):
                out.append(lib.path)
    return out


def _cudnn_dist(facts: Facts, label: str) -> tuple[str, str] | None:
    w = _wheels(facts, label)
    if w:
        for d in w.dists:
            if d.name.startswith("nvidia-cudnn"):
                return d.name, d.version
    return None


def _path_entries(probe: ProbeFacts, var: str) -> list[str]:
    value = probe.env.get(var)
    return value.split(":") if value else []


def _shadow_remedy(probe: ProbeFacts, loaded: str, facts: Facts) -> tuple[str, str, tuple[Command, ...]]:
    """(where it came from, what to do, the commands) for a cuDNN loaded from ``loaded``."""
    d = _norm(os.path.dirname(loaded))
    ld = _path_entries(probe, "LD_LIBRARY_PATH")
    if any(_norm(e) == d for e in ld if e):
        pos = next(i for i, e in enumerate(ld) if e and _norm(e) == d)
        rest = [e for e in ld if not (e and _norm(e) == d)]
        where = f"`{d}`, entry {pos + 1} of `LD_LIBRARY_PATH`" + (" (the first)" if pos == 0 else "")
        modules = probe.env.get("LOADEDMODULES", "")
        module_hint = ""
        commands = [Command(f"export LD_LIBRARY_PATH={':'.join(rest)}", "the loader path without that directory")]
        if "cudnn" in modules.lower():
            mod = next((m for m in modules.split(":") if "cudnn" in m.lower()), "cudnn")
            module_hint = (
                f"It was put there by the environment module `{mod}`: `module unload {mod.split('/')[0]}`, or "
            )
            commands.insert(0, Command(f"module unload {mod.split('/')[0]}", "unload the module that added it"))
        conda = probe.env.get("CONDA_PREFIX")
        if conda and _norm(os.path.join(conda, "lib")) == d:
            # TensorFlow's pip guide (2.11-2.13) had users add $CONDA_PREFIX/lib to LD_LIBRARY_PATH in an
            # activation script; the conda env's cudnn/cudatoolkit packages then shadow torch's wheels
            module_hint = (
                f"It is this conda environment's own `lib` (its `cudnn`/`cudatoolkit` conda packages: "
                f"`conda list cudnn`), usually put on the path by an activation script: "
                f"`grep -r LD_LIBRARY_PATH {conda}/etc/conda/activate.d/` and delete that line, or "
            )
        new_value = ":".join(rest)
        todo = (
            f"Take that directory out of the loader path for this environment. {module_hint}remove it from "
            f"`LD_LIBRARY_PATH` in your shell rc / job script:\n\n```\nexport LD_LIBRARY_PATH={new_value}\n```\n\n"
            f"Do not copy libraries into `torch/lib`."
        )
        return where, todo, tuple(commands)
    if any(
        _norm(os.path.dirname(p)) == d or _norm(p) == _norm(loaded)
        for p in (probe.env.get("LD_PRELOAD") or "").replace(" ", ":").split(":")
        if p
    ):
        return (
            "`LD_PRELOAD`",
            "Remove that library from `LD_PRELOAD`.",
            (Command("unset LD_PRELOAD", "drop the preload"),),
        )
    loader = facts.of(LoaderFacts)
    if (
        isinstance(loader, LoaderFacts)
        and not isinstance(loader.ldconfig, Unavailable)
        and any(_norm(os.path.dirname(e.path)) == d for e in loader.ldconfig)
    ):
        return (
            f"the system library directory `{d}` (ld.so cache)",
            "A system cuDNN package is found before the wheel's copy. Uninstall it (Debian/Ubuntu: "
            "`sudo apt-get remove 'libcudnn*'`; RHEL: `sudo dnf remove 'libcudnn*'`) or make sure no other "
            "import (TensorFlow, onnxruntime-gpu, cupy) loads it before torch.",
            (
                Command("sudo apt-get remove 'libcudnn*'", "Debian/Ubuntu: remove the system cuDNN", "root"),
                Command("sudo dnf remove 'libcudnn*'", "RHEL: remove the system cuDNN", "root"),
            ),
        )
    return (
        f"`{d}`",
        "Another library or import loaded this copy before torch. Import torch first, or remove "
        "that directory from the loader path.",
        (),
    )


def assess(facts: Facts, t: TargetFacts, probe: ProbeFacts) -> Finding:
    """The ``cudnn.load`` finding for one target (pure)."""
    cd = probe.cudnn
    if isinstance(cd, CudnnProbe) and not cd.applicable:
        return CHECK.finding(Status.SKIP, f"not applicable: {cd.reason}", target=t.label)
    reason = cuda_build_skip(probe)
    # issue 11: without (an importable) torch, the nvidia-cudnn wheel's cuDNN is still tested
    torch_free = isinstance(cd, CudnnProbe) and cd.applicable and not (probe.torch.installed and probe.torch.import_ok)
    if reason and not torch_free:
        return CHECK.finding(Status.SKIP, f"not applicable: {reason}", target=t.label)
    if isinstance(cd, Unavailable):
        return CHECK.finding(Status.SKIP, f"cuDNN was not probed: {cd.reason}", target=t.label)
    tf = probe.torch
    compiled = tf.cudnn_compile_version
    major = cd.expected_major
    evidence = {
        "python": probe.executable,
        "torch": tf.version,
        "cudnn_compiled": compiled,
        "cudnn_loaded": cd.library_path,
        "cudnn_runtime": fmt_cudnn(cd.runtime_version) if cd.runtime_version else None,
        "loaded_paths": list(cd.loaded_paths),
        "LD_LIBRARY_PATH": probe.env.get("LD_LIBRARY_PATH", ""),
    }
    own = _own_copies(facts, t, probe, major)
    evidence["wheel_copies"] = own
    dist = _cudnn_dist(facts, t.label)

    # 1. sub-libraries
    broken = [s for s in cd.sublibraries if not s.ok]
    driver = [s for s in broken if "libcuda.so" in (s.error or "")]
    if driver:
        # issue 11: the missing piece is the driver's library, not cuDNN's
        return CHECK.finding(
            Status.FAIL,
            f"cuDNN's {driver[0].name} cannot load because the CUDA driver library libcuda is not resolvable "
            f"(a driver/loader problem, not cuDNN)",
            f"The loader says:\n\n```\n{driver[0].error}\n```\n\n`{driver[0].name}` itself is present; what is "
            f"missing is its dependency `libcuda.so`, the user-space half of the NVIDIA driver. Reinstalling cuDNN "
            f"does not help.\n\n{libcuda_remedy(facts, probe)}",
            evidence=evidence,
            target=t.label,
            commands=libcuda_commands(facts, probe),
        )
    if broken:
        lines = "\n".join(f"{s.name}: {s.error}" for s in broken)
        fix = Command(
            install_command(
                probe.executable,
                "--force-reinstall " + (f"{dist[0]}=={dist[1]}" if dist else "torch"),
                probe.venv_creator,
            ),
            "reinstall the cuDNN wheel" if dist else "reinstall torch with its CUDA wheels",
            "changes",
        )
        reinstall = f"`{fix.text}`" if dist else f"reinstall torch (`{fix.text}`)"
        return CHECK.finding(
            Status.FAIL,
            f"{len(broken)} of {len(cd.sublibraries)} cuDNN {major} sub-libraries fail to load: "
            f"{broken[0].error if broken[0].name in (broken[0].error or '') else broken[0].name + ': ' + str(broken[0].error)}",
            f"cuDNN loads its pieces lazily; the first convolution or RNN that needs a missing piece fails "
            f"(`Could not load library {broken[0].name}` / `CUDNN_STATUS_NOT_INITIALIZED`). The loader says:\n\n"
            f"```\n{lines}\n```\n\nSearched: {', '.join(f'`{d}`' for d in cd.search_dirs) or 'the loader path'}. "
            f"A missing or truncated file means a broken install: {reinstall}. A *dependency* that cannot be found "
            f"(another `lib*.so` named in the error) must come from the matching `nvidia-*` wheel; a foreign "
            f"directory on `LD_LIBRARY_PATH` can also supply a wrong copy.",
            evidence=evidence,
            target=t.label,
            commands=(fix,),
        )

    # 2. runtime vs compile version
    loaded = cd.library_path
    if cd.runtime_version and compiled:
        rt = decode_cudnn(cd.runtime_version)
        cv = tuple(int(x) for x in compiled.split(".")[:3])
        if rt[0] != cv[0] or rt[1] < cv[1]:
            where, todo, commands = _shadow_remedy(probe, loaded or "", facts)
            relation = "a different major than" if rt[0] != cv[0] else "older than"
            own_txt = f" The copy that belongs to this torch is `{own[0]}`." if own else ""
            return CHECK.finding(
                Status.FAIL,
                f"cuDNN {fmt_cudnn(cd.runtime_version)} loaded from {loaded} is {relation} the {compiled} torch "
                f"{tf.version} was built with",
                f"torch refuses this cuDNN (`cuDNN version incompatibility: PyTorch was compiled against "
                f"{cv} but found runtime version {rt}`; older releases say `linked against`), so cuDNN-backed "
                f"layers fail.\n\nThe loaded file `{loaded}` comes "
                f"from {where}.{own_txt}\n\n{todo} Alternatively load a cuDNN ≥ {compiled} of major {cv[0]}.",
                evidence=evidence,
                target=t.label,
                commands=commands,
            )

    # 3a. two copies of the shim in one process
    shims = sorted({p for p in cd.loaded_paths if os.path.basename(p).startswith("libcudnn.so")})
    if len({_norm(os.path.dirname(p)) for p in shims}) > 1:
        return CHECK.finding(
            Status.FAIL,
            f"two cuDNN copies are mapped into {probe.executable}: {' and '.join(shims)}",
            f"After `import torch` the process holds {len(shims)} different `libcudnn.so` files:\n\n"
            + "\n".join(f"- `{p}`" for p in shims)
            + "\n\nThe first one loaded wins every later lookup by name; the other library's users then call "
            "into a cuDNN they were not built for. Typical cause: another framework (TensorFlow, onnxruntime-gpu, "
            "cupy) or an `LD_PRELOAD`/`LD_LIBRARY_PATH` entry bringing its own cuDNN. Keep one cuDNN per "
            "environment (the one the torch wheel installs).",
            evidence=evidence,
            target=t.label,
        )
    if cd.runtime_version and tf.cudnn_version and cd.runtime_version != tf.cudnn_version:
        return CHECK.finding(
            Status.FAIL,
            f"torch reports cuDNN {fmt_cudnn(tf.cudnn_version)} but the mapped {loaded} is "
            f"{fmt_cudnn(cd.runtime_version)}",
            "`torch.backends.cudnn.version()` and `cudnnGetVersion()` of the library mapped in the process "
            "disagree, so torch is not using the file the loader resolves by name. Look for a second cuDNN "
            "(`LD_PRELOAD`, `LD_LIBRARY_PATH`, another framework imported first) and remove it.",
            evidence=evidence,
            target=t.label,
        )

    # 3b. shadowed: loaded copy is not the wheel's
    if loaded and own and _norm(os.path.dirname(loaded)) not in {_norm(os.path.dirname(p)) for p in own}:
        where, todo, commands = _shadow_remedy(probe, loaded, facts)
        return CHECK.finding(
            Status.FAIL,
            f"the cuDNN loaded in {probe.executable} is {loaded}, not the wheel's {own[0]}",
            f"torch {tf.version} ships cuDNN in `{os.path.dirname(own[0])}`, but the process mapped `{loaded}` "
            f"from {where}. Even when it works today, a different cuDNN build than the one torch was tested with "
            f"causes version errors or wrong-kernel crashes after the next upgrade.\n\n{todo}",
            evidence=evidence,
            target=t.label,
            commands=commands,
        )

    # 4. nothing mapped
    if torch_free and not loaded:
        return CHECK.finding(Status.SKIP, f"not applicable: {reason}", target=t.label)
    if not loaded:
        on_path = [e for e in _path_entries(probe, "PATH") if e and "nvidia" in e and e.rstrip("/").endswith("lib")]
        wheel_dirs = {_norm(os.path.dirname(p)) for p in own}
        on_path = [e for e in on_path if not wheel_dirs or _norm(e) in wheel_dirs or "cudnn" in e]
        if on_path:
            return CHECK.finding(
                Status.FAIL,
                f"no cuDNN is loaded: its wheel directory {on_path[0]} is on PATH, which the loader never searches",
                f"`PATH` is for programs; shared libraries are found through the library's RPATH, "
                f"`LD_LIBRARY_PATH` and the ld.so cache. Move the entry:\n\n```\n"
                f"export LD_LIBRARY_PATH={on_path[0]}:$LD_LIBRARY_PATH\n```\n\n(better: reinstall torch so its RPATH "
                f"finds the `nvidia-*` wheels by itself: `{install_command(probe.executable, '--force-reinstall torch', probe.venv_creator)}`).",
                evidence=evidence,
                target=t.label,
                commands=(
                    Command(f"export LD_LIBRARY_PATH={on_path[0]}:$LD_LIBRARY_PATH", "put it on the loader path"),
                ),
            )
        return CHECK.finding(
            Status.FAIL,
            f"torch {tf.version} was built with cuDNN {compiled or major}, but no libcudnn is loaded",
            f"After `import torch` no `libcudnn.so` is mapped ({cd.runtime_error or 'not found'}). Reinstall torch "
            f"with its CUDA dependencies so the `nvidia-cudnn` wheel is present:\n\n```\n"
            f"{install_command(probe.executable, '--force-reinstall torch', probe.venv_creator)}\n```",
            evidence=evidence,
            target=t.label,
            commands=(
                Command(
                    install_command(probe.executable, "--force-reinstall torch", probe.venv_creator),
                    "torch with its cuDNN wheel",
                    "changes",
                ),
            ),
        )

    version = fmt_cudnn(cd.runtime_version) if cd.runtime_version else "?"
    n = len(cd.sublibraries)

    return CHECK.finding(
        Status.OK,
        f"cuDNN {version} loaded from {loaded}" + (f"; all {n} sub-libraries load" if n else ""),
        evidence=evidence,
        target=t.label,
    )


CHECK = Check(
    id="cudnn.load",
    title="cuDNN: the wheel's copy, the right version, every sub-library loadable",
    needs=("targets", "cuda_wheels", "loader"),
    evaluate=per_target("cudnn.load", assess),
)
