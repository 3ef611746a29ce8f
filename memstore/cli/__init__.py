"""The `memstore` command line: a thin skin over the library.

Each command opens the store, makes one library call and renders the result; a memstore error
becomes one clear line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import io
import sys

from memstore.cli._common import app

# Each module registers its commands on `app` as it is imported: this order is `--help`'s.
# isort: off
from memstore.cli import db, retention, erasure, files, sessions, tenants  # noqa: F401
from memstore.cli import compact, demo  # noqa: F401
# isort: on

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the `memstore` console script."""
    # A turn may hold lone surrogates (JavaScript strings can): write them as `\udXXX` escapes,
    # which is also how JSON spells them, rather than fail half-way through the output.
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    app()
