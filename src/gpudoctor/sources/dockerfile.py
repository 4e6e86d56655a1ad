"""Read a Dockerfile (or a shell script) the way the builder and ``/bin/sh`` would, down to simple commands.

Dockerfile level (Dockerfile reference, "Format", "Parser directives",
"Here-Documents", ``ARG``/``ENV``/``SHELL``/``RUN``/``COPY``):

- the ``# escape=`` parser directive, comment lines (also inside a
  continued instruction), line continuations with the escape character;
- here-documents after ``RUN`` and ``COPY``/``ADD`` (``<<EOF``, ``<<-EOF``,
  quoted tags), several per instruction;
- ``ARG name=default`` and ``ENV`` values, substituted the way the shell of a
  ``RUN`` sees them (they are in its environment);
- ``SHELL [...]``: a POSIX shell (sh, bash, dash, ash, ksh, zsh) is parsed,
  any other (PowerShell, cmd) is recorded as not parsed;
- ``RUN`` in shell form, exec form (``["sh", "-c", "..."]`` or a plain argv)
  and here-document form.

Shell level: words are split by the standard library's :class:`shlex.shlex`
in POSIX mode with ``punctuation_chars`` (so ``&&``, ``||``, ``;``, ``|``
and redirections are operators, and a quoted ``;`` inside a ``sed`` script
stays in its word). Before lexing, parameters are expanded with the known
ARG/ENV values outside single quotes (``$V``, ``${V}``, ``${V:-default}``,
``${V-default}``); unknown ones are left as written. ``if/then/elif/else/fi``,
``while/until/do/done``, ``{ }`` and ``( )`` are walked through (every branch
counts: a build may take any of them); ``for NAME in WORDS; do ... done``
runs its body once per word; ``sh -c '...'``/``bash -c`` scripts are read
recursively. Here-documents inside scripts become the command's stdin.

The result is a flat list of :class:`ShellCommand` in build order; what they
do to package-source files is judged in :mod:`gpudoctor.sources.buildwrites`.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import field

from gpudoctor.records import frozen_dataclass

__all__ = ["POSIX_SHELLS", "Instruction", "ShellCommand", "commands", "instructions", "script_commands"]

POSIX_SHELLS = ("sh", "bash", "dash", "ash", "ksh", "mksh", "zsh", "busybox")
_OPERATORS = {";", "&&", "||", "|", "&", ";;", "(", ")", "|&", "\n"}
_REDIRECTS = {">", ">>", "<", ">|", "&>", "&>>", ">&", "<&", "<>", "<<<"}
_RESERVED = {"if", "then", "elif", "else", "fi", "do", "done", "while", "until", "!", "{", "}", "case", "esac"}
_HEREDOC_TOKEN = "__GPUDOCTOR_HEREDOC_{}__"
_HEREDOC_OP = re.compile(r"<<(-?)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2")


@frozen_dataclass
class Instruction:
    """One Dockerfile instruction.

    Attributes:
        keyword: upper-case instruction (``RUN``, ``COPY``, ``ARG``...).
        args: the text after the keyword, continuations joined (one line).
        line: 1-based line where it starts.
        heredocs: bodies of its here-documents, in order.
    """

    keyword: str
    args: str
    line: int
    heredocs: tuple[str, ...] = ()


@frozen_dataclass
class ShellCommand:
    """One simple command as the shell would run it.

    Attributes:
        origin: ``<file>:<line>`` of the instruction it belongs to.
        argv: words after expansion and quote removal.
        redirects: ``(operator, target)`` pairs (``('>', '/etc/pip.conf')``).
        stdin: text fed to it (a here-document, or what ``echo``/``printf``
            before it in a pipeline print), or None when unknown/none.
        shell: the shell that runs it (``/bin/sh``), or ``""`` for exec-form RUN.
        env: the ARG/ENV values in effect (name -> value).
    """

    origin: str
    argv: tuple[str, ...]
    redirects: tuple[tuple[str, str], ...] = ()
    stdin: str | None = None
    shell: str = "/bin/sh"
    env: dict[str, str] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The command on one line, re-quoted."""
        words = " ".join(shlex.quote(a) for a in self.argv)
        redirs = "".join(f" {op} {shlex.quote(t)}" for op, t in self.redirects)
        return words + redirs

    @property
    def name(self) -> str:
        """Base name of the program (``sed`` for ``/usr/bin/sed``)."""
        return self.argv[0].rsplit("/", 1)[-1] if self.argv else ""


# --------------------------------------------------------------------------- Dockerfile


def instructions(text: str) -> list[Instruction]:
    """Instructions of a Dockerfile, with continuations joined and here-documents attached."""
    lines = text.splitlines()
    escape = "\\"
    i = 0
    # parser directives: leading '# key=value' lines
    while i < len(lines):
        m = re.match(r"^\s*#\s*([a-zA-Z]+)\s*=\s*(\S+)\s*$", lines[i])
        if not m:
            break
        if m.group(1).lower() == "escape" and m.group(2) in ("\\", "`"):
            escape = m.group(2)
        i += 1
    out: list[Instruction] = []
    while i < len(lines):
        raw = lines[i]
        if not raw.strip() or raw.lstrip().startswith("#"):
            i += 1
            continue
        start = i + 1
        buf = ""
        while i < len(lines):
            line = lines[i]
            i += 1
            if buf and line.lstrip().startswith("#"):
                continue  # comment lines inside a continued instruction are dropped
            stripped = line.rstrip()
            if stripped.endswith(escape) and not stripped.endswith(escape * 2):
                buf += stripped[:-1]
                continue
            buf += line
            break
        keyword, _, args = buf.strip().partition(" ")
        keyword = keyword.upper()
        bodies: list[str] = []
        if keyword in ("RUN", "COPY", "ADD"):
            for m in _HEREDOC_OP.finditer(args):
                strip_tabs, tag = m.group(1) == "-", m.group(3)
                body: list[str] = []
                while i < len(lines):
                    line = lines[i]
                    i += 1
                    check = line.lstrip("\t") if strip_tabs else line
                    if check.rstrip() == tag:
                        break
                    body.append(check)
                bodies.append("\n".join(body) + ("\n" if body else ""))
        out.append(Instruction(keyword, args.strip(), start, tuple(bodies)))
    return out


def _expand(text: str, env: dict[str, str]) -> str:
    """``$V``/``${V}``/``${V:-d}``/``${V-d}`` replaced outside single quotes; unknown names kept."""
    out: list[str] = []
    i, quote = 0, ""
    while i < len(text):
        c = text[i]
        if quote == "'":
            out.append(c)
            if c == "'":
                quote = ""
            i += 1
            continue
        if c == "\\" and i + 1 < len(text):
            out.append(text[i : i + 2])
            i += 2
            continue
        if c == "'" and not quote:
            quote = "'"
            out.append(c)
            i += 1
            continue
        if c == '"':
            quote = "" if quote == '"' else '"'
            out.append(c)
            i += 1
            continue
        if c == "$":
            m = re.match(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)", text[i:])
            if m:
                name = m.group(1) or m.group(4)
                if name in env and (m.group(2) != ":-" or env[name]):
                    out.append(env[name])
                elif m.group(2):
                    out.append(_expand(m.group(3), env))
                else:
                    out.append(m.group(0))
                i += m.end()
                continue
        out.append(c)
        i += 1
    return "".join(out)


def _prepare(script: str, env: dict[str, str]) -> tuple[str, dict[str, str]]:
    """Script text ready for shlex: here-documents cut out (placeholders), continuations joined,
    unquoted newlines made ``;`` and comments dropped, parameters expanded."""
    heredocs: dict[str, str] = {}
    lines = script.split("\n")
    kept: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        pending = list(_HEREDOC_OP.finditer(line))
        if pending and "'" not in line[: pending[0].start()].replace("\\'", ""):
            for m in reversed(pending):
                body: list[str] = []
                while i < len(lines):
                    nxt = lines[i]
                    i += 1
                    check = nxt.lstrip("\t") if m.group(1) == "-" else nxt
                    if check.rstrip() == m.group(3):
                        break
                    body.append(check)
                key = _HEREDOC_TOKEN.format(len(heredocs))
                text = "\n".join(body) + ("\n" if body else "")
                heredocs[key] = text if m.group(2) else _expand(text, env)
                line = line[: m.start()] + f"< {key}" + line[m.end() :]
        kept.append(line)
    text = "\n".join(kept)
    # line continuations, comments and newlines, respecting quotes
    out: list[str] = []
    i, quote, word_start = 0, "", True
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\" and quote == '"' and i + 1 < len(text):
                if text[i + 1] == "\n":
                    i += 2
                    continue
                out.append(text[i : i + 2])
                i += 2
                continue
            out.append(c)
            if c == quote:
                quote = ""
            i += 1
            continue
        if c == "\\" and i + 1 < len(text):
            if text[i + 1] == "\n":
                i += 2
                continue
            out.append(text[i : i + 2])
            i += 2
            word_start = False
            continue
        if c in "'\"":
            quote = c
        elif c == "#" and word_start:
            while i < len(text) and text[i] != "\n":
                i += 1
            continue
        elif c == "\n":
            out.append(" ; ")
            i += 1
            word_start = True
            continue
        out.append(c)
        word_start = c in " \t;&|()"
        i += 1
    return _expand("".join(out), env), heredocs


def _lex(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    return list(lexer)


def _substitute(word: str, var: str, value: str) -> str:
    return word.replace("${" + var + "}", value).replace("$" + var, value)


def script_commands(
    script: str, origin: str, env: dict[str, str], shell: str = "/bin/sh", depth: int = 0
) -> list[ShellCommand]:
    """Simple commands of a POSIX shell script (see the module docstring).

    Raises ValueError (from shlex) for unbalanced quotes.
    """
    prepared, heredocs = _prepare(script, env)
    tokens = _lex(prepared)
    # group into simple commands, with separators
    simple: list[list[str]] = []
    seps: list[str] = []
    cur: list[str] = []
    for tok in tokens:
        if tok in _OPERATORS or (set(tok) <= set(";&|()") and tok not in _REDIRECTS):
            simple.append(cur)
            seps.append(tok)
            cur = []
        else:
            cur.append(tok)
    simple.append(cur)
    seps.append(";")
    out: list[ShellCommand] = []
    loops: list[tuple[str, list[str]]] = []
    pipe_text: str | None = None
    for words, sep in zip(simple, seps):
        # reserved words at the start of a command
        while words and words[0] in _RESERVED:
            if words[0] == "done" and loops:
                loops.pop()
            words = words[1:]
        if words and words[0] == "for" and len(words) >= 2:
            var = words[1]
            values = words[3:] if len(words) > 2 and words[2] == "in" else []
            loops.append((var, values))
            pipe_text = None
            continue
        if not words:
            pipe_text = None if sep != "|" else pipe_text
            continue
        argv: list[str] = []
        redirects: list[tuple[str, str]] = []
        stdin: str | None = pipe_text
        k = 0
        while k < len(words):
            w = words[k]
            if w in _REDIRECTS:
                target = words[k + 1] if k + 1 < len(words) else ""
                if w == "<" and target in heredocs:
                    stdin = heredocs[target]
                else:
                    if argv and argv[-1].isdigit() and w in (">", ">>", ">&", "<"):
                        argv.pop()
                    redirects.append((w, target))
                k += 2
                continue
            argv.append(w)
            k += 1
        variants: list[tuple[list[str], list[tuple[str, str]]]] = [(argv, redirects)]
        for var, values in loops:
            expanded = []
            for a, r in variants:
                uses = any(("$" + var) in x for x in a) or any(("$" + var) in t for _, t in r)
                if not uses or not values:
                    expanded.append((a, r))
                    continue
                for value in values:
                    expanded.append(
                        ([_substitute(x, var, value) for x in a], [(op, _substitute(t, var, value)) for op, t in r])
                    )
            variants = expanded
        for a, r in variants:
            # leading NAME=value assignments
            while a and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", a[0]):
                a = a[1:]
            if not a:
                continue
            cmd = ShellCommand(origin, tuple(a), tuple(r), stdin, shell, dict(env))
            base = cmd.name
            if base in POSIX_SHELLS and depth < 4:
                flag = next((j for j, x in enumerate(a[1:], 1) if x.startswith("-") and "c" in x[1:]), None)
                if flag is not None and flag + 1 < len(a):
                    try:
                        out.extend(script_commands(a[flag + 1], origin, env, shell, depth + 1))
                        continue
                    except ValueError:
                        pass
            if base == "sudo" and len(a) > 1:
                cmd = ShellCommand(
                    origin,
                    tuple(x for x in a[1:] if not x.startswith("-")) or tuple(a[1:]),
                    tuple(r),
                    stdin,
                    shell,
                    dict(env),
                )
            out.append(cmd)
        # what this command prints, for the next one in a pipeline
        pipe_text = None
        if sep == "|" and argv and argv[0] in ("echo", "printf"):
            pipe_text = _printed(argv)
    return out


def _printed(argv: Sequence[str]) -> str | None:
    """What ``echo``/``printf`` with literal arguments print (escapes of ``echo -e``/printf applied)."""
    args = list(argv[1:])
    if argv[0] == "printf":
        if not args:
            return None
        fmt = args[0]
        rest = args[1:]
        try:
            text = fmt.replace("%s", "{}").format(*rest) if rest and fmt.count("%s") == len(rest) else fmt
        except (IndexError, KeyError, ValueError):
            text = fmt
        return _escapes(text)
    interpret = False
    newline = True
    while args and re.match(r"^-[neE]+$", args[0]):
        interpret = interpret or "e" in args[0]
        newline = newline and "n" not in args[0]
        args = args[1:]
    text = " ".join(args)
    # dash's echo (Debian/Ubuntu /bin/sh) always interprets escapes
    text = _escapes(text) if interpret or "\\n" in text else text
    return text + ("\n" if newline else "")


def _escapes(text: str) -> str:
    return text.replace("\\n", "\n").replace("\\t", "\t")


def printed_text(cmd: ShellCommand) -> str | None:
    """What an ``echo``/``printf`` command prints, or None for other commands."""
    if cmd.name in ("echo", "printf"):
        return _printed((cmd.name,) + tuple(cmd.argv[1:]))
    return None


# --------------------------------------------------------------------------- whole files


@frozen_dataclass
class Parsed:
    """A parsed Dockerfile or script.

    Attributes:
        commands: every simple command in build order (RUN lines), plus
            ``COPY``/``ADD`` as pseudo-commands ``("COPY", src..., dest)``
            with a here-document body as ``stdin``.
        env: final ARG/ENV values (name -> value).
        env_set: names set with ``ENV`` (they persist into the image).
        notes: what could not be read (``Dockerfile:12: SHELL ["pwsh" ...] not parsed``).
    """

    commands: tuple[ShellCommand, ...]
    env: dict[str, str]
    env_set: tuple[str, ...]
    notes: tuple[str, ...]


def _assignments(args: str, env: dict[str, str], env_form: bool) -> dict[str, str]:
    try:
        words = shlex.split(_expand(args, env))
    except ValueError:
        return {}
    if env_form and words and "=" not in words[0] and len(words) >= 2:
        return {words[0]: " ".join(words[1:])}
    out = {}
    for w in words:
        name, eq, value = w.partition("=")
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
            if eq:
                out[name] = value
            elif not env_form:
                out.setdefault(name, env.get(name, ""))
    return out


def is_dockerfile(text: str) -> bool:
    """True when ``text`` looks like a Dockerfile (has a FROM or RUN instruction), not a shell script."""
    return any(re.match(r"^\s*(FROM|RUN)\s", line, re.IGNORECASE) for line in text.splitlines())


def commands(name: str, text: str, build_args: dict[str, str] | None = None) -> Parsed:
    """Every command of Dockerfile (or shell script) ``text``; ``name`` labels origins."""
    if not is_dockerfile(text):
        try:
            cmds = script_commands(text, f"{name}:1", dict(build_args or {}))
        except ValueError as exc:
            return Parsed((), dict(build_args or {}), (), (f"{name}: not readable as a shell script ({exc})",))
        return Parsed(tuple(cmds), dict(build_args or {}), (), ())
    env: dict[str, str] = {}
    declared_args: dict[str, str] = {}
    env_set: list[str] = []
    shell = ["/bin/sh", "-c"]
    out: list[ShellCommand] = []
    notes: list[str] = []
    for ins in instructions(text):
        origin = f"{name}:{ins.line}"
        if ins.keyword == "ARG":
            values = _assignments(ins.args, env, env_form=False)
            for k, v in values.items():
                declared_args[k] = v
                if k not in env or k not in env_set:
                    env[k] = (build_args or {}).get(k, v)
        elif ins.keyword == "ENV":
            for k, v in _assignments(ins.args, env, env_form=True).items():
                env[k] = v
                if k not in env_set:
                    env_set.append(k)
        elif ins.keyword == "SHELL":
            try:
                value = json.loads(ins.args)
                if isinstance(value, list) and value and all(isinstance(x, str) for x in value):
                    shell = value
            except ValueError:
                notes.append(f"{origin}: SHELL needs the JSON form; ignored")
        elif ins.keyword == "RUN":
            args = re.sub(r"^(--[a-z-]+(=\S*)?\s+)+", "", ins.args)
            if args.startswith("["):
                try:
                    argv = json.loads(args)
                except ValueError:
                    argv = None
                if isinstance(argv, list) and all(isinstance(x, str) for x in argv):
                    base = argv[0].rsplit("/", 1)[-1] if argv else ""
                    if base in POSIX_SHELLS and "-c" in argv[1:-1]:
                        script = argv[argv.index("-c") + 1]
                        try:
                            out.extend(script_commands(script, origin, env, argv[0]))
                        except ValueError as exc:
                            notes.append(f"{origin}: not readable as a shell command ({exc})")
                    elif argv:
                        out.append(ShellCommand(origin, tuple(argv), (), None, "", dict(env)))
                    continue
            base = shell[0].rsplit("/", 1)[-1] if shell else ""
            if base not in POSIX_SHELLS:
                notes.append(f"{origin}: RUN under SHELL {json.dumps(shell)} (not a POSIX shell) is not read")
                continue
            script = args
            bodies = list(ins.heredocs)
            if bodies:
                first = _HEREDOC_OP.match(args.strip())
                if first and not args.strip()[first.end() :].strip():
                    script = bodies[0]  # RUN <<EOF: the body is the script
                else:
                    rebuilt = args
                    for body, m in zip(bodies, _HEREDOC_OP.finditer(args)):
                        rebuilt += "\n" + body + m.group(3)
                    script = rebuilt
            try:
                out.extend(script_commands(script, origin, env, shell[0]))
            except ValueError as exc:
                notes.append(f"{origin}: not readable as a shell command ({exc})")
        elif ins.keyword in ("COPY", "ADD"):
            args = re.sub(r"^(--[a-z-]+(=\S*)?\s+)+", "", ins.args)
            try:
                words = json.loads(args) if args.startswith("[") else shlex.split(_expand(args, env))
            except ValueError:
                continue
            heredoc = ins.heredocs[0] if ins.heredocs else None
            words = [w for w in words if not _HEREDOC_OP.fullmatch(w)] if heredoc is not None else words
            if len(words) < (1 if heredoc is not None else 2):
                continue
            out.append(ShellCommand(origin, (ins.keyword, *words), (), heredoc, "", dict(env)))
        elif ins.keyword == "FROM":
            env = {k: v for k, v in env.items() if k in env_set}
    return Parsed(tuple(out), env, tuple(env_set), tuple(notes))
