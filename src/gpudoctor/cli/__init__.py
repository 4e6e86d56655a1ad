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

from gpudoctor.cli.common import cli, main

__all__ = ["COMMANDS", "LAZY_COMMANDS", "cli", "main"]

#: Every command: name -> where it is defined, in the order ``gpudoctor --help`` lists them.
#: Each module is imported only when its command runs (or ``--help`` lists them all).
LAZY_COMMANDS = {
    "check": "gpudoctor.cli.check:check",
    "facts": "gpudoctor.cli.facts:facts",
    "list": "gpudoctor.cli.listing:list_",
    "fix": "gpudoctor.cli.fix:fix",
    "gate": "gpudoctor.cli.gate:gate",
    "probe": "gpudoctor.cli.probe:probe",
    "mirrors": "gpudoctor.cli.mirrors:mirrors",
    "explain": "gpudoctor.cli.explain:explain",
    "report": "gpudoctor.cli.report:report",  # issue 14: report merge
    "diff": "gpudoctor.cli.diff:diff",  # issue 31: two snapshots or reports compared
}

for _name, _target in LAZY_COMMANDS.items():
    cli.add_lazy(_name, _target)


def __getattr__(name: str):
    """``COMMANDS``: every command object, in ``--help`` order (imports them all)."""
    if name == "COMMANDS":
        return tuple(cli.get_command(None, n) for n in LAZY_COMMANDS)  # type: ignore[arg-type]
    raise AttributeError(name)
