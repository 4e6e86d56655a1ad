"""Collector for the ``build`` domain: what a build file (``--dockerfile FILE``) does to package sources.

The file is read like a shell would (:mod:`gpudoctor.sources.dockerfile`)
and replayed on the inspected root's files
(:mod:`gpudoctor.sources.buildwrites`); every edit of a pip, uv or conda
configuration file is judged against the files that tool reads in the image
(the image's home and ENV: :mod:`gpudoctor.imageenv`). apt edits are judged by
``apt.sources`` from the ``apt`` facts.
"""

from __future__ import annotations

from dataclasses import replace

from gpudoctor.collect import CollectContext, Collector
from gpudoctor.facts import Unavailable
from gpudoctor.facts.mirrors import BuildFacts
from gpudoctor.sources.buildwrites import _prefixes_created, judge, replay
from gpudoctor.sources.dockerfile import commands


def collect_build(ctx: CollectContext) -> BuildFacts | Unavailable:
    dockerfile: tuple | None = ctx.options.extra.get("dockerfile")
    if not dockerfile:
        return Unavailable("no build file given (--dockerfile FILE)")
    name, text = dockerfile
    files = ctx.system.files
    parsed = commands(name, text)

    def listdir(d: str):
        try:
            return files.listdir(d) if files.is_dir(d) else []
        except OSError:
            return []

    edits, _ = replay(parsed, files.read_text_or_none, listdir)
    env = {**dict(ctx.system.env), **{k: parsed.env[k] for k in parsed.env_set if k in parsed.env}}
    created = _prefixes_created(parsed)
    judged = []
    for e in edits:
        if e.tool in ("pip", "uv", "conda"):
            read, instead = judge(e, env, ctx.system.home, files.exists, created)
            e = replace(e, read=read, reads_instead=instead)
        judged.append(e)
    return BuildFacts(
        file=name,
        edits=tuple(judged),
        env={k: parsed.env[k] for k in parsed.env_set if k in parsed.env},
        home=ctx.system.home,
        notes=parsed.notes,
    )


COLLECTOR = Collector(domain="build", collect=collect_build, timeout_s=10.0)
