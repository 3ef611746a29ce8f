"""A whole session tree as one self-contained HTML page.

Every node is written once, in preorder, as an `<article>`; the nodes off the head's branch carry
`hidden`, so without JavaScript the page reads as the head's transcript. The small inline script
shows the path from the root to whichever node the reader picks (a branch tip in the side bar, a
row of the tree outline, a turn's number, a sibling switcher) by toggling `hidden`; it never
builds HTML from session data, so escaping happens once, here, with `html.escape`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import cache
from importlib import resources

from memstore.graph import SessionGraph
from memstore.render._common import iso_time, scrub, turn_preview
from memstore.render._html_blocks import attr, blocks_html, text
from memstore.render._tree import Layout, Segment, lay_out
from memstore.types import ToolCallBlock

__all__ = ["render_html"]

_LOOKBACK = 64
"""How many turns up a tool result looks for its call before searching the whole session."""
_MAX_INDENT = 12


def render_html(graph: SessionGraph, *, title: str | None = None) -> str:
    """The whole session tree as one self-contained HTML page (no network needed to open it).

    Every branch is there: the side bar lists the branch tips and an outline of the tree, and
    picking one shows its transcript from the root. The head's branch shows without JavaScript.
    """
    layout = lay_out(graph)
    heading = title or f"Session {graph.session_id}"
    page = [
        _head(heading),
        '<body><div class="top">',
        _header(graph, layout, heading),
        '</div><div class="layout">',
        _sidebar(layout),
        _transcript(layout),
        f"</div><script>{_asset('page.js')}</script></body></html>\n",
    ]
    return scrub("".join(page))


@cache
def _asset(name: str) -> str:
    """A static file of this package (the page's CSS or script)."""
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _head(heading: str) -> str:
    return (
        '<!DOCTYPE html><html lang="en" class="no-js"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="generator" content="memstore">'
        f"<title>{text(heading)}</title><style>{_asset('page.css')}</style></head>"
    )


def _header(graph: SessionGraph, layout: Layout, heading: str) -> str:
    branches = len(layout.tips)
    facts = [
        f"session <code>{text(graph.session_id)}</code>",
        f"{len(layout.nodes)} turns",
        f"{branches} branch{'es' if branches != 1 else ''}",
    ]
    if layout.head >= 0:
        facts.append(f"head {_pick(layout.head, f'#{layout.depth[layout.head]}')}")
    return (
        f"<h1>{text(heading)}</h1>"
        f'<p class="meta">{" · ".join(facts)}</p>'
        f'<p class="status" id="status">{_status(layout)}</p>'
        '<p class="tools needs-js"><button type="button" data-fold="1">Unfold all</button> '
        '<button type="button" data-fold="0">Fold all</button>'
        '<span class="find" role="search"><input type="search" id="find" autocomplete="off"'
        ' placeholder="Find in every turn (Enter)" aria-label="Find in every turn">'
        '<button type="button" data-find="-1" title="Previous (Shift+Enter)">&lsaquo;</button>'
        '<button type="button" data-find="1" title="Next (Enter)">&rsaquo;</button>'
        '<span id="found" aria-live="polite"></span></span></p>'
        '<noscript><p class="warn">JavaScript is off: this page shows the head branch only.'
        "</p></noscript>"
    )


def _status(layout: Layout) -> str:
    if not layout.nodes:
        return "This session has no turns."
    if layout.head < 0:
        return f"No head: showing the newest branch, {layout.depth[_shown(layout)]} turns."
    return f"Showing the head branch: {layout.depth[layout.head]} turns."


def _pick(index: int, label: str, css: str = "") -> str:
    """A link that shows the branch from the root to node `index` (`label` is trusted HTML)."""
    classes = f' class="{css}"' if css else ""
    return f'<a href="#n{index}" data-pick="{index}"{classes}>{label}</a>'


# --- the side bar -------------------------------------------------------------------------------


def _sidebar(layout: Layout) -> str:
    if not layout.nodes:
        return ""
    return (
        '<nav class="side needs-js" aria-label="Branches">'
        f'<h2>Branches</h2><ol class="tips">{"".join(_tip_rows(layout))}</ol>'
        f'<h2>Tree</h2><ol class="tree">{"".join(_tree_rows(layout))}</ol></nav>'
    )


def _tip_rows(layout: Layout) -> Iterator[str]:
    ends = set(layout.tips)
    if layout.head >= 0:
        ends.add(layout.head)
    for index in sorted(ends):
        node = layout.nodes[index]
        badge = ' <span class="badge head">head</span>' if index == layout.head else ""
        moment = _short_time(iso_time(node.created_at))
        label = (
            f'<span class="pv">{text(turn_preview(node))}</span>'
            f'<span class="sub">{layout.depth[index]} turns · {moment}{badge}</span>'
        )
        css = "current" if index == _shown(layout) else ""
        yield f"<li>{_pick(index, label, css)}</li>"


def _tree_rows(layout: Layout) -> Iterator[str]:
    shown = _shown(layout)
    on_path = {layout.segment_of[index] for index in _shown_path(layout)}
    for number, segment in enumerate(layout.segments):
        css = "on" if number in on_path else ""
        if number == layout.segment_of[shown]:
            css += " current"
        yield (
            f'<li data-seg="{number}" style="--d:{min(segment.forks, _MAX_INDENT)}">'
            f"{_pick(segment.end, _segment_label(layout, segment), css.strip())}</li>"
        )


def _segment_label(layout: Layout, segment: Segment) -> str:
    first, last = layout.depth[segment.start], layout.depth[segment.end]
    span = f"#{first}" if first == last else f"#{first}&ndash;#{last}"
    forks = len(layout.children[segment.end])
    end = f" · forks in {forks}" if forks else " · tip"
    if segment.start <= layout.head <= segment.end:
        end += ' <span class="badge head">head</span>'
    preview = text(turn_preview(layout.nodes[segment.start], 60))
    return f'<span class="pv">{preview}</span><span class="sub">{span}{end}</span>'


def _shown(layout: Layout) -> int:
    """The node whose branch shows first: the head, else the newest tip (-1 with no nodes)."""
    if layout.head >= 0 or not layout.nodes:
        return layout.head
    return layout.default_tip[layout.roots[0]]


def _shown_path(layout: Layout) -> list[int]:
    shown = _shown(layout)
    return layout.path(shown) if shown >= 0 else []


# --- the transcript -----------------------------------------------------------------------------


def _transcript(layout: Layout) -> str:
    if not layout.nodes:
        return '<main id="turns" data-head="-1" data-shown="-1"></main>'
    visible = set(_shown_path(layout))
    namer = _tool_namer(layout)
    switchers = _sibling_switchers(layout)
    parts = [f'<main id="turns" data-head="{layout.head}" data-shown="{_shown(layout)}">']
    for index in range(len(layout.nodes)):
        parts.append(_article(layout, index, index in visible, namer, switchers.get(index, "")))
        if len(layout.children[index]) > 1:
            parts.append(_fork_box(layout, index))
    parts.append('<nav class="forks needs-js" id="cont" hidden><a href="#" data-pick=""></a></nav>')
    parts.append("</main>")
    return "".join(parts)


def _article(
    layout: Layout,
    index: int,
    visible: bool,
    namer: Callable[[int, str], str | None],
    switcher: str,
) -> str:
    node = layout.nodes[index]
    role = text(node.turn.role)
    moment = iso_time(node.created_at)
    head = ' <span class="badge head">head</span>' if index == layout.head else ""
    tip = f' data-t="{layout.default_tip[index]}"' if layout.children[index] else ""
    return (
        f'<article id="n{index}" class="turn {attr(node.turn.role)}{" head" if head else ""}"'
        f' data-p="{layout.parent[index]}" data-s="{layout.segment_of[index]}"{tip}'
        f' data-id="{attr(node.id)}"{"" if visible else " hidden"}><header>'
        f'{_pick(index, f"#{layout.depth[index]}", "num")} <span class="role">{role}</span>'
        f' <time datetime="{moment}" title="{moment}">{_short_time(moment)}</time>'
        f' <code class="nid" title="{attr(node.id)}">{text(layout.short_ids[node.id])}</code>'
        f"{switcher}{head}</header>"
        f"{blocks_html(node.turn, lambda call_id: namer(index, call_id))}</article>"
    )


def _short_time(moment: str) -> str:
    """`2026-01-01 00:00:06 UTC` from an ISO time; anything else as it is."""
    date, _, clock = moment.partition("T")
    return f"{date} {clock[:8]} UTC" if moment.endswith("Z") else moment


def _sibling_switchers(layout: Layout) -> dict[int, str]:
    """A `< 2/3 >` switcher for every node that has siblings: links to their branches."""
    switchers: dict[int, str] = {}
    for group in layout.sibling_groups():
        for position, index in enumerate(group):
            if len(group) < 2:
                break
            before = group[position - 1] if position else None
            after = group[position + 1] if position + 1 < len(group) else None
            switchers[index] = (
                f' <span class="sib needs-js">{_arrow(layout, before, "&lsaquo;", "Previous")}'
                f" {position + 1}/{len(group)} {_arrow(layout, after, '&rsaquo;', 'Next')}</span>"
            )
    return switchers


def _arrow(layout: Layout, sibling: int | None, glyph: str, which: str) -> str:
    """A link to a sibling's branch, or the glyph greyed out at either end."""
    if sibling is None:
        return f'<span class="off">{glyph}</span>'
    tip = layout.default_tip[sibling]
    return f'<a href="#n{tip}" data-pick="{tip}" title="{which} branch">{glyph}</a>'


def _fork_box(layout: Layout, index: int) -> str:
    rows = []
    for child in layout.children[index]:
        tip = layout.default_tip[child]
        turns = layout.depth[tip] - layout.depth[index]
        label = (
            f'<span class="pv">{text(turn_preview(layout.nodes[child]))}</span>'
            f'<span class="sub">{turns} turn{"s" if turns != 1 else ""} to its end</span>'
        )
        rows.append(f"<li>{_pick(tip, label)}</li>")
    return (
        f'<nav class="forks needs-js" id="f{index}" hidden>'
        f"<p>The conversation forks here into {len(rows)} branches:</p>"
        f"<ol>{''.join(rows)}</ol></nav>"
    )


def _tool_namer(layout: Layout) -> Callable[[int, str], str | None]:
    """Finds the name of the tool a result answers: on its own branch first, then anywhere."""
    calls: dict[int, dict[str, str]] = {}
    anywhere: dict[str, str] = {}
    for index, node in enumerate(layout.nodes):
        for block in node.turn.blocks:
            if isinstance(block, ToolCallBlock):
                calls.setdefault(index, {})[block.id] = block.name
                anywhere.setdefault(block.id, block.name)

    def name(index: int, call_id: str) -> str | None:
        for _ in range(_LOOKBACK):
            found = calls.get(index, {}).get(call_id)
            if found is not None or layout.parent[index] < 0:
                return found or anywhere.get(call_id)
            index = layout.parent[index]
        return anywhere.get(call_id)

    return name
