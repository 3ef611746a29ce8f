"""The scripts of memstore's earlier revisions, loaded as modules: a later revision builds on
their SQL, or puts it back on a downgrade."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from memstore.errors import MigrationError
from memstore.store.migrate import migrations_dir

__all__ = ["revision_module"]


def revision_module(revision: str) -> ModuleType:
    """The script of an earlier revision, loaded as a module: its SQL, for a later revision to
    build on or to put back (a revision's text never changes once released)."""
    (path,) = migrations_dir().joinpath("versions").glob(f"{revision}_*.py")
    spec = importlib.util.spec_from_file_location(f"memstore_revision_{revision}", path)
    if spec is None or spec.loader is None:  # pragma: no cover - a .py file always has one
        raise MigrationError(f"cannot load revision {revision} from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
