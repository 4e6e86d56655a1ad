"""Check ``build.sources``: does the build file configure pip, uv and conda where they really look?

Reads the ``build`` facts (``--dockerfile FILE`` replayed on ``--root``):

- a ``sed -i`` on a pip/uv/conda file that does not exist -> ``fail``
  (sed exits 2 and the build stops);
- a write to a path the tool never reads (``/etc/pip/pip.conf``,
  ``~/.pip/pip.ini``, ``/etc/uv.toml``, ``/etc/condarc``, ``~/condarc`` ...)
  -> ``warn`` naming the file the tool reads instead;
- a ``sed -i`` whose pattern matches nothing in an existing file -> ``warn``;
- parts of the file that could not be read (a non-POSIX ``SHELL``) -> ``info``.

apt edits are judged by ``apt.sources``. ``ok`` when every edit lands in a
file its tool reads.
"""

from __future__ import annotations

from gpudoctor.checks import SkipCheck, require
from gpudoctor.facts import Facts
from gpudoctor.facts.mirrors import BuildFacts
from gpudoctor.model import Check, Command, Finding, Status

CHECK_ID = "build.sources"
WHO = {"pip": "pip", "uv": "uv", "conda": "conda"}


def evaluate(facts: Facts) -> list[Finding]:
    build = require(facts, BuildFacts)
    edits = [e for e in build.edits if e.tool in WHO]
    out: list[Finding] = []
    for e in edits:
        if e.action == "sed" and not e.target_exists:
            out.append(
                Finding(
                    check=CHECK_ID,
                    status=Status.FAIL,
                    summary=f"{e.origin}: sed edits {e.path}, which does not exist at that point of the build",
                    explanation=(
                        f'`{e.command}` exits 2 ("can\'t read {e.path}") and the build stops. Write the '
                        f"file instead of editing it (`printf '[global]\\nindex-url = URL\\n' > {e.path}` for "
                        f"pip), or create it earlier in the build."
                    ),
                    evidence={"origin": e.origin, "path": e.path, "command": e.command},
                )
            )
        elif e.read is False:
            out.append(
                Finding(
                    check=CHECK_ID,
                    status=Status.WARN,
                    summary=f"{e.origin}: {e.path} is never read by {WHO[e.tool]}; it reads {e.reads_instead}",
                    explanation=(
                        f"`{e.command}` writes `{e.path}`, but {WHO[e.tool]} does not look there, so the "
                        f"setting has no effect in the image (home {build.home}). Write it to "
                        f"`{e.reads_instead}` instead.\n\nWhere {WHO[e.tool]} reads its configuration: "
                        + {
                            "pip": "`/etc/xdg/pip/pip.conf`, `/etc/pip.conf`, `~/.pip/pip.conf`, "
                            "`~/.config/pip/pip.conf`, `<venv>/pip.conf`, `$PIP_CONFIG_FILE` "
                            "(`pip config debug` lists them).",
                            "uv": "`$UV_CONFIG_FILE`, a project `uv.toml`/`pyproject.toml`, "
                            "`~/.config/uv/uv.toml`, `/etc/xdg/uv/uv.toml`, `/etc/uv/uv.toml`.",
                            "conda": "`/etc/conda/.condarc`, `/etc/conda/condarc.d/`, `<conda root>/.condarc`, "
                            "`~/.config/conda/.condarc`, `~/.conda/.condarc`, `~/.condarc`, "
                            "`$CONDA_PREFIX/.condarc`, `$CONDARC` (`conda config --show-sources`).",
                        }[e.tool]
                    ),
                    evidence={"origin": e.origin, "path": e.path, "reads_instead": e.reads_instead},
                    commands=_move(e.path, e.reads_instead, WHO[e.tool]),
                )
            )
        elif e.action == "sed" and not e.changed:
            out.append(
                Finding(
                    check=CHECK_ID,
                    status=Status.WARN,
                    summary=f"{e.origin}: sed pattern {e.pattern!r} matches nothing in {e.path}",
                    explanation=f"`{e.command}` succeeds but changes nothing: {WHO[e.tool]} keeps its old setting.",
                    evidence={"origin": e.origin, "path": e.path, "pattern": e.pattern},
                )
            )
    if build.notes:
        out.append(
            Finding(
                check=CHECK_ID,
                status=Status.INFO,
                summary=f"parts of {build.file} were not read: {build.notes[0]}",
                explanation="\n".join(f"- {n}" for n in build.notes),
                evidence={"notes": list(build.notes)},
            )
        )
    if out:
        return sorted(out, key=lambda f: -f.status.severity)
    if not edits:
        raise SkipCheck(f"{build.file} does not configure pip, uv or conda through files")
    return [
        Finding(
            check=CHECK_ID,
            status=Status.OK,
            summary=f"{build.file}: {len(edits)} edit{'s' if len(edits) != 1 else ''} of pip/uv/conda "
            f"configuration land in files the tools read",
            evidence={"paths": sorted({e.path for e in edits})},
        )
    ]


def _move(path: str, instead: str, tool: str) -> tuple[Command, ...]:
    """The build step that moves the file where the tool reads it (none when that is a choice)."""
    if not instead.startswith("/") or " " in instead:
        return ()
    return (
        Command(
            f"mkdir -p {instead.rsplit('/', 1)[0]} && mv {path} {instead}",
            f"in the build file, after the write: move it where {tool} reads it",
            "changes",
        ),
    )


CHECK = Check(
    id=CHECK_ID,
    title="build file configures pip, uv and conda where they really look",
    needs=("build",),
    evaluate=evaluate,
)
