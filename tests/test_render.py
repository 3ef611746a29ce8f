from __future__ import annotations

import base64
import itertools
import json
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

import memstore.render
from memstore import SessionStore
from memstore.blocks import MAX_JSON_DEPTH
from memstore.errors import UnknownNodeError
from memstore.graph import SessionGraph
from memstore.jsonl import JsonlSessionStore
from memstore.render import render_html, render_markdown
from memstore.render._common import pretty_json
from memstore.render._html_blocks import _markdown, _plain_paragraphs
from memstore.terminal import SHOWN_CHARS
from memstore.types import SessionNode

LEGACY = Path(__file__).parent / "fixtures" / "legacy-jsonl"
LEGACY_STEMS = sorted(path.stem for path in LEGACY.glob("*.jsonl"))
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
HOSTILE = "<script>alert(1)</script>"
PIXEL = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(40))).decode()
NESTED_INPUT = {"path": "src/a.py", "options": {"deep": [1, {"fence": "```", "none": None}]}}
VOID_TAGS = {"meta", "img", "br", "hr", "input", "link", "source", "wbr"}


def text(role: str, body: str) -> dict[str, Any]:
    return {"role": role, "blocks": [{"kind": "text", "text": body}]}


@dataclass
class Story:
    """A small branched session and the nodes the tests look for."""

    graph: SessionGraph
    main_tip: SessionNode
    alt_tip: SessionNode
    fork: SessionNode


def build_story() -> Story:
    graph = SessionGraph("story", clock=itertools.count(START_MS, 1_000).__next__)
    graph.append(text("user", f"FIRST {HOSTILE} & <b>bold</b> and ``` a fence"))
    fork = graph.append(
        {
            "role": "assistant",
            "blocks": [
                {"kind": "thinking", "text": "THINKING about `code`\n\n```\nunclosed"},
                {"kind": "tool_call", "id": "call-1", "name": "read_file", "input": NESTED_INPUT},
            ],
        }
    )
    result = {"kind": "tool_result", "callId": "call-1", "output": {"error": "ENOENT"}}
    graph.append({"role": "user", "blocks": [{**result, "isError": True}]})
    graph.append(text("assistant", "SECOND ````\n```python\nprint('never closed')"))
    graph.append(
        {
            "role": "user",
            "blocks": [
                {"kind": "image", "mediaType": "image/png", "dataBase64": PIXEL},
                {"kind": "citation", "text": "quoted", "source": {"url": "https://example.org"}},
                {"kind": "text", "text": "THIRD héllo 😀 日本語\n<!-- never closed"},
            ],
        }
    )
    main_tip = graph.append(text("assistant", "FOURTH \u2028 the end"))
    graph.branch_from(fork.id)
    graph.append(text("user", f"ALT-BRANCH {HOSTILE}"))
    alt_tip = graph.append(text("assistant", "ALT-TIP"))
    graph.branch_from(main_tip.id)
    return Story(graph, main_tip, alt_tip, fork)


@pytest.fixture
def story() -> Story:
    return build_story()


def load_legacy(stem: str) -> SessionGraph:
    return JsonlSessionStore(LEGACY).load_session(stem)


def tips(graph: SessionGraph) -> set[str]:
    parents = {node.parent for node in graph.all()}
    return {node.id for node in graph.all() if node.id not in parents}


# --- a Markdown checker that does not share code with the renderer ------------------------------


FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def unquoted(line: str) -> str:
    while line.startswith(">"):
        line = line[2:] if line.startswith("> ") else line[1:]
    return line


def lines_outside_fences(markdown: str) -> tuple[list[str], bool]:
    """The lines that are not inside fenced code, and whether a fence is left open."""
    outside: list[str] = []
    opening: str | None = None
    for raw in markdown.split("\n"):
        line = unquoted(raw)
        match = FENCE.match(line)
        if opening is None:
            if match and not (match.group(1)[0] == "`" and "`" in match.group(2)):
                opening = match.group(1)
            else:
                outside.append(raw)
        elif match and match.group(1)[0] == opening[0] and len(match.group(1)) >= len(opening):
            opening = None if not match.group(2).strip() else opening
    return outside, opening is not None


def fenced_blocks(markdown: str, info: str) -> list[str]:
    """The bodies of the fenced code blocks with this info string."""
    pattern = re.compile(rf"^(`{{3,}}){info}\n(.*?)\n\1$", re.MULTILINE | re.DOTALL)
    return [match.group(2) for match in pattern.finditer(markdown)]


# --- Markdown -----------------------------------------------------------------------------------


def test_markdown_reads_the_head_branch_in_order(story: Story) -> None:
    markdown = render_markdown(story.graph, title="A story")
    positions = [markdown.index(word) for word in ("FIRST", "SECOND", "THIRD", "FOURTH")]
    assert positions == sorted(positions)
    assert "ALT-BRANCH" not in markdown
    assert "ALT-TIP" not in markdown
    assert markdown.startswith("# A story\n")
    assert "(the head)" in markdown


def test_markdown_of_another_leaf_reads_that_branch(story: Story) -> None:
    markdown = render_markdown(story.graph, story.alt_tip.id)
    assert "ALT-BRANCH" in markdown
    assert "ALT-TIP" in markdown
    assert "SECOND" not in markdown
    assert "(not the head)" in markdown
    assert markdown.startswith("# Session story\n")


def test_markdown_turns_carry_role_and_utc_time(story: Story) -> None:
    markdown = render_markdown(story.graph)
    headings = [line for line in markdown.split("\n") if line.startswith("## ")]
    assert headings[0] == "## 1 · user · 2026-01-01T00:00:00.000Z"
    assert headings[1] == "## 2 · assistant · 2026-01-01T00:00:01.000Z"
    assert len(headings) == len(story.graph.path_nodes(story.main_tip.id))


def test_markdown_fences_never_break(story: Story) -> None:
    markdown = render_markdown(story.graph)
    outside, left_open = lines_outside_fences(markdown)
    assert not left_open
    turn_headings = [line for line in outside if re.match(r"## \d+ · ", line)]
    assert len(turn_headings) == 6  # every heading is still a heading, none swallowed by code
    assert "-->" in markdown.split("THIRD", 1)[1]  # the open HTML comment is closed too


def test_the_fence_checker_sees_a_broken_document() -> None:
    outside, left_open = lines_outside_fences("# x\n\n```\ncode\n\n## 2 · user\n")
    assert left_open
    assert "## 2 · user" not in outside


TURN_HEADING = re.compile(r"\d+ · (user|assistant) · \d{4}-\d\d-\d\dT[\d:.]+Z")


def commonmark_turn_headings(markdown: str) -> list[str]:
    """The top-level turn headings (`## n · role · time`) a CommonMark parser reads."""
    tokens = MarkdownIt("commonmark").parse(markdown)
    headings = [
        tokens[index + 1].content
        for index, token in enumerate(tokens)
        if token.type == "heading_open" and token.tag == "h2" and token.level == 0
    ]
    return [heading for heading in headings if TURN_HEADING.fullmatch(heading)]


def session_of_texts(bodies: list[str]) -> SessionGraph:
    graph = SessionGraph("texts", clock=itertools.count(START_MS, 1_000).__next__)
    roles = itertools.cycle(("user", "assistant"))
    for body in [*bodies, "THE END"]:
        graph.append(text(next(roles), body))
    return graph


def assert_every_turn_heading_stays_a_heading(graph: SessionGraph) -> None:
    markdown = render_markdown(graph)
    headings = commonmark_turn_headings(markdown)
    assert len(headings) == graph.size, markdown
    assert [heading.split(" · ")[0] for heading in headings] == [
        str(number) for number in range(1, graph.size + 1)
    ]
    last_turn = MarkdownIt("commonmark").render(markdown.rsplit("\n## ", 1)[1])
    assert "<p>THE END</p>" in last_turn


def test_markdown_a_fence_inside_a_list_item_does_not_swallow_later_turns() -> None:
    graph = session_of_texts(["- item\n\n  ```\n  still in a list fence", "next turn"])
    assert_every_turn_heading_stays_a_heading(graph)
    markdown = render_markdown(graph)
    assert "- item\n\n  ```\n  still in a list fence\n  ```\n" in markdown  # closed in the item


@pytest.mark.parametrize(
    "body",
    [
        "- a\n\n  ```\n  x\n```",  # the item's fence ends with the item; the last line opens one
        "> ```\n> quoted fence",
        "1. one\n\n   <pre>\n   never closed",
        "- item\n\n  <!-- open",
        "    indented\n```\nopen",
        "~~~\n```\n~~",
        "<script>\nalert(1)",
        "- x\n\n      ```\n      deep",
    ],
)
def test_markdown_texts_that_leave_blocks_open_never_swallow_later_turns(body: str) -> None:
    assert_every_turn_heading_stays_a_heading(session_of_texts([body, "next"]))


MARKDOWN_PIECES = st.sampled_from(
    [
        "- ",
        "* ",
        "1. ",
        "> ",
        "  ",
        "    ",
        "\n",
        "\n\n",
        "```",
        "~~~",
        "````",
        "<pre>",
        "</pre>",
        "<!--",
        "-->",
        "<?",
        "<![CDATA[",
        "<div>",
        "x",
        "`",
        "#",
        "\t",
        "---",
        "=",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(MARKDOWN_PIECES, max_size=14).map("".join), min_size=1, max_size=3))
def test_markdown_every_turn_heading_stays_a_heading_whatever_the_texts(bodies: list[str]) -> None:
    assert_every_turn_heading_stays_a_heading(session_of_texts(bodies))


def test_markdown_passes_raw_html_and_links_through_as_written() -> None:
    body = 'See <a href="https://example.org">this</a> and [docs](https://example.org/d) <b>x</b>'
    markdown = render_markdown(session_of_texts([body]))
    assert body in markdown


def test_markdown_tool_calls_and_results_are_fenced_json(story: Story) -> None:
    markdown = render_markdown(story.graph)
    blocks = [json.loads(body) for body in fenced_blocks(markdown, "json")]
    assert blocks[:2] == [NESTED_INPUT, {"error": "ENOENT"}]
    assert "**Tool call** `read_file` · id `call-1`" in markdown
    assert "**Tool error** `read_file` · id `call-1`" in markdown


def test_markdown_thinking_is_quoted(story: Story) -> None:
    markdown = render_markdown(story.graph)
    assert "> **Thinking**\n>\n> THINKING about `code`" in markdown


def test_markdown_never_writes_image_data(story: Story) -> None:
    markdown = render_markdown(story.graph)
    assert PIXEL not in markdown
    assert PIXEL[:16] not in markdown
    assert f"_Image:_ `image/png`, {len(base64.b64decode(PIXEL))} bytes" in markdown


def test_markdown_shows_unknown_blocks_as_fenced_json(story: Story) -> None:
    markdown = render_markdown(story.graph)
    assert "**Unknown block** `'citation'`" in markdown
    (shown,) = [body for body in fenced_blocks(markdown, "json") if "example.org" in body]
    assert json.loads(shown)["kind"] == "citation"


def test_markdown_code_spans_survive_backticks() -> None:
    graph = SessionGraph("ticks", clock=itertools.count(START_MS).__next__)
    call = {"kind": "tool_call", "id": "c`1", "name": "we``ird", "input": "```"}
    graph.append({"role": "assistant", "blocks": [call]})
    markdown = render_markdown(graph)
    assert "**Tool call** ```we``ird``` · id ``c`1``" in markdown
    assert fenced_blocks(markdown, "json") == ['"```"']
    assert "````json\n" in markdown


def test_markdown_of_an_empty_session() -> None:
    markdown = render_markdown(SessionGraph("empty"))
    assert markdown == "# Session empty\n\n- Session: `empty`\n\n_This session has no turns._\n"


def test_markdown_of_a_session_without_a_head_names_the_way_out() -> None:
    nodes = [SessionNode(id="a", parent=None, turn=text("user", "hi"), created_at=1)]
    graph = SessionGraph.hydrate("headless", nodes, None)
    assert "has no head" in render_markdown(graph)
    assert "hi" in render_markdown(graph, "a")


def test_markdown_of_an_unknown_leaf_raises(story: Story) -> None:
    with pytest.raises(UnknownNodeError):
        render_markdown(story.graph, "no-such-node")


def test_lone_surrogates_do_not_stop_either_renderer() -> None:
    graph = SessionGraph("surrogates", clock=itertools.count(START_MS).__next__)
    graph.append(text("user", "half a pair: \ud83d!"))
    for output in (render_markdown(graph), render_html(graph)):
        assert "half a pair: \ufffd!" in output
        output.encode("utf-8")


# --- HTML: a structural reading with the standard parser ----------------------------------------


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    children: list[Element | str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def walk(self) -> list[Element]:
        found = [self]
        for child in self.children:
            if isinstance(child, Element):
                found.extend(child.walk())
        return found

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())


class TreeBuilder(HTMLParser):
    """The page as a tree of elements; fails on a closing tag that does not match."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]
        self.doctype = ""

    def handle_decl(self, decl: str) -> None:
        self.doctype = decl

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {name: value or "" for name, value in attrs})
        self.stack[-1].children.append(element)
        if tag not in VOID_TAGS:
            self.stack.append(element)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack[-1].tag == tag, f"</{tag}> closes <{self.stack[-1].tag}>"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(page: str) -> Element:
    builder = TreeBuilder()
    builder.feed(page)
    builder.close()
    assert builder.stack == [builder.root], "unclosed elements"
    assert builder.doctype.lower() == "doctype html"
    return builder.root


@dataclass
class Page:
    """What a reader of the page sees, found through the parsed tree."""

    source: str
    root: Element

    def all(self, tag: str, css: str | None = None) -> list[Element]:
        return [e for e in self.root.walk() if e.tag == tag and (css is None or css in e.classes)]

    @property
    def articles(self) -> list[Element]:
        return self.all("article", "turn")

    def visible_ids(self) -> list[str]:
        return [a.attrs["data-id"] for a in self.articles if "hidden" not in a.attrs]

    def id_of(self, index: str) -> str:
        return self.articles[int(index)].attrs["data-id"]

    def side_picks(self) -> list[Element]:
        (side,) = self.all("nav", "side")
        return [e for e in side.walk() if e.tag == "a" and "data-pick" in e.attrs]


def page_of(graph: SessionGraph, title: str | None = None) -> Page:
    source = render_html(graph, title=title)
    return Page(source, parse(source))


def test_html_is_self_contained(story: Story) -> None:
    page = page_of(story.graph)
    assert not page.all("link")
    assert not page.all("iframe")
    for element in page.root.walk():
        for name in ("src", "href", "action", "srcset", "poster", "data"):
            value = element.attrs.get(name, "").strip().lower()
            assert not value.startswith(("http:", "https:", "//", "javascript:")), element
    (style,) = page.all("style")
    assert "url(" not in style.text()
    assert "@import" not in style.text()
    scripts = page.all("script")
    assert len(scripts) == 1
    assert "src" not in scripts[0].attrs
    assert "http" not in scripts[0].text()


def test_html_holds_every_node_once(story: Story) -> None:
    page = page_of(story.graph)
    ids = [article.attrs["data-id"] for article in page.articles]
    assert sorted(ids) == sorted(node.id for node in story.graph.all())


def test_html_escapes_hostile_text(story: Story) -> None:
    page = page_of(story.graph, title=f"T {HOSTILE}")
    assert HOSTILE not in page.source
    assert "<b>bold</b>" not in page.source
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.source
    assert len(page.all("script")) == 1
    assert not page.all("b")
    (title,) = page.all("title")
    assert title.text() == f"T {HOSTILE}"
    (article,) = [a for a in page.articles if "ALT-BRANCH" in a.text()]
    assert HOSTILE in article.text()  # shown as text, exactly as written


def test_html_without_script_shows_the_head_branch(story: Story) -> None:
    page = page_of(story.graph)
    path = [node.id for node in story.graph.path_nodes(story.main_tip.id)]
    assert page.visible_ids() == path
    (head,) = [a for a in page.articles if "head" in a.classes]
    assert head.attrs["data-id"] == story.graph.leaf
    (main,) = page.all("main")
    assert page.id_of(main.attrs["data-head"]) == story.graph.leaf
    assert "head" in head.text()


def test_html_lets_the_reader_pick_every_branch_tip(story: Story) -> None:
    page = page_of(story.graph)
    picked = {page.id_of(link.attrs["data-pick"]) for link in page.side_picks()}
    assert tips(story.graph) <= picked
    assert tips(story.graph) == {story.main_tip.id, story.alt_tip.id}


def test_html_articles_name_their_parents_in_preorder(story: Story) -> None:
    page = page_of(story.graph)
    for index, article in enumerate(page.articles):
        parent = int(article.attrs["data-p"])
        node = story.graph.get(article.attrs["data-id"])
        assert node is not None
        assert parent < index
        assert node.parent == (page.id_of(str(parent)) if parent >= 0 else None)


def folded(details: Element) -> tuple[str, str]:
    """The text of a `<details>`' summary line and of its body."""
    elements = [child for child in details.children if isinstance(child, Element)]
    assert [elements[0].tag, elements[-1].tag] == ["summary", "pre"]
    assert "open" not in details.attrs
    return elements[0].text(), elements[-1].text()


def test_html_folds_tool_calls_results_and_thinking(story: Story) -> None:
    page = page_of(story.graph)
    (call,) = page.all("details", "call")
    summary, body = folded(call)
    assert "read_file" in summary
    assert "call-1" in call.text()
    assert json.loads(body) == NESTED_INPUT
    (result,) = page.all("details", "result")
    summary, body = folded(result)
    assert "err" in result.classes
    assert "read_file" in summary
    assert "error" in summary
    assert "ENOENT" in summary  # the one-line preview
    assert json.loads(body) == {"error": "ENOENT"}
    (thinking,) = page.all("details", "thinking")
    summary, body = folded(thinking)
    assert "THINKING about `code`" in summary
    assert body == "THINKING about `code`\n\n```\nunclosed"


def test_html_keeps_a_leading_newline_of_preformatted_output() -> None:
    graph = SessionGraph("newline", clock=itertools.count(START_MS).__next__)
    result = {"kind": "tool_result", "callId": "c", "output": "\nindented\n  text"}
    graph.append({"role": "user", "blocks": [result]})
    page = page_of(graph)
    assert '<pre class="out">\n\nindented\n  text</pre>' in page.source  # browsers drop one


def test_html_shows_multi_line_strings_of_tool_data_as_text() -> None:
    graph = SessionGraph("output", clock=itertools.count(START_MS).__next__)
    command = {"command": "cat <<EOF\nline one\nEOF", "timeout": 5}
    graph.append({"role": "assistant", "blocks": [
        {"kind": "tool_call", "id": "c", "name": "bash", "input": command},
    ]})  # fmt: skip
    output = {"stdout": "a.py\n<b>b.py</b>\n", "stderr": "", "parts": [{"text": "x\ny"}]}
    graph.append({"role": "user", "blocks": [
        {"kind": "tool_result", "callId": "c", "output": output},
    ]})  # fmt: skip
    page = page_of(graph)
    (call,) = page.all("details", "call")
    assert [p.text() for p in call.walk() if isinstance(p, Element) and p.tag == "pre"] == [
        pretty_json({"command": "(text of 3 lines, shown below as command)", "timeout": 5}),
        "cat <<EOF\nline one\nEOF",
    ]
    (result,) = page.all("details", "result")
    bodies = [p for p in result.walk() if isinstance(p, Element) and p.tag == "pre"]
    assert [p.attrs["class"] for p in bodies] == ["json", "out", "out"]
    assert json.loads(bodies[0].text())["stderr"] == ""
    assert [p.text() for p in bodies[1:]] == ["a.py\n<b>b.py</b>\n", "x\ny"]
    labels = [p.text() for p in result.walk() if isinstance(p, Element) and "kv" in p.classes]
    assert labels[1:] == ["stdout", "parts[0].text"]
    assert not page.all("b")


def test_html_renders_text_as_markdown_without_raw_html() -> None:
    graph = SessionGraph("md", clock=itertools.count(START_MS).__next__)
    body = "**bold** <i>raw</i> [ok](https://example.org) [bad](javascript:alert(1)) ![i](x.png)"
    graph.append(text("assistant", body))
    page = page_of(graph)
    (strong,) = page.all("strong")
    assert strong.text() == "bold"
    assert not page.all("i")
    assert not page.all("img")
    links = [a for a in page.all("a") if "data-pick" not in a.attrs]
    assert [a.attrs["href"] for a in links] == ["https://example.org", "x.png"]  # the image too
    assert {a.attrs["rel"] for a in links} == {"noopener noreferrer nofollow"}
    assert "[bad](javascript:alert(1))" in page.articles[0].text()


PROSE_CHARACTERS = st.one_of(
    st.sampled_from(["a", "Zé", "word", " ", "\n", "\n\n"]),
    st.sampled_from([*"9\t\r\x00\x07\u00a0\u2028\ufeff-_*#>+=.)(:'\"/,;?!&<[]\\`~|"]),
    st.sampled_from(["  \n", "1. "]),
)


@settings(max_examples=400)
@given(st.lists(PROSE_CHARACTERS, max_size=30).map("".join))
def test_the_plain_prose_fast_path_writes_what_markdown_it_writes(source: str) -> None:
    plain = _plain_paragraphs(source)
    if plain is not None:
        assert plain == _markdown().render(source)


def test_plain_prose_takes_the_fast_path() -> None:
    prose = 'The agent read "src/a.py" (line 12): it failed; why?\n\nSécond paragraph\nhere.'
    assert _plain_paragraphs(prose) == _markdown().render(prose)
    for marked in ("a *b*", "a\n---", "1. a", "a  \nb", "    code", "a & b", "a <b>", "a_b_"):
        assert _plain_paragraphs(marked) is None, marked


def test_html_shows_control_characters_as_symbols() -> None:
    graph = SessionGraph("controls", clock=itertools.count(START_MS).__next__)
    graph.append(text("user", "bell\x07 nul\x00 tab\t end"))
    page = page_of(graph)
    assert "bell\u2407 nul\u2400 tab\t end" in page.source
    assert "\x00" not in page.source
    assert "\x07" not in page.source


def test_html_shows_images_inline_and_unknown_blocks_folded(story: Story) -> None:
    page = page_of(story.graph)
    (image,) = page.all("img")
    assert image.attrs["src"] == f"data:image/png;base64,{PIXEL}"
    (unknown,) = page.all("details", "unknown")
    assert "'citation'" in unknown.text()


def test_html_does_not_inline_svg_or_bad_base64() -> None:
    graph = SessionGraph("images", clock=itertools.count(START_MS).__next__)
    svg = base64.b64encode(b"<svg onload='alert(1)'/>").decode()
    blocks = [
        {"kind": "image", "mediaType": "image/svg+xml", "dataBase64": svg},
        {"kind": "image", "mediaType": "image/png", "dataBase64": "not base64!"},
    ]
    graph.append({"role": "user", "blocks": blocks})
    page = page_of(graph)
    assert not page.all("img")
    assert svg not in page.source
    assert "invalid base64" in page.source


def test_html_of_an_empty_session() -> None:
    page = page_of(SessionGraph("empty"))
    assert not page.articles
    assert "no turns" in page.source


def test_html_survives_a_missing_parent_and_a_loop() -> None:
    turn = text("user", "orphan")
    nodes = [
        SessionNode(id="a", parent="gone", turn=turn, created_at=1),
        SessionNode(id="b", parent="c", turn=turn, created_at=2),
        SessionNode(id="c", parent="b", turn=turn, created_at=3),
    ]
    graph = SessionGraph.hydrate("odd", nodes, None)
    page = page_of(graph)
    assert sorted(a.attrs["data-id"] for a in page.articles) == ["a", "b", "c"]
    assert len(page.visible_ids()) == 1  # no head: the newest branch shows


# --- the page's script, run against a tiny DOM in node ------------------------------------------

DOM_SHIM = r"""
const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
class Classes {
  constructor(el) { this.el = el; }
  list() { return (this.el.attrs.class || "").split(/\s+/).filter(Boolean); }
  contains(name) { return this.list().includes(name); }
  add(name) { if (!this.contains(name)) this.el.attrs.class = [...this.list(), name].join(" "); }
  remove(name) { this.el.attrs.class = this.list().filter((c) => c !== name).join(" "); }
  toggle(name, on) { if (on) this.add(name); else this.remove(name); }
}
function build(node, parent) {
  const el = { tag: node.tag, attrs: node.attrs, parentNode: parent, kids: [] };
  el.classList = new Classes(el);
  el.getAttribute = (n) => (n in el.attrs ? el.attrs[n] : null);
  el.setAttribute = (n, v) => { el.attrs[n] = String(v); };
  Object.defineProperty(el, "hidden", {
    get: () => "hidden" in el.attrs,
    set: (v) => { if (v) el.attrs.hidden = ""; else delete el.attrs.hidden; },
  });
  Object.defineProperty(el, "firstElementChild", { get: () => el.kids[0] || null });
  Object.defineProperty(el, "textContent", { set: (v) => { el.text = v; }, get: () => el.text });
  el.scrollIntoView = () => { scrolled.push(el.attrs.id); };
  el.kids = node.children.map((child) => build(child, el));
  el.matches = (sel) => matches(el, sel);
  el.closest = (sel) => { for (let e = el; e; e = e.parentNode) if (matches(e, sel)) return e; };
  el.querySelectorAll = (sel) => all(el).filter((e) => e !== el && matches(e, sel));
  return el;
}
function all(el) { return [el, ...el.kids.flatMap(all)]; }
function simple(el, sel) {
  const m = /^([a-z]*)((?:\.[\w-]+)*)(?:\[([\w-]+)\])?$/.exec(sel);
  if (!m || !el.attrs) return false;
  if (m[1] && el.tag !== m[1]) return false;
  if (m[3] && !(m[3] in el.attrs)) return false;
  return m[2].split(".").filter(Boolean).every((c) => el.classList.contains(c));
}
function matches(el, sel) {
  const parts = sel.split(" ");
  if (!simple(el, parts.pop())) return false;
  for (let up = el.parentNode; parts.length && up; up = up.parentNode)
    if (simple(up, parts[parts.length - 1])) parts.pop();
  return parts.length === 0;
}
const scrolled = [];
const listeners = {};
const html = build(input.tree, null);
global.document = {
  documentElement: html,
  getElementById: (id) => all(html).find((e) => e.attrs.id === id) || null,
  querySelectorAll: (sel) => all(html).filter((e) => matches(e, sel)),
  addEventListener: (type, fn) => { listeners[type] = fn; },
};
global.location = { hash: input.hash };
global.history = { pushState: (s, t, url) => { global.location.hash = url; } };
global.window = { addEventListener: () => {} };
eval(input.script);
function snapshot() {
  const shown = (sel) => document.querySelectorAll(sel).filter((e) => !e.hidden);
  return {
    turns: shown("article.turn").map((e) => e.attrs.id),
    boxes: shown("nav.forks").map((e) => e.attrs.id),
    current: document.querySelectorAll(".side a.current").map((e) => e.attrs["data-pick"]),
    status: document.getElementById("status").text,
    hash: global.location.hash,
    noJs: html.classList.contains("no-js"),
  };
}
const out = [snapshot()];
for (const pick of input.clicks) {
  const links = document.querySelectorAll(".side a[data-pick]");
  const link = links.find((a) => a.attrs["data-pick"] === pick);
  listeners.click({ target: link, button: 0, preventDefault() {} });
  out.push(snapshot());
}
process.stdout.write(JSON.stringify(out));
"""


def as_json_tree(element: Element) -> dict[str, Any]:
    kids = [as_json_tree(child) for child in element.children if isinstance(child, Element)]
    return {"tag": element.tag, "attrs": dict(element.attrs), "children": kids}


def run_page_script(page: Page, clicks: list[str], hash_: str = "") -> list[dict[str, Any]]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    (html,) = page.all("html")
    (script,) = page.all("script")
    payload = {"tree": as_json_tree(html), "script": script.text(), "clicks": clicks, "hash": hash_}
    done = subprocess.run(
        [node, "-e", DOM_SHIM],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    snapshots: list[dict[str, Any]] = json.loads(done.stdout)
    return snapshots


def path_ids(page: Page, graph: SessionGraph, leaf: str) -> list[str]:
    index = {article.attrs["data-id"]: article.attrs["id"] for article in page.articles}
    return [index[node.id] for node in graph.path_nodes(leaf)]


@pytest.mark.parametrize("source", ["story", "branching"])
def test_page_script_shows_the_path_to_every_pick(source: str) -> None:
    graph = build_story().graph if source == "story" else load_legacy(source)
    page = page_of(graph)
    clicks = sorted({link.attrs["data-pick"] for link in page.side_picks()}, key=int)
    assert {page.id_of(pick) for pick in clicks} >= tips(graph)
    first, *after = run_page_script(page, clicks)
    assert first["noJs"] is False
    assert graph.leaf is not None
    assert first["turns"] == path_ids(page, graph, graph.leaf)
    for pick, seen in zip(clicks, after, strict=True):
        picked = page.id_of(pick)
        assert seen["turns"] == path_ids(page, graph, picked)
        assert pick in seen["current"]
        assert seen["hash"] == f"#n{pick}"
        assert seen["boxes"] == ([] if picked in tips(graph) else [f"f{pick}"])


def test_page_script_follows_the_address_and_offers_the_forks(story: Story) -> None:
    page = page_of(story.graph)
    fork = next(a.attrs["id"] for a in page.articles if a.attrs["data-id"] == story.fork.id)
    (seen,) = run_page_script(page, [], hash_=f"#{fork}")
    assert seen["turns"] == path_ids(page, story.graph, story.fork.id)
    assert seen["boxes"] == [f"f{fork[1:]}"]
    assert "goes on" in seen["status"]


# --- the legacy fixture sessions ----------------------------------------------------------------


@pytest.mark.parametrize("stem", LEGACY_STEMS)
def test_legacy_sessions_render(stem: str) -> None:
    graph = load_legacy(stem)
    markdown = render_markdown(graph)
    _, left_open = lines_outside_fences(markdown)
    assert not left_open
    for node in graph.all():
        for block in node.turn.to_json()["blocks"]:
            if block.get("kind") == "image":
                assert block["dataBase64"] not in markdown
    if stem == "large-session":
        return  # its HTML has its own test below
    page = page_of(graph)
    assert sorted(a.attrs["data-id"] for a in page.articles) == sorted(n.id for n in graph.all())
    if graph.leaf is not None:
        assert page.visible_ids() == [node.id for node in graph.path_nodes(graph.leaf)]


def test_large_session_renders_quickly_and_compactly() -> None:
    graph = load_legacy("large-session")
    assert graph.size == 3000
    started = time.perf_counter()
    page = render_html(graph)
    elapsed = time.perf_counter() - started
    size = len(page.encode("utf-8"))
    assert elapsed < 2.0, f"render_html took {elapsed:.2f} s"
    assert size < 5_000_000, f"the page is {size:,} bytes"
    assert page.count("<article ") == 3000


def test_exports() -> None:
    assert memstore.render.__all__ == ["render_html", "render_markdown"]
    assert memstore.render.__doc__


# --- any stored turn renders: the deepest JSON a turn may hold, deeper than recursion goes --------


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH - 3])  # the turn, its blocks, the block
def test_json_nested_deeper_than_recursion_renders_in_every_format(
    database_url: str, tmp_path: Path, depth: int
) -> None:
    from typer.testing import CliRunner

    from memstore import jsjson
    from memstore.cli import app
    from memstore.hashing import hash_node_text
    from memstore.jsonl import head_line, node_line

    deep = "[" * depth + '"core"' + "]" * depth
    turn_json = (
        '{"role":"assistant","blocks":[{"kind":"tool_call","id":"deep","name":"nest","input":'
        f'{deep}}},{{"kind":"tool_result","callId":"deep","output":{deep}}}]}}'
    )
    node_id = hash_node_text(None, turn_json.encode(), START_MS)
    source = tmp_path / "deep.jsonl"
    source.write_text(node_line(node_id, None, turn_json, START_MS) + head_line(node_id))
    later = text("user", "a later session still exports")
    later_node = SessionGraph("later", clock=lambda: START_MS).append(later)
    runner = CliRunner()

    def run(*args: str) -> str:
        result = runner.invoke(app, ["--db", database_url, *args])
        assert result.exit_code == 0, result.output
        return result.stdout

    run("import", str(source))
    with SessionStore(database_url) as store:
        store.append_node("later", later_node)
    html = run("export", "deep", "--format", "html", "-o", "-")
    assert html.count("core") >= 2
    assert "</html>" in html
    markdown = run("export", "deep", "--format", "md", "-o", "-")
    assert "core" in markdown
    assert "**Tool call** `nest`" in markdown
    shown = jsjson.loads(run("show", "deep", "--json"))
    assert shown[0]["id"] == node_id
    assert jsjson.dumps(shown[0]["turn"]) == turn_json
    run("export", "--all", "--format", "html", "-o", str(tmp_path / "all"))
    assert sorted(path.name for path in (tmp_path / "all").iterdir()) == [
        "deep.html",
        "later.html",
    ]
    terminal = run("show", "deep")
    if len(deep) <= SHOWN_CHARS:
        assert "core" in terminal
    else:  # show prints the start of so long a value and says how much more there is
        more = f"… {len(deep) - SHOWN_CHARS:,} more characters (export the session to read all)"
        assert terminal.count(more) == 2
