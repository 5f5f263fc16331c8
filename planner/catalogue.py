"""The seed data file (planner/data/catalogue.toml): TOML, so every figure can carry a comment."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

CATALOGUE = Path(__file__).resolve().parent / "data" / "catalogue.toml"


def load_catalogue(path: Path = CATALOGUE) -> dict[str, list[dict[str, Any]]]:
    with path.open("rb") as handle:
        return tomllib.load(handle)
