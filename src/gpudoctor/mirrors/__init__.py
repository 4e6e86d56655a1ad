"""Package-index mirrors: the catalogue, the concurrent latency prober, and apt source files.

- :mod:`gpudoctor.mirrors.catalogue`: built-in ``data/mirrors.toml`` plus a user file.
- :mod:`gpudoctor.mirrors.probe`: times every candidate at once (httpx, threads).
- :mod:`gpudoctor.sources.aptsources` (moved; re-exported here): parse and edit one-line and deb822 apt sources.
"""

#: Overall budget of one probe run, seconds (issue 5: default 5 s).
DEFAULT_BUDGET_S = 5.0
#: Per-request timeout (connect, read, write), seconds.
DEFAULT_TIMEOUT_S = 3.0
