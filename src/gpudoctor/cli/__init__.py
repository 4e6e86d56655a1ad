"""Command-line interface (click): the ``gpudoctor`` console script (``gpudoctor.cli:main``).

Layout (docs/architecture.md):

- :mod:`gpudoctor.cli.common` — the click group :data:`cli`, exit codes, the
  helpers every command shares (``build_system``, ``usage``,
  ``check_pythons``, ``load_registry``, ``read_facts``, ``write_output``,
  ``common_collect_options``, ``make_collect_options``) and :func:`main`,
  which maps outcomes to exit codes. It imports no command module.
- one module per command: :mod:`~gpudoctor.cli.check`,
  :mod:`~gpudoctor.cli.facts`, :mod:`~gpudoctor.cli.listing` (``list``),
  :mod:`~gpudoctor.cli.fix`, :mod:`~gpudoctor.cli.gate`,
  :mod:`~gpudoctor.cli.probe` (``probe dataloader``),
  :mod:`~gpudoctor.cli.mirrors`, :mod:`~gpudoctor.cli.explain`. Each defines a plain click command and
  imports only from :mod:`gpudoctor.cli.common` (never from here).
- this module registers them on the group, in :data:`COMMANDS` order (the
  order ``gpudoctor --help`` lists them).
"""

from __future__ import annotations

from gpudoctor.cli import check, explain, facts, fix, gate, listing, mirrors, probe
from gpudoctor.cli.common import cli, main

__all__ = ["cli", "main", "COMMANDS"]

#: Every command, in the order ``gpudoctor --help`` lists them.
COMMANDS = (check.check, facts.facts, listing.list_, fix.fix, gate.gate, probe.probe, mirrors.mirrors,
            explain.explain)

for _command in COMMANDS:
    cli.add_command(_command)
