"""Secret redaction applied to every output format and to facts snapshots.

The rules, from DESIGN.md "Secrets never reach output":

- userinfo in URLs: ``https://user:pass@host/`` -> ``https://****@host/``. The userinfo is
  everything between ``scheme://`` and the LAST ``@`` before the first ``/``, ``?`` or ``#``
  of the authority (RFC 3986 section 3.2), so a raw ``@`` in a password
  (``https://alice:Summer@2024@host/``) is redacted too. The ``****`` keeps the fact that
  credentials were there, so checks that warn about credentials in index URLs still work on
  a replayed snapshot;
- values of URL query parameters whose names look like secrets (``?token=``, ``&auth=``,
  ``api_key``, ``X-Amz-Signature``, ``sig``...; see :func:`is_secret_query_name`):
  ``?api_key=abc&page=2`` -> ``?api_key=****&page=2`` (the parameter name stays);
- values of variables or keys whose name says secret (see :func:`is_secret_name`:
  ``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``, ``PIP_PASSWORD``, but not ``key``,
  ``TOKENIZERS_PARALLELISM``), in mappings and in free text as ``NAME=value``,
  ``NAME="value"`` or ``"NAME": "value"`` -> ``****``;
- ``Bearer <token>`` and ``Authorization: Basic <credentials>`` in free text -> ``Bearer ****``.

Every function is idempotent: redacting an already redacted text changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "REDACTED",
    "redact_text",
    "redact_file_text",
    "clean_text",
    "RedactingStream",
    "guard_streams",
    "MAX_LINE_CHARS",
    "is_secret_name",
    "is_secret_query_name",
    "redact_value",
    "redact_env",
]

REDACTED = "****"

# scheme://userinfo@ (scheme bounded to 32 characters: linear time on long words) -- userinfo runs to the LAST "@" before the first "/", "?", "#" (greedy
# match then backtracking), never across whitespace, double quotes or angle brackets.
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]{0,31}://)(?P<userinfo>[^/?#\s\"<>]+)@")
# ?name=value or &name=value (a query parameter); the value ends at "&", "#", whitespace or quotes.
# (a backslash before n, t, r, u, " or / ends it too: a JSON-escaped newline after a URL in a JSON line)
_QUERY_PARAM = re.compile(r"(?P<sep>[?&])(?P<name>[A-Za-z0-9_.-]+)=(?P<value>(?:[^&#\s'\"<>`\\]|\\(?![ntru\"/]))*)")
# HTTP credentials in free text (RFC 6750 bearer tokens, RFC 7617 basic credentials)
# ("Basic" alone is an ordinary word, e.g. cuBLAS = Basic Linear Algebra, so only after "Authorization:")
_AUTH_SCHEME = re.compile(r"(?P<scheme>\bBearer|\bAuthorization:\s*Basic)\s+(?P<cred>[A-Za-z0-9._~+/=-]{6,})")
# NAME=value, NAME="value", NAME='value' inside free text (tracebacks, env dumps, shell lines);
# also ``--password=value`` options; not after "?"/"&" (query parameters have their own rule)
# nor inside a word or a dashed name (``X-Amz-Credential=`` is a query parameter's name).
_INLINE_ASSIGN = re.compile(
    r"(?<![\w?&-])(?P<name>-{0,2}[A-Za-z_][A-Za-z0-9_-]*)=(?P<value>\"(?:[^\"\\]|\\.)*\"|'[^']*'|"
    r"(?:[^\s'\"\\]|\\(?![ntru\"/]))+)"
)
# name = value lines of INI files (pip.conf, .npmrc), shown in evidence and snapshots: the value
# runs to the end of the line (blanks around "="; NAME=value without blanks is _INLINE_ASSIGN's)
_INI_LINE = re.compile(
    r"(?m)^(?P<lead>[ \t]*(?:(?:[#;]+|//)[ \t]*)?(?:export[ \t]+)?)(?P<name>[A-Za-z_][\w.-]*)(?P<sep>[ \t]+=[ \t]*|=[ \t]+)"
    r"(?P<value>[^\n]*?)(?P<trail>[ \t]*)$"
)
# name: value lines of YAML files (.condarc), comments and list items included: ``  token: abc``,
# ``# password: x``, ``- api_key: y``; the value runs to the end of the line
_YAML_LINE = re.compile(
    r"(?m)^(?P<lead>[ \t]*(?:#+[ \t]*)?(?:-[ \t]+)?)(?P<name>[A-Za-z_][\w.-]*)(?P<sep>[ \t]*:[ \t]+)"
    r"(?P<value>[^\n]*?)(?P<trail>[ \t]*)$"
)
# netrc / apt auth.conf lines: ``machine h login u password p`` (comment or not)
_NETRC = re.compile(
    r"(?m)^(?P<lead>[ \t]*(?:#[ \t]*)?(?:machine[ \t]+\S+[ \t]+)?(?:login[ \t]+\S+[ \t]+)?)"
    r"(?P<kw>password|passwd)[ \t]+(?P<value>[^\s=:]\S*)"
)
# terminal control: CSI/OSC/other ESC sequences and C0/C1 controls other than tab and newline
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?"
    r"|\r(?!\n)|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x80-\x9f]"
)
#: one character any _ESCAPES match starts with: text without one is returned as it is
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _strip_escapes(text: str) -> str:
    """_ESCAPES removed; a single character-class scan first (text without control characters,
    nearly all of it, skips the alternation)."""
    return _ESCAPES.sub("", text) if _CONTROL.search(text) else text


#: longest line shown; longer ones are cut with a note (a minified file, a binary blob)
MAX_LINE_CHARS = 4000
_LONG_LINE = re.compile(rf"[^\n]{{{MAX_LINE_CHARS + 1},}}")
_CUT_NOTE = re.compile(r" \[\.\.\. \d+ more characters cut\]$")
# anaconda.org tokens in channel URLs: https://conda.anaconda.org/t/<token>/channel (bounded
# host and prefix so that redaction stays linear in the length of the text)
_CONDA_TOKEN = re.compile(
    r"(?P<pre>://[^\s\"'<>/]{1,255}(?:/[^\s\"'<>/]{1,64}){0,2}?/t/)(?P<token>[A-Za-z0-9_.-]+)(?=/|$|[\s\"'<>])"
)
# ``--password VALUE`` / ``-token VALUE``: a command-line option whose name is secret, then its
# value after blanks (``--name=value`` is _INLINE_ASSIGN's); a value starting with "-" is the next option
_FLAG_VALUE = re.compile(
    r"(?<![\w/.-])(?P<flag>--?[A-Za-z][A-Za-z0-9_-]{0,63})(?P<sp>[ \t]+)"
    r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s'\"-][^\s'\"]*)"
)
# Bare credentials with a well-known prefix, wherever they stand: GitHub (ghp_, gho_, ghu_, ghs_,
# ghr_, github_pat_), GitLab (glpat-), Hugging Face (hf_), OpenAI/Anthropic-style (sk-, sk-proj-,
# sk-ant-), Slack (xox?-), npm (npm_), Google API keys (AIza), AWS access key ids (AKIA/ASIA), JWTs
_BARE_TOKEN = re.compile(
    r"\b(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{20,255}|glpat-[A-Za-z0-9_-]{20,255}"
    r"|hf_[A-Za-z0-9]{30,255}|npm_[A-Za-z0-9]{36,255}|AIza[0-9A-Za-z_-]{35}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,255}|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|eyJ[A-Za-z0-9_-]{8,4096}\.eyJ[A-Za-z0-9_-]{8,4096}\.[A-Za-z0-9_-]{8,4096})\b"
    r"|(?<![\w-])sk-(?:proj-|ant-(?:api\d\d-)?)?[A-Za-z0-9_-]{20,255}"
)

#: literal starts of _BARE_TOKEN's credentials: the regex runs only on text holding one
_BARE_PREFIXES = (
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "hf_",
    "npm_",
    "AIza",
    "xox",
    "AKIA",
    "ASIA",
    "eyJ",
    "sk-",
)

# "NAME": "value" / 'NAME': 'value' (JSON or Python reprs printed in free text)
_QUOTED_PAIR = re.compile(
    r"(?P<q>[\"'])(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)(?P=q)(?P<sep>\s*:\s*)"
    r"(?P<value>\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')"
)

# A name is secret when one of its words (split on "_", "-", ".", camelCase and digits)
# CONTAINS one of these: HF_TOKEN2, NVIDIA_API_KEY_2, MYTOKEN, OAUTH_CLIENT, DBPASSWORD.
_SECRET_PARTS = ("token", "secret", "password", "passwd", "passphrase", "credential", "auth", "key")
# ...unless the word is one of these ordinary words (their values are settings, not secrets).
_BENIGN_WORDS = frozenset(
    {
        "tokenizer",
        "tokenizers",
        "tokenize",
        "tokenization",
        "keyboard",
        "keyboards",
        "keyword",
        "keywords",
        "monkey",
        "author",
        "authors",
        "authored",
        "authority",
        "authorities",
        "keyring",
        "keyrings",
    }
)
# ...or the name ends in a word that says the value only points at the secret (a path, a name).
_POINTER_WORDS = frozenset({"file", "path", "dir", "name", "names", "id", "type", "provider"})
# Query-parameter names that are secret on their own (on top of the words above).
_SECRET_QUERY_WORDS = frozenset({"auth", "key", "sig", "signature", "pass", "pwd", "session"})
_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Za-z])(?=[0-9])|(?<=[0-9])(?=[A-Za-z])")


def _words(name: str) -> list:
    return [w.lower() for w in _WORD_SPLIT.split(name) if w]


def is_secret_name(name: str) -> bool:
    """True for variable/key names that hold secrets.

    The name is split into words on ``_``, ``-``, ``.``, camelCase and digits. It is
    secret when a word *contains* TOKEN, SECRET, PASSWORD, PASSWD, PASSPHRASE,
    CREDENTIAL, AUTH or KEY, with any prefix or suffix (``HF_TOKEN2``,
    ``NVIDIA_API_KEY_2``, ``MYTOKEN``, ``OAUTH_CLIENT``, ``max_tokens``), except:

    - ordinary words that merely contain them (``TOKENIZERS_PARALLELISM``, ``KEYBOARD``,
      ``MONKEY_PATCH``, ``author``, ``PIP_KEYRING_PROVIDER``);
    - a bare ``key``/``keys`` (the field name of a setting record, not a secret);
    - names whose last word says the value only points at the secret: ``KEY_FILE``,
      ``SSH_KEY_PATH``, ``key_name``, ``HF_TOKEN_PATH`` (a path or a name is shown).
    """
    words = [w for w in _words(name) if not w.isdigit()]
    if not words or name.lower() in ("key", "keys"):
        return False
    if len(words) >= 2 and words[-1] in _POINTER_WORDS:
        return False
    return any(w not in _BENIGN_WORDS and any(p in w for p in _SECRET_PARTS) for w in words)


def is_secret_query_name(name: str) -> bool:
    """True for URL query-parameter names whose values are secrets (case-insensitive).

    Everything :func:`is_secret_name` accepts, plus names made only of the words auth, key,
    sig, signature, pass, pwd, session with optional ``x``/``amz``/``goog`` prefixes
    (``?auth=``, ``?key=``, ``?sig=``, ``X-Amz-Signature``, ``X-Goog-Credential``).
    """
    if is_secret_name(name):
        return True
    words = [w for w in _words(name) if w not in ("x", "amz", "goog", "api", "access", "private")]
    return bool(words) and any(w in _SECRET_QUERY_WORDS for w in words)


def _userinfo(m: re.Match) -> str:
    if m.group("userinfo") == REDACTED:
        return m.group(0)
    return f"{m.group('scheme')}{REDACTED}@"


def _query(m: re.Match) -> str:
    if not m.group("value") or not is_secret_query_name(m.group("name")):
        return m.group(0)
    return f"{m.group('sep')}{m.group('name')}={REDACTED}"


def _quote_like(value: str) -> str:
    """``****`` wearing the quotes ``value`` had (so ``X="s"`` -> ``X="****"``)."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return f"{value[0]}{REDACTED}{value[0]}"
    return REDACTED


def _assign(m: re.Match) -> str:
    value = m.group("value")
    if not is_secret_name(m.group("name")) or value.strip("\"'") in ("", REDACTED):
        return m.group(0)
    return f"{m.group('name')}={_quote_like(value)}"


def _pair(m: re.Match) -> str:
    value = m.group("value")
    if not is_secret_name(m.group("name")) or value[1:-1] in ("", REDACTED):
        return m.group(0)
    q = m.group("q")
    return f"{q}{m.group('name')}{q}{m.group('sep')}{_quote_like(value)}"


def _ini(m: re.Match) -> str:
    value = m.group("value")
    if not is_secret_name(m.group("name")) or value.strip("\"'") in ("", REDACTED) or REDACTED in value:
        return m.group(0)
    return f"{m.group('lead')}{m.group('name')}{m.group('sep')}{_quote_like(value)}{m.group('trail')}"


def _flag(m: re.Match) -> str:
    value = m.group("value").strip("'\"")
    # a number after an option is a count or a size (--max-tokens 512), not a credential
    if not is_secret_name(m.group("flag").lstrip("-")) or value == REDACTED or value.replace(".", "").isdigit():
        return m.group(0)
    return f"{m.group('flag')}{m.group('sp')}{_quote_like(m.group('value'))}"


#: lower-case pieces one of which every secret name holds (:func:`is_secret_name`: a word
#: CONTAINS one of _SECRET_PARTS; "passw" stands for password/passwd), and the extra words of
#: secret query-parameter names (:func:`is_secret_query_name`)
_NAME_HINTS = ("token", "secret", "passw", "passphrase", "credential", "auth", "key")
_QUERY_HINTS = (*_NAME_HINTS, "sig", "pass", "pwd", "session")


def _userinfo_sub(text: str) -> str:
    """_URL_USERINFO over ``text``, tried only where a ``://`` stands: the scheme is at most 32
    characters before it, so no regex scans the rest of a long line character by character
    (the plain ``sub`` costs ~0.7 s on a 1 MB line). Same matches as ``_URL_USERINFO.sub``."""
    out: list[str] = []
    done = 0  # text[:done] is in out
    at = text.find("://")
    while at >= 0:
        match = None
        for start in range(max(done, at - 32), at):
            match = _URL_USERINFO.match(text, start)
            if match:
                break
        if match is None:
            at = text.find("://", at + 3)
            continue
        out.append(text[done : match.start()])
        out.append(_userinfo(match))
        done = match.end()
        at = text.find("://", max(done, at + 3))
    if not out:
        return text
    out.append(text[done:])
    return "".join(out)


def _redact_secrets(text: str) -> str:
    """The secret rules alone (no control-character cleaning): what the output guard
    applies to a terminal stream, whose colours must survive.

    Each rule runs only when the text holds what every one of its matches must hold (a
    ``://`` and an ``@`` for URL credentials, a piece of a secret name for the name rules),
    so ordinary text, however long, costs a few substring searches and no regex scan."""
    if not text:
        return text
    if any(prefix in text for prefix in _BARE_PREFIXES):  # the alternation costs ~0.25 s per MB
        text = _BARE_TOKEN.sub(REDACTED, text)
    if "@" in text and "://" in text:
        text = _userinfo_sub(text)
    low = text.lower()
    if "=" in text and ("?" in text or "&" in text) and any(h in low for h in _QUERY_HINTS):
        text = _QUERY_PARAM.sub(_query, text)
    if "/t/" in text:
        text = _CONDA_TOKEN.sub(lambda m: f"{m.group('pre')}{REDACTED}", text)
    if "Bearer" in text or "Authorization:" in text:
        text = _AUTH_SCHEME.sub(
            lambda m: m.group(0) if m.group("cred") == REDACTED else f"{m.group('scheme')} {REDACTED}", text
        )
    if not any(h in low for h in _NAME_HINTS):
        return text  # every rule below redacts the value of a secret NAME
    if ":" in text:
        text = _QUOTED_PAIR.sub(_pair, text)
    if "=" in text:
        text = _INI_LINE.sub(_ini, text)
    if ":" in text:
        text = _YAML_LINE.sub(_ini, text)
    if "passw" in text:
        text = _NETRC.sub(
            lambda m: m.group(0) if m.group("value") == REDACTED else f"{m.group('lead')}{m.group('kw')} {REDACTED}",
            text,
        )
    if "-" in text:
        text = _FLAG_VALUE.sub(_flag, text)
    return _INLINE_ASSIGN.sub(_assign, text) if "=" in text else text


def _cut(m: re.Match) -> str:
    line = m.group(0)
    if _CUT_NOTE.search(line) and len(line) <= MAX_LINE_CHARS + 40:
        return line
    return f"{line[:MAX_LINE_CHARS]} [... {len(line) - MAX_LINE_CHARS} more characters cut]"


def clean_text(text: str) -> str:
    """Remove terminal escape sequences and control characters (tab and newline stay; a
    carriage return only before a newline) and cut lines longer than
    :data:`MAX_LINE_CHARS` with a note. Idempotent."""
    if not text:
        return text
    text = _strip_escapes(text)
    return _LONG_LINE.sub(_cut, text) if len(text) > MAX_LINE_CHARS else text


def redact_text(text: str) -> str:
    """THE redaction function for text at every exit: URL credentials, secret query
    parameters, ``SECRET_NAME=value`` / ``name = value`` / ``name: value`` assignments
    (comments included), netrc passwords and HTTP ``Bearer``/``Basic`` credentials become
    ``****``; terminal escape sequences from probed strings are removed and huge lines cut
    (:func:`clean_text`). Idempotent; ordinary text is returned unchanged."""
    if not text:
        return text
    return clean_text(_redact_secrets(text))


#: fields of a record that name a setting, and the fields holding that setting's value
#: (``{"key": "password", "value": "..."}``, the pip facts of ``PIP_PASSWORD``)
_NAME_FIELDS = ("key", "name", "var", "variable")
_VALUE_FIELDS = frozenset({"value", "values", "raw", "raw_value"})


def redact_file_text(text: str) -> str:
    """Redaction for a whole file gpudoctor writes (:mod:`gpudoctor.output`): the secret rules
    of :func:`redact_text` and the stream guard, and terminal escape sequences removed, but no
    line is cut (a JSON document's one long line must stay valid JSON). Idempotent."""
    if not text:
        return text
    return _strip_escapes(_redact_secrets(text))


def _names_a_secret(record: Mapping) -> bool:
    return any(
        isinstance(record.get(f), str) and "/" not in record[f] and is_secret_name(record[f]) for f in _NAME_FIELDS
    )


def redact_value(value: Any, key: str | None = None) -> Any:
    """Redact a JSON-like value recursively; ``key`` is the name it is stored under.

    Strings stored under a secret name (:func:`is_secret_name`) become ``****``, and so
    does the ``value`` of a record whose ``key``/``name`` field is a secret name
    (``{"key": "password", "value": "s3cr3t"}``); other strings go through
    :func:`redact_text`; mappings and lists are copied (tuples become lists), the input is
    never modified.
    """
    if key is not None and is_secret_name(key) and isinstance(value, str) and value:
        return REDACTED
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        if _names_a_secret(value):
            return {
                k: REDACTED if str(k) in _VALUE_FIELDS and isinstance(v, str) and v else redact_value(v, str(k))
                for k, v in value.items()
            }
        return {k: redact_value(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(v) for v in value]
    return value


def redact_env(env: Mapping[str, str]) -> dict:
    """Copy of an environment mapping with secret values replaced by ``****``."""
    return {k: (REDACTED if is_secret_name(k) and v else redact_text(v)) for k, v in env.items()}


class RedactingStream:
    """A text stream wrapper that passes every line written through the redaction
    function: the last guard at the process's exits (stdout, stderr), so text that
    bypassed a renderer (a traceback, a plug-in's print, a probe's error) is redacted too.

    Complete lines are redacted and written at once; a partial line is held until its
    newline or a ``flush()`` (a prompt). On a terminal only the secret rules apply
    (rich's own colours stay; renderers clean probed strings themselves); elsewhere
    terminal escapes are removed too. Lines are not cut here (renderers cut them in
    values, so a JSON document stays valid). Other attributes
    (``fileno``, ``isatty``, ``encoding``, ``buffer``) are the wrapped stream's.
    """

    def __init__(self, stream):
        self._stream = stream
        self._pending = ""
        enc = (getattr(stream, "encoding", None) or "utf-8").lower().replace("_", "-")
        self._encoding = None if enc in ("utf-8", "utf8", "utf-16", "utf-32") else enc
        try:
            self._tty = bool(stream.isatty())
        except Exception:
            self._tty = False

    @property
    def wrapped(self):
        """The stream underneath."""
        return self._stream

    def _scrub(self, text: str) -> str:
        # lines are never cut here: a JSON document's long string (a traceback) must stay valid
        text = _redact_secrets(text) if self._tty else _strip_escapes(_redact_secrets(text))
        return text if self._encoding is None else encodable(text, self._encoding)

    def write(self, text: str | bytes) -> int:
        if isinstance(text, (bytes, bytearray)):
            # click.echo(bytes) writes to the binary buffer, which this guard does not
            # expose: take the bytes as UTF-8 text so they pass the same redaction
            text = bytes(text).decode("utf-8", errors="replace")
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        data = self._pending + text
        cut = data.rfind("\n")
        if cut < 0:
            self._pending = data
            if len(self._pending) > 65536:  # no newline for a long while: write what we have
                self._stream.write(self._scrub(self._pending))
                self._pending = ""
            return len(text)
        self._pending = data[cut + 1 :]
        self._stream.write(self._scrub(data[: cut + 1]))
        return len(text)

    def flush(self) -> None:
        if self._pending:
            pending, self._pending = self._pending, ""
            self._stream.write(self._scrub(pending))
        self._stream.flush()

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    @property
    def encoding(self) -> str:
        """Always ``utf-8``: what cannot be written in the real encoding is replaced here, so
        writers (click, rich) need no workaround of their own -- click would otherwise write
        to ``.buffer`` behind this guard's back when the real encoding is ASCII."""
        return "utf-8"

    @property
    def errors(self) -> str:
        return "strict"

    def __getattr__(self, name: str):
        if name == "buffer":  # no side door around the redaction
            raise AttributeError("a RedactingStream has no binary buffer")
        return getattr(self._stream, name)


#: ASCII stand-ins for the symbols gpudoctor prints, for an output encoding without them
_ASCII = {
    "\u2713": "v",
    "\u2714": "v",
    "\u2717": "x",
    "\u2718": "x",
    "\u26a0": "!",
    "\u2192": "->",
    "\u2190": "<-",
    "\u2264": "<=",
    "\u2265": ">=",
    "\u2014": "--",
    "\u2013": "-",
    "\u2026": "...",
    "\u00d7": "x",
    "\u2022": "*",
    "\u00b7": ".",
    "\u2018": "'",
    "\u2019": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u2248": "~",
    "\u2260": "!=",
    "\u00a0": " ",
    "\u2500": "-",
    "\u2502": "|",
    "\u2139": "i",
    "\u00b5": "u",
}


def encodable(text: str, encoding: str) -> str:
    """``text`` that ``encoding`` can write: known symbols become ASCII stand-ins (``->``,
    ``<=``), anything else ``?``. Text the encoding can already write is returned as is."""
    try:
        text.encode(encoding)
        return text
    except (UnicodeEncodeError, LookupError):
        pass
    text = "".join(_ASCII.get(c, c) for c in text)
    try:
        return text.encode(encoding, errors="replace").decode(encoding, errors="replace")
    except LookupError:
        return text.encode("ascii", errors="replace").decode("ascii")


def guard_streams() -> None:
    """Wrap ``sys.stdout`` and ``sys.stderr`` in :class:`RedactingStream` (once)."""
    import sys

    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, RedactingStream):
            setattr(sys, name, RedactingStream(stream))
