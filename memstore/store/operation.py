"""An operation, written once, for the sync and the async store (and their session handles).

An operation is a method of `StoreBase` (or `HandleBase`) decorated with `@operation`: a
*program*, a generator that yields requests — run this plan (`Run`), await this model call
(`Await`), call this on a sync engine (`OnEngine`) — and returns the operation's result. It does
no I/O itself. Each shell says how a request is carried out: `SessionStore` directly,
`AsyncSessionStore` on its asyncio engine. Through a shell, an operation is an ordinary method
with the program's signature and docstring, returning `T` on a `Synchronous` shell and an
awaitable of `T` on an `Asynchronous` one:

    @operation
    def head(self, session_id: str) -> Program[str | None]:
        \"\"\"The session's head node id, or None.\"\"\"
        return (yield from self._read(plans.head(session_id), "reading a head"))

A request's error is thrown into the program, which may handle it (an import of many files
keeps going) or clean up as it propagates.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine, Generator
from dataclasses import dataclass
from types import MethodType
from typing import Any, Concatenate, Generic, ParamSpec, TypeAlias, TypeVar, overload

from sqlalchemy import Engine

from memstore.store.plans import Plan

__all__ = [
    "Asynchronous",
    "Await",
    "OnEngine",
    "Operation",
    "Program",
    "Request",
    "Run",
    "Synchronous",
    "operation",
]

T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")


@dataclass(slots=True)
class Run(Generic[T]):
    """Run a plan in a transaction, naming `action` in a database error's message."""

    plan: Plan[T]
    action: str
    write: bool = False
    files: bool = False
    """The plan reads or writes files as it goes (imports, exports): the async store runs it on
    a sync connection, off the event loop."""

    def __iter__(self) -> Generator[Request, Any, T]:
        return (yield self)  # type: ignore[no-any-return]


@dataclass(slots=True)
class Await(Generic[T]):
    """Await a coroutine that does no database work (a model call); the sync store runs it on an
    event loop of its own."""

    coroutine: Coroutine[Any, Any, T]

    def __iter__(self) -> Generator[Request, Any, T]:
        return (yield self)  # type: ignore[no-any-return]


@dataclass(slots=True)
class OnEngine(Generic[T]):
    """Call `call` with a sync engine on the store's database (Alembic's migrations, the
    read-only query's driver calls), with database errors translated naming `action`; the async
    store calls it in a worker thread."""

    call: Callable[[Engine], T]
    action: str

    def __iter__(self) -> Generator[Request, Any, T]:
        return (yield self)  # type: ignore[no-any-return]


Request: TypeAlias = Run[Any] | Await[Any] | OnEngine[Any]
Program: TypeAlias = Generator[Request, Any, T]
"""An operation's body: yields requests, receives each one's result, returns the operation's."""


def _install(shell: type[Synchronous | Asynchronous]) -> None:
    """Put each operation's method for `shell` in its class as a plain function: a call then
    costs what a method's does (the descriptor's `__get__` is for mypy and for other classes)."""
    for name in dir(shell):
        found = inspect.getattr_static(shell, name)
        if isinstance(found, Operation):
            setattr(shell, name, found._methods[shell._asynchronous])


class Synchronous:
    """A shell whose operations return their results: it carries out requests as they come."""

    _asynchronous = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _install(cls)

    def _complete(self, program: Program[T]) -> T:
        """Carry out a program's requests in turn (an error is thrown into it); its result."""
        try:
            request = next(program)
            while True:
                try:
                    result = self._perform(request)
                except BaseException as error:  # Ctrl-C too: the program's cleanup runs
                    request = program.throw(error)
                else:
                    request = program.send(result)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def _perform(self, request: Request) -> Any:
        raise NotImplementedError


class Asynchronous:
    """A shell whose operations are coroutines: it awaits each request (one loop per flavour:
    the `await` is the difference)."""

    _asynchronous = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _install(cls)

    async def _complete(self, program: Program[T]) -> T:
        """As `Synchronous._complete`, awaiting each request."""
        try:
            request = next(program)
            while True:
                try:
                    result = await self._perform(request)
                except BaseException as error:  # cancellation too: the program's cleanup runs
                    request = program.throw(error)
                else:
                    request = program.send(result)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def _perform(self, request: Request) -> Any:
        raise NotImplementedError


class Operation(Generic[P, R]):
    """A descriptor: the program `program` as a method of each shell, sync or async.

    The two methods are made once, here, with the program's name, signature and docstring,
    and each shell class holds its own (`_install`); `__get__` tells mypy what they return.
    """

    def __init__(self, program: Callable[Concatenate[Any, P], Program[R]]) -> None:
        self.program = program
        """The program itself, to compose operations: `Op.program(store, ...)` runs nothing."""

        def run(shell: Synchronous, /, *args: Any, **kwargs: Any) -> Any:
            return shell._complete(program(shell, *args, **kwargs))

        async def run_async(shell: Asynchronous, /, *args: Any, **kwargs: Any) -> Any:
            return await shell._complete(program(shell, *args, **kwargs))

        self._methods = (
            functools.update_wrapper(run, program),
            functools.update_wrapper(run_async, program),
        )
        signature = inspect.signature(program)
        shown = signature.replace(return_annotation=_result(signature.return_annotation))
        for method in self._methods:
            method.__signature__ = shown  # type: ignore[union-attr]
        self.__doc__ = program.__doc__
        self.__wrapped__ = program

    @overload
    def __get__(self, shell: None, owner: type[Any]) -> Operation[P, R]: ...
    @overload
    def __get__(self, shell: Synchronous, owner: type[Any]) -> Callable[P, R]: ...
    @overload
    def __get__(
        self, shell: Asynchronous, owner: type[Any]
    ) -> Callable[P, Coroutine[Any, Any, R]]: ...
    def __get__(self, shell: object, owner: type[Any]) -> Any:
        if shell is None:
            if issubclass(owner, Synchronous | Asynchronous):  # the shell's plain function
                return self._methods[owner._asynchronous]
            return self
        return MethodType(self._methods[shell._asynchronous], shell)  # type: ignore[attr-defined]


def _result(annotation: object) -> object:
    """What an operation returns (awaited), as `help()` should show it: `Program[T]` is `T`."""
    if isinstance(annotation, str) and annotation.startswith("Program[") and annotation[-1] == "]":
        return annotation[len("Program[") : -1]
    return annotation


def operation(program: Callable[Concatenate[Any, P], Program[R]]) -> Operation[P, R]:
    """Make `program` an operation of every shell built on the base class it is defined in."""
    return Operation(program)
