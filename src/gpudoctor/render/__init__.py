"""Output formats. The core never prints; each format is its own small module.

- :mod:`console`: rich on a terminal, plain text when piped or NO_COLOR is set
- :mod:`json`: the versioned report document (``report.schema.json``)
- :mod:`markdown`: paste-ready for a bug tracker
- :mod:`prometheus`: node_exporter textfile metrics (issue 14)
"""

from __future__ import annotations

from collections.abc import Callable

from gpudoctor.engine import Report

__all__ = ["FORMATS", "render"]


def _json(report: Report, verbose: bool) -> str:
    from gpudoctor.render.json import render_json

    return render_json(report)


def _markdown(report: Report, verbose: bool) -> str:
    from gpudoctor.render.markdown import render_markdown

    return render_markdown(report, verbose)


def _prometheus(report: Report, verbose: bool) -> str:
    from gpudoctor.render.prometheus import render_prometheus

    return render_prometheus(report)


#: format name -> renderer returning text (the console format writes itself)
FORMATS: dict[str, Callable[[Report, bool], str]] = {"json": _json, "markdown": _markdown, "prometheus": _prometheus}


def render(report: Report, fmt: str, verbose: bool = False) -> str:
    """Render ``report`` as text in format ``fmt`` (``json`` or ``markdown``)."""
    return FORMATS[fmt](report, verbose)
