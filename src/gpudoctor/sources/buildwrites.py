"""Replay what a Dockerfile's commands do to package-source files, on a copy of the image root's files.

Starting from the files of the inspected root (``read(path)``), every
command of :func:`gpudoctor.sources.dockerfile.commands` is replayed on an
in-memory overlay: ``sed -i`` (several ``-e`` scripts, ``;``-separated
``s`` commands, any delimiter, BRE or ``-E``/``-r`` ERE, flags ``g``/``I``),
``echo``/``printf``/``cat <<EOF`` with ``>``/``>>``, ``tee [-a]``, ``cp``,
``mv``, ``rm`` and ``COPY``/``ADD`` (here-document bodies are known, files
from the build context are not). Each edit of a file apt, pip, uv or conda
might read becomes a :class:`~gpudoctor.facts.mirrors.SourceEdit`; the
overlay's final apt files are what apt reads after the build.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Sequence

from gpudoctor.facts.mirrors import SourceEdit
from gpudoctor.sources.dockerfile import Parsed, ShellCommand, printed_text

__all__ = ["Overlay", "SedSub", "apply_sed", "parse_sed_script", "replay", "tool_of"]

Reader = Callable[[str], str | None]
Lister = Callable[[str], list[str]]


class SedSub:
    """One ``s/old/new/flags`` command of a sed script."""

    def __init__(self, old: str, new: str, flags: str, extended: bool):
        self.old, self.new, self.flags, self.extended = old, new, flags, extended

    def regex(self) -> re.Pattern[str]:
        """The pattern as a Python regex (BRE converted unless ``extended``). Raises re.error."""
        pat = self.old if self.extended else _bre_to_python(self.old)
        return re.compile(pat, re.IGNORECASE if "I" in self.flags or "i" in self.flags else 0)

    def apply(self, text: str) -> str:
        rx = self.regex()
        repl = _sed_replacement(self.new)
        count = 0 if "g" in self.flags else 1
        return (
            rx.sub(repl, text, count=count)
            if count == 0
            else "\n".join(rx.sub(repl, line, count=1) for line in text.split("\n"))
        )

    @property
    def literal_old(self) -> str:
        """The pattern with backslash escapes removed (for messages)."""
        return re.sub(r"\\(.)", r"\1", self.old)

    @property
    def literal_new(self) -> str:
        return re.sub(r"\\(.)", r"\1", self.new)


def _bre_to_python(bre: str) -> str:
    out, i = [], 0
    while i < len(bre):
        c = bre[i]
        if c == "\\" and i + 1 < len(bre):
            n = bre[i + 1]
            out.append(n if n in "(){}+?|" else "\\" + n)
            i += 2
            continue
        out.append("\\" + c if c in "(){}+?|" else c)
        i += 1
    return "".join(out)


def _sed_replacement(new: str):
    def repl(m: re.Match[str]) -> str:
        out, i = [], 0
        while i < len(new):
            c = new[i]
            if c == "\\" and i + 1 < len(new):
                n = new[i + 1]
                if n.isdigit():
                    out.append(m.group(int(n)) or "")
                elif n == "n":
                    out.append("\n")
                else:
                    out.append(n)
                i += 2
                continue
            out.append(m.group(0) if c == "&" else c)
            i += 1
        return "".join(out)

    return repl


def parse_sed_script(script: str, extended: bool = False) -> list[SedSub]:
    """The ``s`` commands of a sed script (other commands are skipped; addresses ignored)."""
    subs: list[SedSub] = []
    i = 0
    while i < len(script):
        # skip separators, addresses and braces up to a command letter
        m = re.match(
            r"[\s;{}]*(?:(?:\d+|\$|/(?:\\.|[^/])*/)(?:\s*,\s*(?:\d+|\$|/(?:\\.|[^/])*/))?\s*!?\s*)?", script[i:]
        )
        i += m.end() if m else 0
        if i >= len(script):
            break
        if script[i] != "s" or i + 1 >= len(script):
            # another command: skip to the next separator
            nxt = re.search(r"[;\n]", script[i:])
            i = len(script) if nxt is None else i + nxt.end()
            continue
        d = script[i + 1]
        parts: list[str] = []
        j, buf = i + 2, []
        while j < len(script) and len(parts) < 2:
            c = script[j]
            if c == "\\" and j + 1 < len(script):
                buf.append(script[j + 1] if script[j + 1] == d else script[j : j + 2])
                j += 2
                continue
            if c == d:
                parts.append("".join(buf))
                buf = []
                j += 1
                continue
            buf.append(c)
            j += 1
        if len(parts) < 2:
            break
        fm = re.match(r"[gIipe0-9]*", script[j:])
        flags = fm.group(0) if fm else ""
        subs.append(SedSub(parts[0], parts[1], flags, extended))
        i = j + len(flags)
    return subs


def sed_invocation(argv: Sequence[str]) -> tuple[list[SedSub], list[str]] | None:
    """(substitutions, files) of an in-place ``sed`` command, or None when it is not ``sed -i``."""
    in_place = False
    extended = False
    scripts: list[str] = []
    files: list[str] = []
    args = list(argv[1:])
    k = 0
    positional: list[str] = []
    while k < len(args):
        a = args[k]
        if a == "--":
            positional += args[k + 1 :]
            break
        if a in ("-e", "--expression"):
            scripts.append(args[k + 1] if k + 1 < len(args) else "")
            k += 2
            continue
        if a.startswith("--expression="):
            scripts.append(a.split("=", 1)[1])
        elif a.startswith("--in-place"):
            in_place = True
        elif a in ("-E", "-r", "--regexp-extended"):
            extended = True
        elif a in ("-f", "--file"):
            k += 2
            scripts.append("")
            continue
        elif a.startswith("--"):
            pass
        elif a.startswith("-") and len(a) > 1:
            letters = a[1:]
            if "i" in letters:
                in_place = True
                letters = letters.split("i", 1)[0]  # -i.bak: the rest is a suffix
            if "E" in letters or "r" in letters:
                extended = True
            if letters.endswith("e"):
                scripts.append(args[k + 1] if k + 1 < len(args) else "")
                k += 2
                continue
        else:
            positional.append(a)
        k += 1
    if not in_place:
        return None
    if not scripts and positional:
        scripts.append(positional.pop(0))
    files = positional
    subs = [s for script in scripts for s in parse_sed_script(script, extended)]
    return subs, files


def apply_sed(subs: Sequence[SedSub], text: str) -> str:
    """``text`` after the substitutions (a pattern Python cannot compile is applied literally)."""
    for s in subs:
        try:
            text = s.apply(text)
        except re.error:
            text = text.replace(s.literal_old, s.literal_new)
    return text


# --------------------------------------------------------------------------- which tool reads a path


def tool_of(path: str) -> str | None:
    """``apt``, ``pip``, ``uv`` or ``conda`` for a path that looks like that tool's configuration, else None."""
    name = path.rsplit("/", 1)[-1]
    if path.startswith("/etc/apt/sources.list"):
        return "apt"
    if name in ("pip.conf", "pip.ini"):
        return "pip"
    if name == "uv.toml":
        return "uv"
    if name in (".condarc", "condarc") or path.startswith("/etc/conda/condarc.d/"):
        return "conda"
    return None


class Overlay:
    """Files of the root with the build's changes on top (``None`` = removed)."""

    def __init__(self, read: Reader, listdir: Lister):
        self._read, self._listdir = read, listdir
        self.changes: dict[str, str | None] = {}

    def read(self, path: str) -> str | None:
        if path in self.changes:
            return self.changes[path]
        return self._read(path)

    def glob(self, pattern: str) -> list[str]:
        if not any(c in pattern for c in "*?["):
            return [pattern]
        directory, _, base = pattern.rpartition("/")
        names = set(self._listdir(directory or "/"))
        names |= {
            p.rsplit("/", 1)[-1] for p, t in self.changes.items() if t is not None and p.rpartition("/")[0] == directory
        }
        names -= {
            p.rsplit("/", 1)[-1] for p, t in self.changes.items() if t is None and p.rpartition("/")[0] == directory
        }
        return sorted(f"{directory}/{n}" for n in names if fnmatch.fnmatch(n, base)) or [pattern]

    def write(self, path: str, text: str | None) -> None:
        self.changes[path] = text


def _edit(
    cmd: ShellCommand,
    path: str,
    action: str,
    exists: bool,
    changed: bool,
    content: str | None,
    pattern: str = "",
    replacement: str = "",
) -> SourceEdit:
    return SourceEdit(
        origin=cmd.origin,
        command=cmd.text,
        tool=tool_of(path) or "",
        path=path,
        action=action,
        target_exists=exists,
        changed=changed,
        content=content,
        pattern=pattern,
        replacement=replacement,
    )


def replay(parsed: Parsed, read: Reader, listdir: Lister) -> tuple[list[SourceEdit], Overlay]:
    """Replay ``parsed`` on the root's files; (edits of package-source files, the overlay)."""
    fs = Overlay(read, listdir)
    edits: list[SourceEdit] = []
    for cmd in parsed.commands:
        name = cmd.name
        if name == "sed":
            inv = sed_invocation(cmd.argv)
            if inv is None:
                continue
            subs, files = inv
            for pattern in files:
                for path in fs.glob(pattern):
                    if tool_of(path) is None:
                        continue
                    old = fs.read(path)
                    if old is None:
                        edits.append(
                            _edit(
                                cmd,
                                path,
                                "sed",
                                False,
                                False,
                                None,
                                subs[0].literal_old if subs else "",
                                subs[0].literal_new if subs else "",
                            )
                        )
                        continue
                    new = apply_sed(subs, old)
                    fs.write(path, new)
                    for s in subs or [SedSub("", "", "", False)]:
                        edits.append(
                            _edit(cmd, path, "sed", True, apply_sed([s], old) != old, new, s.literal_old, s.literal_new)
                        )
            continue
        if name in ("COPY", "ADD"):
            dest = cmd.argv[-1]
            srcs = cmd.argv[1:-1] or ("<here-document>",)
            for src in srcs:
                path = (
                    f"{dest.rstrip('/')}/{src.rsplit('/', 1)[-1]}" if dest.endswith("/") and cmd.stdin is None else dest
                )
                if tool_of(path) is None:
                    continue
                exists = fs.read(path) is not None
                fs.write(path, cmd.stdin)
                edits.append(_edit(cmd, path, "copy", exists, True, cmd.stdin))
            continue
        if name == "rm":
            for pattern in (a for a in cmd.argv[1:] if not a.startswith("-")):
                for path in fs.glob(pattern):
                    if tool_of(path) is not None and fs.read(path) is not None:
                        fs.write(path, None)
                        edits.append(_edit(cmd, path, "remove", True, True, None))
            continue
        if name in ("cp", "mv"):
            args = [a for a in cmd.argv[1:] if not a.startswith("-")]
            if len(args) == 2:
                src, dest = args
                if dest.endswith("/") or (
                    fs.read(dest) is None
                    and tool_of(dest) is None
                    and "." not in dest.rsplit("/", 1)[-1]
                    and tool_of(f"{dest}/{src.rsplit('/', 1)[-1]}")
                ):
                    dest = f"{dest.rstrip('/')}/{src.rsplit('/', 1)[-1]}"
                text = fs.read(src)
                if tool_of(dest) is not None:
                    exists = fs.read(dest) is not None
                    fs.write(dest, text)
                    edits.append(_edit(cmd, dest, name, exists, True, text))
                if name == "mv" and tool_of(src) is not None and text is not None:
                    fs.write(src, None)
                    edits.append(_edit(cmd, src, "remove", True, True, None))
            continue
        content = printed_text(cmd)
        if (
            content is None
            and name in ("cat", "tee")
            and cmd.stdin is not None
            and (name == "tee" or len(cmd.argv) == 1)
        ):
            content = cmd.stdin
        targets: list[tuple[str, bool]] = [(t, op == ">>") for op, t in cmd.redirects if op in (">", ">>", ">|")]
        if name == "tee":
            append = any(a in ("-a", "--append") for a in cmd.argv[1:])
            targets += [(a, append) for a in cmd.argv[1:] if not a.startswith("-")]
        for path, append in targets:
            if tool_of(path) is None:
                continue
            old = fs.read(path)
            written = None if content is None else ((old or "") + content if append else content)
            fs.write(path, written)
            edits.append(_edit(cmd, path, "append" if append else "write", old is not None, True, written))
    return edits, fs


# --------------------------------------------------------------------------- does the tool read it?

#: Where conda is usually installed (its root prefix's ``.condarc`` is read).
CONDA_ROOTS = (
    "/opt/conda",
    "/opt/miniconda3",
    "/opt/miniconda",
    "/opt/miniforge3",
    "/opt/mambaforge",
    "/opt/anaconda3",
    "/usr/local",
)


def _prefixes_created(parsed: Parsed) -> list[str]:
    """Environments the build creates (``python -m venv X``, ``virtualenv X``, ``uv venv X``, ``conda create -p X``)."""
    out: list[str] = []
    for c in parsed.commands:
        a = list(c.argv)
        if "venv" in a:
            rest = [x for x in a[a.index("venv") + 1 :] if not x.startswith("-")]
            if rest:
                out.append(rest[0].rstrip("/"))
        elif c.name == "virtualenv":
            rest = [x for x in a[1:] if not x.startswith("-")]
            if rest:
                out.append(rest[0].rstrip("/"))
        elif c.name in ("conda", "mamba", "micromamba") and ("-p" in a or "--prefix" in a):
            flag = "-p" if "-p" in a else "--prefix"
            if a.index(flag) + 1 < len(a):
                out.append(a[a.index(flag) + 1].rstrip("/"))
    return out


def judge(
    edit: SourceEdit, env: dict[str, str], home: str, exists: Callable[[str], bool], created: Sequence[str] = ()
) -> tuple[bool | None, str]:
    """(read, reads_instead) for a pip/uv/conda edit: does the tool read ``edit.path`` in the image?

    Sources: pip-apt-config.md (pip ``configuration.py``, uv "Configuration
    files", conda ``SEARCH_PATH``). ``read`` is None when the path may be a
    project file (uv) or the tool is apt (judged by apt.sources).
    """
    path, tool = edit.path, edit.tool
    xdg_home = env.get("XDG_CONFIG_HOME") or f"{home}/.config"
    xdg_dirs = [d for d in (env.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(":") if d]
    prefixes = [env[v].rstrip("/") for v in ("VIRTUAL_ENV", "CONDA_PREFIX") if env.get(v)] + list(created)
    directory = path.rsplit("/", 1)[0]
    if tool == "pip":
        reads = {f"{d}/pip/pip.conf" for d in xdg_dirs} | {
            "/etc/pip.conf",
            f"{home}/.pip/pip.conf",
            f"{xdg_home}/pip/pip.conf",
        }
        if env.get("PIP_CONFIG_FILE"):
            reads.add(env["PIP_CONFIG_FILE"])
        if path in reads:
            return True, ""
        site = path.endswith("/pip.conf") and (
            directory in prefixes
            or exists(f"{directory}/pyvenv.cfg")
            or exists(f"{directory}/bin/python3")
            or exists(f"{directory}/bin/python")
        )
        if site:
            return True, ""
        instead = (
            "/etc/pip.conf"
            if path.startswith("/etc/")
            else f"{xdg_home}/pip/pip.conf"
            if path.startswith(home + "/")
            else "/etc/pip.conf (all users) or <venv>/pip.conf (one environment)"
        )
        return False, instead
    if tool == "uv":
        reads = {f"{xdg_home}/uv/uv.toml", "/etc/uv/uv.toml"} | {f"{d}/uv/uv.toml" for d in xdg_dirs}
        if env.get("UV_CONFIG_FILE"):
            reads.add(env["UV_CONFIG_FILE"])
        if path in reads:
            return True, ""
        if path.startswith("/etc/"):
            return False, "/etc/uv/uv.toml"
        if path.startswith(home + "/.") or path == f"{home}/uv.toml":
            return False, f"{xdg_home}/uv/uv.toml"
        return None, ""  # a project uv.toml: read when uv runs in that directory
    if tool == "conda":
        name = path.rsplit("/", 1)[-1]
        reads = {
            "/etc/conda/.condarc",
            "/etc/conda/condarc",
            "/var/lib/conda/.condarc",
            "/var/lib/conda/condarc",
            f"{xdg_home}/conda/.condarc",
            f"{xdg_home}/conda/condarc",
            f"{home}/.config/conda/.condarc",
            f"{home}/.conda/.condarc",
            f"{home}/.conda/condarc",
            f"{home}/.condarc",
        }
        if env.get("CONDARC"):
            reads.add(env["CONDARC"])
        if path in reads or path.startswith("/etc/conda/condarc.d/"):
            return True, ""
        roots = list(CONDA_ROOTS) + prefixes + ([env["CONDA_ROOT"]] if env.get("CONDA_ROOT") else [])
        if directory in roots or exists(f"{directory}/bin/conda") or exists(f"{directory}/condabin/conda"):
            return True, ""
        instead = (
            "/etc/conda/.condarc"
            if path.startswith("/etc/")
            else f"{home}/.condarc"
            if path.startswith(home + "/")
            else f"{home}/.condarc or <conda root>/.condarc"
        )
        del name
        return False, instead
    return None, ""
