"""Package-index mirrors: the catalogue and the concurrent latency prober.

- :mod:`gpudoctor.mirrors.catalogue`: built-in ``data/mirrors.toml`` plus a user file.
- :mod:`gpudoctor.mirrors.probe`: times every candidate at once (httpx, threads).

Reading and editing each tool's own configuration (pip, uv, conda, apt, build files) lives
in :mod:`gpudoctor.sources`, one module per tool.
"""

#: Overall budget of one probe run, seconds (issue 5: default 5 s).
DEFAULT_BUDGET_S = 5.0
#: Per-request timeout (connect, read, write), seconds.
DEFAULT_TIMEOUT_S = 3.0
