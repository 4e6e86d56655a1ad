"""``python -m gpudoctor``: the same as the ``gpudoctor`` console script."""

from gpudoctor.cli import main

if __name__ == "__main__":  # pragma: no cover - exercised through subprocess tests
    main()
