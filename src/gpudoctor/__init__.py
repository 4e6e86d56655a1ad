"""gpudoctor: diagnose and repair GPU deep-learning machines, containers and notebooks.

The package is laid out as facts -> checks -> findings -> render, with fixes
planned as data and written only by :mod:`gpudoctor.apply`. See ``docs/``.
"""

__version__ = "0.2.0"
