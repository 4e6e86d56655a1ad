"""``python -m gpudoctor.schemas``: regenerate the published schema files."""

from pathlib import Path

from gpudoctor.schemas import write_schemas

write_schemas(Path(__file__).parent)
