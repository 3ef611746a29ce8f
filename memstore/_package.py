"""What memstore is as an installed distribution: its name on the package index and its extras."""

from __future__ import annotations

import re
import shlex
from importlib import metadata

DISTRIBUTION = "memstore-sql"
"""The distribution's name (`pip install memstore-sql`); the import name is `memstore`."""

_EXTRA_MARKER = re.compile(
    r"""^(?P<requirement>[^;]+);.*\bextra\s*==\s*["'](?P<extra>[^"']+)["']"""
)


def extra_requirements(extra: str) -> list[str]:
    """The requirements an extra adds, as the installed distribution's metadata lists them."""
    try:
        declared = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        return []
    found = []
    for line in declared:
        match = _EXTRA_MARKER.match(line)
        if match and match["extra"] == extra:
            found.append(match["requirement"].strip().replace(" ", ""))
    return found


def install_hint(extra: str) -> str:
    """A pip command adding an extra's packages, whether memstore came from a clone or a wheel."""
    packages = " ".join(shlex.quote(item) for item in extra_requirements(extra))
    direct = f"pip install {packages}" if packages else f"pip install '{DISTRIBUTION}[{extra}]'"
    return f"{direct} (the '{extra}' extra of {DISTRIBUTION})"
