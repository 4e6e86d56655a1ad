"""``gpudoctor watch`` puts this directory first on the job's ``PYTHONPATH``.

It sets up the DataLoader recorder (``_gpudoctor_watch``, next to this file), takes
this directory off ``sys.path`` again (the job sees the path it would have seen) and
runs the ``sitecustomize`` that would otherwise have been imported, if there is one.
Anything that goes wrong here is swallowed: the job runs as without ``watch``.
"""

import os
import sys


def _setup():
    here = os.path.dirname(os.path.abspath(__file__))
    run_dir = os.environ.get("GPUDOCTOR_WATCH_DIR")
    try:
        if run_dir and os.path.isdir(run_dir):
            import _gpudoctor_watch  # type: ignore[import-not-found]

            _gpudoctor_watch.install_import_hook(run_dir)
    except Exception:
        pass
    sys.path[:] = [p for p in sys.path if not (p and os.path.abspath(p) == here)]
    this = sys.modules.pop("sitecustomize", None)
    try:
        import importlib

        importlib.import_module("sitecustomize")  # the next one on the path (a venv's, a distro's)
    except ImportError as exc:
        if exc.name != "sitecustomize":
            raise
        if this is not None:
            sys.modules["sitecustomize"] = this


_setup()
del _setup
