from __future__ import annotations

import types
from pathlib import Path

import pytest

import memstore
from scripts import gen_docs

LAZY = {"AsyncSessionStore", "AsyncSessionHandle"}  # imported on first use: need the async extra
NOT_EXPORTED = {"Any", "TYPE_CHECKING"}


def test_exports_are_exactly_the_intended_names_sorted() -> None:
    public = {
        name
        for name in dir(memstore)
        if not name.startswith("_") and not isinstance(getattr(memstore, name), types.ModuleType)
    }
    assert set(memstore.__all__) == (public - NOT_EXPORTED) | LAZY | {"jsjson", "__version__"}
    assert memstore.__all__ == sorted(memstore.__all__, key=lambda n: (not n.isupper(), n))


def test_every_exported_name_resolves() -> None:
    for name in memstore.__all__:
        assert getattr(memstore, name) is not None, name


def test_every_error_derives_from_memstore_error() -> None:
    errors = [getattr(memstore, name) for name in memstore.__all__ if name.endswith("Error")]
    errors = [e for e in errors if isinstance(e, type) and issubclass(e, Exception)]
    assert len(errors) >= 10
    for error in errors:
        assert issubclass(error, memstore.MemstoreError), error


def test_every_error_class_is_exported_and_drawn_in_the_tree_under_its_parent() -> None:
    from memstore import errors

    drawn = _tree_parents(errors.__doc__ or "")
    for value in vars(errors).values():
        if isinstance(value, type) and issubclass(value, memstore.MemstoreError):
            assert value.__name__ in memstore.__all__, value
            if value is not memstore.MemstoreError:
                (parent,) = [b for b in value.__bases__ if issubclass(b, memstore.MemstoreError)]
                assert drawn.get(value.__name__) == parent.__name__, value


def _tree_parents(tree: str) -> dict[str, str]:
    """Each class drawn in a docstring tree (`├── Name  what it is`), and the class above it."""
    parents: dict[str, str] = {}
    path = ["MemstoreError"]
    for line in tree.splitlines():
        if "── " not in line:
            continue
        depth = line.index("── ") // 4
        name = line.split("── ")[1].split()[0]
        del path[depth + 1 :]
        parents[name] = path[depth]
        path.append(name)
    return parents


def test_include_object_is_alembics_filter_for_an_application() -> None:
    import inspect

    parameters = list(inspect.signature(memstore.include_object).parameters)
    assert parameters == ["object_", "name", "type_", "reflected", "compare_to"]
    assert "include_object" in memstore.__all__
    assert memstore.include_object(None, "nodes", "table", True, None) is False


def test_the_lazy_table_and_all_are_generated_from_the_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Public names are listed once, as imports in `memstore/__init__.py`; the generator
    derives `_EXPORTED_FROM` and `__all__` from them, and the suite fails while they are stale."""
    init = tmp_path / "__init__.py"
    source = Path(memstore.__file__).read_text(encoding="utf-8")
    init.write_text(
        source.replace(
            "if TYPE_CHECKING:\n", "if TYPE_CHECKING:\n    from memstore.graph import Extra\n"
        )
    )
    monkeypatch.setattr(gen_docs, "PACKAGE_INIT", init)
    assert init in gen_docs.stale_pages()
    assert init in gen_docs.regenerate()
    regenerated = init.read_text(encoding="utf-8")
    assert '"memstore.graph": (\n        "Extra",\n        "SessionGraph",\n    ),' in regenerated
    assert '    "Extra",\n' in regenerated.split("__all__ = [")[1]
    namespace: dict[str, object] = {}
    exec(compile(regenerated, str(init), "exec"), namespace)  # the regenerated module runs
    assert namespace["_MODULE_OF"]["Extra"] == "memstore.graph"  # type: ignore[index]
