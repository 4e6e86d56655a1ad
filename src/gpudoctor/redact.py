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

__all__ = ["REDACTED", "is_secret_name", "is_secret_query_name", "redact_env", "redact_text", "redact_value"]

REDACTED = "****"

# scheme://userinfo@ (scheme bounded to 32 characters: linear time on long words) -- userinfo runs to the LAST "@" before the first "/", "?", "#" (greedy
# match then backtracking), never across whitespace, double quotes or angle brackets.
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]{0,31}://)(?P<userinfo>[^/?#\s\"<>]+)@")
# ?name=value or &name=value (a query parameter); the value ends at "&", "#", whitespace or quotes.
_QUERY_PARAM = re.compile(r"(?P<sep>[?&])(?P<name>[A-Za-z0-9_.-]+)=(?P<value>[^&#\s'\"<>`]*)")
# HTTP credentials in free text (RFC 6750 bearer tokens, RFC 7617 basic credentials)
# ("Basic" alone is an ordinary word, e.g. cuBLAS = Basic Linear Algebra, so only after "Authorization:")
_AUTH_SCHEME = re.compile(r"(?P<scheme>\bBearer|\bAuthorization:\s*Basic)\s+(?P<cred>[A-Za-z0-9._~+/=-]{6,})")
# NAME=value, NAME="value", NAME='value' inside free text (tracebacks, env dumps, shell lines);
# also ``--password=value`` options; not after "?"/"&" (query parameters have their own rule)
# nor inside a word or a dashed name (``X-Amz-Credential=`` is a query parameter's name).
_INLINE_ASSIGN = re.compile(
    r"(?<![\w?&-])(?P<name>-{0,2}[A-Za-z_][A-Za-z0-9_-]*)=(?P<value>\"(?:[^\"\\]|\\.)*\"|'[^']*'|[^\s'\"]+)")
# name = value lines of INI files (pip.conf, .npmrc), shown in evidence and snapshots: the value
# runs to the end of the line (blanks around "="; NAME=value without blanks is _INLINE_ASSIGN's)
_INI_LINE = re.compile(r"(?m)^(?P<lead>[ \t]*)(?P<name>[A-Za-z_][\w.-]*)(?P<sep>[ \t]+=[ \t]*|=[ \t]+)"
                       r"(?P<value>[^\n]*?)(?P<trail>[ \t]*)$")
# anaconda.org tokens in channel URLs: https://conda.anaconda.org/t/<token>/channel (bounded
# host and prefix so that redaction stays linear in the length of the text)
_CONDA_TOKEN = re.compile(r"(?P<pre>://[^\s\"'<>/]{1,255}(?:/[^\s\"'<>/]{1,64}){0,2}?/t/)(?P<token>[A-Za-z0-9_.-]+)(?=/|$|[\s\"'<>])")
# "NAME": "value" / 'NAME': 'value' (JSON or Python reprs printed in free text)
_QUOTED_PAIR = re.compile(
    r"(?P<q>[\"'])(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)(?P=q)(?P<sep>\s*:\s*)"
    r"(?P<value>\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')")

# Words (after splitting a name on "_", "-", "." and camelCase) that make a name secret
# wherever they appear: HF_TOKEN, AWS_SECRET_ACCESS_KEY, PIP_PASSWORD, GOOGLE_APPLICATION_CREDENTIALS.
_SECRET_WORDS = frozenset({
    "token", "secret", "password", "passwd", "passphrase", "credential", "credentials", "authorization",
    "apikey", "accesskey", "secretkey", "privatekey", "authtoken", "accesstoken", "clientsecret",
})
# Suffixes that make one run-together word secret (hftoken, dbpassword); "tokenizers" is not one.
_SECRET_SUFFIXES = ("token", "secret", "password", "passwd", "apikey")
# Query-parameter names that are secret on their own (on top of the words above).
_SECRET_QUERY_WORDS = frozenset({"auth", "key", "sig", "signature", "pass", "pwd", "session"})
_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")


def _words(name: str) -> list:
    return [w.lower() for w in _WORD_SPLIT.split(name) if w]


def is_secret_name(name: str) -> bool:
    """True for variable/key names that hold secrets.

    The name is split into words on ``_``, ``-``, ``.`` and camelCase. It is secret when a
    word is TOKEN, SECRET, PASSWORD, PASSWD, PASSPHRASE, CREDENTIAL(S), AUTHORIZATION or a
    run-together form (APIKEY, AUTHTOKEN, DBPASSWORD), or when the LAST of two or more words
    is KEY (``API_KEY``, ``SSH_KEY``, ``AWS_SECRET_ACCESS_KEY``, ``apiKey``). A bare ``key``,
    ``keys``, ``key_name``, ``KEYBOARD``, ``MONKEY_PATCH`` and ``TOKENIZERS_PARALLELISM``
    are not secret.
    """
    words = _words(name)
    if len(words) >= 2 and words[-1] == "key":
        return True
    return any(w in _SECRET_WORDS or w.endswith(_SECRET_SUFFIXES) for w in words)


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
    if not is_secret_name(m.group("name")) or value.strip("\"'") in ("", REDACTED):
        return m.group(0)
    return f"{m.group('lead')}{m.group('name')}{m.group('sep')}{_quote_like(value)}{m.group('trail')}"


def redact_text(text: str) -> str:
    """Redact URL credentials, secret query parameters, ``SECRET_NAME=value`` assignments and
    HTTP ``Bearer``/``Basic`` credentials in free text. Idempotent; text without secrets is
    returned unchanged."""
    if not text:
        return text
    text = _URL_USERINFO.sub(_userinfo, text)
    text = _QUERY_PARAM.sub(_query, text)
    text = _CONDA_TOKEN.sub(lambda m: f"{m.group('pre')}{REDACTED}", text)
    text = _AUTH_SCHEME.sub(lambda m: m.group(0) if m.group("cred") == REDACTED else f"{m.group('scheme')} {REDACTED}",
                            text)
    text = _QUOTED_PAIR.sub(_pair, text)
    text = _INI_LINE.sub(_ini, text)
    return _INLINE_ASSIGN.sub(_assign, text)


#: fields of a record that name a setting, and the fields holding that setting's value
#: (``{"key": "password", "value": "..."}``, the pip facts of ``PIP_PASSWORD``)
_NAME_FIELDS = ("key", "name", "var", "variable")
_VALUE_FIELDS = frozenset({"value", "values", "raw", "raw_value"})


def _names_a_secret(record: Mapping) -> bool:
    return any(isinstance(record.get(f), str) and "/" not in record[f] and is_secret_name(record[f])
               for f in _NAME_FIELDS)


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
            return {k: REDACTED if str(k) in _VALUE_FIELDS and isinstance(v, str) and v else redact_value(v, str(k))
                    for k, v in value.items()}
        return {k: redact_value(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(v) for v in value]
    return value


def redact_env(env: Mapping[str, str]) -> dict:
    """Copy of an environment mapping with secret values replaced by ``****``."""
    return {k: (REDACTED if is_secret_name(k) and v else redact_text(v)) for k, v in env.items()}
