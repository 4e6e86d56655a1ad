"""Check ``torch.compile.cache``: can torch.compile write its Triton and Inductor caches, locally, with room?

``torch.compile`` writes generated code and compiled kernels to two
directories: Triton's (``TRITON_CACHE_DIR``, default ``~/.triton/cache``) and
Inductor's (``TORCHINDUCTOR_CACHE_DIR``, default
``<tempdir>/torchinductor_<user>``; torch ``_inductor/runtime/cache_dir_utils.py``).
The probe reports, for each, the nearest existing directory, whether the
target's user may create entries there, the file system and the free space.

- a cache the user cannot create -> ``fail`` (the first compile dies with
  ``PermissionError``; a read-only home in a container, a shared ``/tmp``
  directory owned by another user);
- a cache on a network file system (NFS, SMB, sshfs) -> ``warn``: every kernel
  is a small file written with a rename and read back through file locks, so
  compiles are slow and nodes sharing the directory race on it;
- less than 1 GiB free -> ``warn``;
- otherwise ``ok``; torch not installed or the probe did not report -> ``skip``.

The remedy sets the variable to a local, writable directory.
"""

from __future__ import annotations

from gpudoctor.checks._gpu import per_target
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.targets import CompileCache, ProbeFacts, TargetFacts
from gpudoctor.model import Check, Command, Finding, Status, fenced

#: file system types of network mounts (``/proc/self/mounts`` third field)
NETWORK_FS = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse.sshfs", "fuse.s3fs", "fuse.gcsfuse")
#: below this much free space a cache is too small for a model's kernels
MIN_FREE = 1 << 30

_VAR = {"triton": "TRITON_CACHE_DIR", "inductor": "TORCHINDUCTOR_CACHE_DIR"}
_LOCAL = {"triton": "/var/tmp/$USER/triton-cache", "inductor": "/var/tmp/$USER/inductor-cache"}


def _commands(c: CompileCache) -> tuple[Command, ...]:
    """Move the cache to a local directory this user owns (the commands :func:`_fix` shows)."""
    return (
        Command(f"mkdir -p {_LOCAL[c.name]}", f"a local directory for the {c.name} cache"),
        Command(f"export {_VAR.get(c.name, '')}={_LOCAL[c.name]}", f"point the {c.name} cache at it"),
    )


def _fix(c: CompileCache) -> str:
    where = (
        "set where it is set now (the job script, the container `ENV`, the kernel's `env`)"
        if c.source != ("default")
        else "set it where the job starts (the job script, the container `ENV`, the kernel's `env`)"
    )
    return f"Point it at a local directory this user owns; {where}:\n\n{fenced(*_commands(c))}"


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB"


def assess(facts: Facts, t: TargetFacts, probe: ProbeFacts) -> Finding:
    """The ``torch.compile.cache`` finding for one target (pure)."""
    if not probe.torch.installed:
        return CHECK.finding(Status.SKIP, f"torch is not installed in {probe.executable}", target=t.label)
    caches = probe.compile_caches
    if isinstance(caches, Unavailable):
        return CHECK.finding(Status.SKIP, f"the compile caches were not probed: {caches.reason}", target=t.label)
    evidence = {
        c.name: f"{c.path} ({c.source}; {c.fstype or '?'} at {c.mount or '?'}; "
        f"{'writable' if c.writable else 'not writable'}; "
        f"{_gib(c.free_bytes) if c.free_bytes is not None else '?'} free)"
        for c in caches
    }
    for c in caches:
        if not c.writable:
            why = (
                f"`{c.checked}` is not a directory"
                if c.checked != c.path and not c.exists
                else f"this user may not create files in `{c.checked}`"
            )
            return CHECK.finding(
                Status.FAIL,
                f"torch.compile cannot write its {c.name} cache {c.path} ({c.source}): {why.replace('`', '')}",
                f"`torch.compile` writes generated code and kernels to `{c.path}` (from {c.source}); {why}, so the "
                f"first compiled call fails with `PermissionError` / `OSError` (a read-only home in a container, a "
                f"`/tmp/torchinductor_<user>` made by another user).\n\n{_fix(c)}",
                evidence=evidence,
                target=t.label,
                commands=_commands(c),
            )
    for c in caches:
        if c.fstype in NETWORK_FS:
            return CHECK.finding(
                Status.WARN,
                f"torch.compile's {c.name} cache {c.path} is on {c.fstype} ({c.mount}), a network file system",
                f"Every compiled kernel is a small file written with a rename and read back under file locks; on "
                f"`{c.fstype}` that makes each compile slow, and jobs on several nodes sharing `{c.path}` race on "
                f"the same entries (stale or half-written kernels).\n\n{_fix(c)}",
                evidence=evidence,
                target=t.label,
                commands=_commands(c),
            )
    for c in caches:
        if c.free_bytes is not None and c.free_bytes < MIN_FREE:
            return CHECK.finding(
                Status.WARN,
                f"only {_gib(c.free_bytes)} free for torch.compile's {c.name} cache {c.path}",
                f"A model's compiled kernels and generated code take hundreds of MB to several GB; with "
                f"{_gib(c.free_bytes)} free under `{c.checked}` the compile fails with `No space left on device` or "
                f"evicts nothing and fills the disk.\n\n{_fix(c)}",
                evidence=evidence,
                target=t.label,
                commands=_commands(c),
            )
    return CHECK.finding(
        Status.OK,
        "torch.compile caches are local and writable ("
        + ", ".join(f"{c.name}: {c.source if c.source != 'default' else 'default place'}" for c in caches)
        + ")",
        evidence=evidence,
        target=t.label,
    )


CHECK = Check(
    id="torch.compile.cache",
    title="torch.compile's Triton and Inductor caches: writable, local (not NFS), with free space",
    needs=("targets",),
    evaluate=per_target("torch.compile.cache", assess),
)
