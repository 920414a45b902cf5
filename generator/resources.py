"""Where the package data (``schemas/``, ``templates/``) lives, in a wheel and in a source checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def resource_dir(name: str) -> Path:
    """Folder of package data ``name`` ("schemas" or "templates").

    A built wheel carries them inside the package (hatch ``force-include``); an editable install or a plain
    checkout reads them from the top-level folders the design card names.
    """
    inside = _PACKAGE_DIR / name
    if inside.is_dir():
        return inside
    top_level = _PACKAGE_DIR.parent / name
    if top_level.is_dir():
        return top_level
    raise FileNotFoundError(f"gen-repo package data folder {name!r} is missing (looked in {inside} and {top_level})")
