"""`memstore demo`: a realistic example built in the database."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from memstore.cli._common import (
    TenantOption,
    app,
    friendly_errors,
    open_store,
    out,
)
from memstore.errors import OutputFileError


@app.command()
@friendly_errors
def demo(
    ctx: typer.Context,
    workdir: Annotated[
        Path, typer.Option(help="Where to write the demo's legacy JSONL files and export.")
    ] = Path("memstore-demo"),
    tenant: TenantOption = None,
) -> None:
    """Build a realistic example in the database (API sessions with branches and tool calls,
    legacy JSONL files imported) and show a tree, a search, a SQL query and an export."""
    from memstore.demo import run_demo

    try:
        workdir.mkdir(parents=True, exist_ok=True)  # before anything is written
    except OSError as exc:
        raise OutputFileError(f"--workdir {workdir}: {exc.strerror or exc}") from exc
    with open_store(ctx, tenant=tenant) as store:
        run_demo(store, out, workdir)
