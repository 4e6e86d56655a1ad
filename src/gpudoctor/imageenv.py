"""The world of an image root (``--root DIR``): its own home and environment, not the caller's.

Under ``--root``, user-scope files (``~/.config/pip/pip.conf``,
``~/.config/uv/uv.toml``, ``~/.condarc``, Jupyter's user data dir) are the
image user's, and the variables that steer pip, uv, conda and Jupyter are the
image's (its ``ENV``), never those of the shell that runs gpudoctor. Sources,
in order:

- ``--dockerfile FILE``: its ``ENV`` values (``ENV PIP_INDEX_URL=...``) and
  ``USER`` (the last one of the file);
- the home of that user in the image's ``/etc/passwd`` (``root`` -> ``/root``
  unless the image says otherwise), or ``ENV HOME``;
- defaults: user ``root``, home ``/root``, ``PATH`` as Docker sets it
  (``/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin``).
"""

from __future__ import annotations

import re

from gpudoctor.system import Files

DOCKER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _passwd_home(files: Files, user: str) -> str | None:
    text = files.read_text_or_none("/etc/passwd") or ""
    for line in text.splitlines():
        parts = line.split(":")
        if len(parts) >= 6 and (parts[0] == user or (user.isdigit() and parts[2] == user)):
            return parts[5] or None
    return None


def image_environment(files: Files, dockerfile: tuple[str, str] | None = None) -> tuple[dict[str, str], str]:
    """(environment, home) of the image at ``files``' root, from its Dockerfile ENV/USER and /etc/passwd."""
    env: dict[str, str] = {"PATH": DOCKER_PATH}
    user = "root"
    if dockerfile:
        from gpudoctor.sources.dockerfile import commands, instructions

        name, text = dockerfile
        parsed = commands(name, text)
        env.update({k: parsed.env[k] for k in parsed.env_set if k in parsed.env})
        for ins in instructions(text):
            if ins.keyword == "USER" and ins.args:
                user = re.split(r"[:\s]", ins.args.strip(), maxsplit=1)[0]
    home = env.get("HOME") or _passwd_home(files, user) or ("/root" if user in ("root", "0") else f"/home/{user}")
    env.setdefault("HOME", home)
    return env, home
