"""The HTML page in a real browser (headless Chromium): it loads without console errors, opens at
the head, its branch switcher and find box work, Markdown renders, and nothing a turn holds runs."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memstore import SessionGraph
from memstore.render import render_html

from .chromium import Browser
from .test_render import START_MS, build_story, load_legacy

pytestmark = pytest.mark.slow  # headless Chromium

VISIBLE_IDS = (
    "[...document.querySelectorAll('article.turn')].filter(a => !a.hidden).map(a => a.dataset.id)"
)
IN_VIEW = (
    "(() => {{ const r = document.querySelector({!r}).getBoundingClientRect();"
    " return r.bottom > 0 && r.top < innerHeight; }})()"
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with Browser() as opened:
        yield opened


def show(browser: Browser, graph: SessionGraph, tmp_path: Path, name: str = "page") -> Path:
    """Write the page of `graph` and open it; no console errors so far."""
    path = tmp_path / f"{name}.html"
    path.write_text(render_html(graph), encoding="utf-8")
    browser.events.clear()
    browser.open(path)
    assert browser.problems() == []
    return path


def path_ids(graph: SessionGraph, leaf: str) -> list[str]:
    return [node.id for node in graph.path_nodes(leaf)]


def article_of(browser: Browser, node_id: str) -> str:
    """A selector for the article of a node."""
    number = browser.js(f"document.querySelector('article[data-id=\"{node_id}\"]').id")
    return f"#{number}"


def test_the_page_loads_without_errors_and_opens_at_the_head(
    browser: Browser, tmp_path: Path
) -> None:
    story = build_story()
    show(browser, story.graph, tmp_path)
    assert browser.js("document.documentElement.classList.contains('no-js')") is False
    assert browser.js(VISIBLE_IDS) == path_ids(story.graph, story.main_tip.id)
    head = article_of(browser, story.main_tip.id)
    assert browser.js(IN_VIEW.format(head)) is True


def test_the_branch_switcher_shows_the_other_branch(browser: Browser, tmp_path: Path) -> None:
    story = build_story()
    show(browser, story.graph, tmp_path)
    # a branch tip in the side bar, then a sibling switcher in a turn's header
    browser.click(".side .tips a:not(.current)")
    assert browser.js(VISIBLE_IDS) == path_ids(story.graph, story.alt_tip.id)
    assert "branch tip" in browser.js("document.getElementById('status').textContent")
    browser.click(".turn:not([hidden]) .sib a")
    assert browser.js(VISIBLE_IDS) == path_ids(story.graph, story.main_tip.id)
    browser.js("history.back()")
    browser.js("new Promise(r => setTimeout(r, 100))")
    assert browser.js(VISIBLE_IDS) == path_ids(story.graph, story.alt_tip.id)
    assert browser.problems() == []


HOSTILE_TEXTS = [
    "<script>window.ran = 'script'</script>",
    "<img src=x onerror=\"window.ran = 'img'\">",
    "<svg onload=\"window.ran = 'svg'\"></svg>",
    "[click me](javascript:window.ran='link') and <a href=\"javascript:window.ran='a'\">a</a>",
    "<iframe srcdoc=\"<script>parent.ran='iframe'</script>\"></iframe>",
    "```html\n<script>window.ran = 'fence'</script>\n```",
    "<style>body { display: none }</style> <details open ontoggle=\"window.ran='toggle'\">x",
]


def hostile_graph() -> SessionGraph:
    graph = SessionGraph("hostile", clock=itertools.count(START_MS, 1000).__next__)
    for body in HOSTILE_TEXTS:
        graph.append({"role": "user", "blocks": [{"kind": "text", "text": body}]})
    graph.append(
        {
            "role": "assistant",
            "blocks": [
                {
                    "kind": "tool_call",
                    "id": "c",
                    "name": "<script>x</script>",
                    "input": {"html": "<script>window.ran = 'input'</script>\n<b>two lines</b>"},
                },
            ],
        }
    )
    graph.append(
        {
            "role": "user",
            "blocks": [
                {
                    "kind": "tool_result",
                    "callId": "c",
                    "output": {"stdout": "<script>window.ran = 'output'</script>\nline 2"},
                },
            ],
        }
    )
    return graph


def test_a_turn_holding_html_or_script_does_nothing(browser: Browser, tmp_path: Path) -> None:
    graph = hostile_graph()
    show(browser, graph, tmp_path)
    browser.js("document.querySelectorAll('details').forEach(d => d.open = true)")
    for link in browser.js("[...document.querySelectorAll('main a')].map(a => a.href)"):
        assert not link.startswith("javascript:"), link
    browser.js("document.querySelectorAll('main a:not([data-pick])').forEach(a => a.click())")
    assert browser.js("window.ran === undefined") is True
    assert browser.js("document.scripts.length") == 1  # the page's own
    for tag in ("img", "svg", "iframe", "style:not(head style)", "main details[ontoggle]"):
        assert browser.js(f"document.querySelectorAll('{tag}').length") == 0, tag
    assert browser.js("getComputedStyle(document.body).display") != "none"
    texts = browser.js("[...document.querySelectorAll('article.turn')].map(a => a.innerText)")
    for body, shown in zip(HOSTILE_TEXTS, texts, strict=False):
        if "```" not in body:
            assert body.split('"')[0].replace("[click me](", "") in shown.replace("[click me](", "")
    assert browser.problems() == []


def test_markdown_and_multi_line_output_render(browser: Browser, tmp_path: Path) -> None:
    graph = SessionGraph("md", clock=itertools.count(START_MS, 1000).__next__)
    markdown = (
        "# Plan\n\n**bold** and `code`\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```py\nx = 1\n```"
    )
    graph.append({"role": "assistant", "blocks": [
        {"kind": "text", "text": markdown},
        {"kind": "tool_call", "id": "c", "name": "bash", "input": {"command": "ls"}},
    ]})  # fmt: skip
    graph.append({"role": "user", "blocks": [
        {"kind": "tool_result", "callId": "c", "output": {"stdout": "a.py\nb.py\n", "code": 0}},
    ]})  # fmt: skip
    show(browser, graph, tmp_path)
    assert browser.js("document.querySelector('.md h1').textContent") == "Plan"
    assert browser.js("document.querySelector('.md strong').textContent") == "bold"
    assert browser.js("document.querySelectorAll('.md table td').length") == 2
    assert browser.js("document.querySelector('.md pre code').textContent") == "x = 1\n"
    outputs = browser.js(
        "[...document.querySelectorAll('details.result pre.out')].map(p => p.textContent)"
    )
    assert outputs == ["a.py\nb.py\n"]


def test_find_goes_through_every_branch(browser: Browser, tmp_path: Path) -> None:
    story = build_story()
    show(browser, story.graph, tmp_path)
    browser.type("#find", "alt-")  # only on the other branch
    browser.press_enter()
    assert browser.js("document.getElementById('found').textContent") == "1 of 2 turns"
    assert browser.js(VISIBLE_IDS) == path_ids(story.graph, story.alt_tip.id)[:-1]
    assert browser.js("document.querySelector('.turn.found').dataset.id") in path_ids(
        story.graph, story.alt_tip.id
    )
    browser.js("document.getElementById('find').value = ''")
    browser.type("#find", "enoent")  # inside a folded tool result
    browser.press_enter()
    assert browser.js("document.querySelector('details.result').open") is True
    browser.js("document.getElementById('find').value = ''")
    browser.type("#find", "ir")  # several turns: Enter walks them, Shift+Enter goes back
    browser.press_enter()
    first = browser.js("document.getElementById('found').textContent")
    browser.press_enter()
    second = browser.js("document.getElementById('found').textContent")
    browser.press_enter(shift=True)
    assert browser.js("document.getElementById('found').textContent") == first
    assert first.startswith("1 of ")
    assert second.startswith("2 of ")
    browser.js("document.getElementById('find').value = ''")
    browser.type("#find", "nowhere at all")
    browser.press_enter()
    assert browser.js("document.getElementById('found').textContent") == "not found"
    assert browser.problems() == []


def test_a_3000_turn_session_is_usable(browser: Browser, tmp_path: Path) -> None:
    graph = load_legacy("large-session")
    assert graph.size == 3000
    show(browser, graph, tmp_path, "large")
    assert graph.leaf is not None
    head = article_of(browser, graph.leaf)
    assert browser.js(IN_VIEW.format(head)) is True  # opens at the head, far down the page
    assert browser.js("scrollY") > 10_000
    tips = browser.js("[...document.querySelectorAll('.side .tips a')].map(a => a.dataset.pick)")
    assert len(tips) > 1
    browser.click(f".side .tips a[data-pick='{tips[0]}']")
    shown: list[Any] = browser.js(VISIBLE_IDS)
    leaf = browser.js(f"document.getElementById('n{tips[0]}').dataset.id")
    assert shown == path_ids(graph, leaf)
    wanted = next(
        block["text"][:24].lower()
        for node in graph.all()[1500:]
        for block in node.turn.to_json()["blocks"]
        if block["kind"] == "text" and len(block["text"].strip()) > 24
    )
    browser.type("#find", wanted)
    browser.press_enter()
    assert browser.js("document.getElementById('found').textContent").startswith("1 of ")
    found = browser.js("document.querySelector('.turn.found').innerText.toLowerCase()")
    assert wanted in found
    assert browser.js(IN_VIEW.format(".turn.found")) is True
    assert browser.problems() == []


RENDERED = (
    "[...document.querySelectorAll('article.turn:not([hidden]) > header')]"
    ".filter(h => h.checkVisibility({contentVisibilityAuto: true})).length"
)


def test_a_long_page_opens_at_the_head_laying_out_only_the_turns_in_view(
    browser: Browser, tmp_path: Path
) -> None:
    graph = load_legacy("large-session")
    show(browser, graph, tmp_path, "long")
    assert graph.leaf is not None
    head = article_of(browser, graph.leaf)
    assert browser.js(IN_VIEW.format(head)) is True
    assert browser.js(f"document.querySelector('{head} > header').checkVisibility("
                      "{contentVisibilityAuto: true})") is True  # fmt: skip
    shown = len(browser.js(VISIBLE_IDS))
    assert shown > 500
    assert 0 < browser.js(RENDERED) < 100  # the rest are skipped until scrolled to
    browser.js("document.querySelector('article.turn:not([hidden])').scrollIntoView()")
    browser.js("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    first = browser.js("document.querySelector('article.turn:not([hidden]) > header')"
                       ".checkVisibility({contentVisibilityAuto: true})")  # fmt: skip
    assert first is True
    assert browser.problems() == []
