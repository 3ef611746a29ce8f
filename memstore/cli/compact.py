"""`memstore compact`: condense a session's head path with a model."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from memstore.cli._common import (
    TenantOption,
    app,
    emit_json,
    err,
    existing_session,
    friendly_errors,
    json_record,
    open_store,
    out,
)

if TYPE_CHECKING:
    from memstore.types import ModelInvoker


class InvokerChoice(enum.StrEnum):
    """Which model `memstore compact` calls."""

    EXTRACTIVE = "extractive"
    OPENAI = "openai"
    ANTHROPIC = "anthropic"


def _invoker(choice: InvokerChoice, model: str, base_url: str | None) -> ModelInvoker:
    from memstore import invokers
    from memstore.errors import InvokerConfigError

    try:
        if choice is InvokerChoice.OPENAI:
            return invokers.openai_compatible(base_url, model)
        if choice is InvokerChoice.ANTHROPIC:
            return invokers.anthropic(model, base_url=base_url)
    except InvokerConfigError as exc:  # the library names its arguments; name the options
        said = (
            str(exc).replace("pass api_key=... or set", "set").replace("base_url=...", "--base-url")
        )
        raise InvokerConfigError(said) from exc
    return invokers.extractive()


@app.command()
@friendly_errors
def compact(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="The session whose head path to condense.")],
    invoker: Annotated[
        InvokerChoice,
        typer.Option(
            help="extractive: offline, no model; openai: any OpenAI-compatible "
            "endpoint (OPENAI_BASE_URL, OPENAI_API_KEY); anthropic: ANTHROPIC_API_KEY."
        ),
    ] = InvokerChoice.EXTRACTIVE,
    model: Annotated[str, typer.Option(help="The summarizing model's id.")] = "extractive",
    window: Annotated[
        int, typer.Option(min=1, help="The model's context window, in tokens.")
    ] = 128_000,
    max_output: Annotated[
        int | None, typer.Option(min=1, help="Tokens to reserve for the model's reply.")
    ] = None,
    base_url: Annotated[str | None, typer.Option(help="The API's base URL.")] = None,
    keep_recent: Annotated[int, typer.Option(min=0, help="Trailing turns kept verbatim.")] = 8,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    tenant: TenantOption = None,
) -> None:
    """Condense a session's head path into a new branch: a summary, then the kept tail.

    The old branch stays in place; the head moves to the new branch.
    """
    from memstore.condense import minimum_window, request_budget
    from memstore.errors import InvalidArgumentError
    from memstore.types import CompactionPolicy, ModelCard

    card = ModelCard(id=model, context_window=window, max_output_tokens=max_output)
    if request_budget(card) is None:  # before the database is opened (the library checks too)
        reply = "" if max_output is None else f" with --max-output {max_output}"
        raise InvalidArgumentError(
            f"--window {window} cannot hold the summarizing request and its reply{reply}: "
            f"give --window {minimum_window(max_output)} or more"
        )
    with open_store(ctx, tenant=tenant) as store:
        existing_session(store, session)
        chosen = _invoker(invoker, model, base_url)
        result = store.compact_session(
            session, card, chosen, CompactionPolicy(keep_recent=keep_recent)
        )
    if as_json:
        emit_json(json_record(result))
    elif result.previous_head is None:
        out.print(f"{escape(session)} is empty: nothing to condense")
    elif not result.changed and result.kept_turns > keep_recent:
        out.print(
            f"{escape(session)}: nothing to condense: the head's path is an earlier summary and "
            f"the {result.kept_turns - 1} turns after it"
        )
    elif not result.changed:
        out.print(
            f"{escape(session)}: nothing to condense: all {result.kept_turns} turns of the "
            f"head's path are kept (--keep-recent {keep_recent})"
        )
    else:
        out.print(
            f"{escape(session)}: condensed {result.condensed_turns} turns "
            f"(~{result.tokens_before} -> ~{result.tokens_after} tokens), kept "
            f"{result.kept_turns}; new head {result.new_head} (previous head "
            f"{result.previous_head} is still there)"
        )
    if result.changed and result.tokens_after > window:
        err.print(
            f"[yellow]warning:[/yellow] the new branch still holds ~{result.tokens_after} "
            f"tokens, more than the window of {window}: keep fewer turns (--keep-recent)",
            soft_wrap=True,
        )
