"""Secret redaction applied to every output format and to facts snapshots.

Two rules, from DESIGN.md "Secrets never reach output":

- userinfo in URLs: ``https://user:pass@host/`` -> ``https://****@host/``
  (the ``****`` keeps the fact that credentials were there, so checks that
  warn about credentials in index URLs still work on a replayed snapshot);
- values of variables or keys whose name contains TOKEN, SECRET, PASSWORD,
  PASSWD, CREDENTIAL, AUTHORIZATION or KEY (``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``) -> ``****``;
- ``Bearer <token>`` and ``Authorization: Basic <credentials>`` in free text -> ``Bearer ****``.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

__all__ = ["REDACTED", "redact_text", "is_secret_name", "redact_value", "redact_env"]

REDACTED = "****"

_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@\s'\"]+)@")
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTHORIZATION|(?:^|_)KEY(?:$|_)|APIKEY|API_KEY",
                          re.I)
# HTTP credentials in free text (RFC 6750 bearer tokens, RFC 7617 basic credentials)
# ("Basic" alone is an ordinary word, e.g. cuBLAS = Basic Linear Algebra, so only after "Authorization:")
_AUTH_SCHEME = re.compile(r"(?P<scheme>\bBearer|\bAuthorization:\s*Basic)\s+(?P<cred>[A-Za-z0-9._~+/=-]{6,})")
# KEY=value or "KEY": "value" pairs inside free text (tracebacks, env dumps)
_INLINE_ASSIGN = re.compile(r"\b(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>[^\s'\"]+)")


def is_secret_name(name: str) -> bool:
    """True for variable/key names that hold secrets (``HF_TOKEN``, ``API_KEY``)."""
    return bool(_SECRET_NAME.search(name))


def redact_text(text: str) -> str:
    """Redact URL credentials and ``SECRET_NAME=value`` assignments in free text."""
    if not text:
        return text
    text = _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{REDACTED}@" if m.group("userinfo") != REDACTED else m.group(0), text)

    def _assign(m: re.Match) -> str:
        if is_secret_name(m.group("name")) and m.group("value") != REDACTED:
            return f"{m.group('name')}={REDACTED}"
        return m.group(0)

    text = _AUTH_SCHEME.sub(lambda m: m.group(0) if m.group("cred") == REDACTED else f"{m.group('scheme')} {REDACTED}",
                            text)
    return _INLINE_ASSIGN.sub(_assign, text)


def redact_value(value: Any, key: str | None = None) -> Any:
    """Redact a JSON-like value recursively; ``key`` is the name it is stored under."""
    if key is not None and is_secret_name(key) and isinstance(value, str) and value:
        return REDACTED
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {k: redact_value(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(v) for v in value]
    return value


def redact_env(env: Mapping[str, str]) -> dict:
    """Copy of an environment mapping with secret values replaced by ``****``."""
    return {k: (REDACTED if is_secret_name(k) and v else redact_text(v)) for k, v in env.items()}
