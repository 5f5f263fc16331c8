"""Model text to HTML: Markdown is rendered, anything that could run script is removed."""

from __future__ import annotations

import re

import pytest

from agents.rendering import markdown_to_safe_html

# Anything that would let the browser run script, in any case.
DANGEROUS = re.compile(r"<\s*(script|iframe|img|svg|object|embed|style)\b|\son\w+\s*=|javascript:|data:", re.I)


def test_markdown_is_rendered() -> None:
    html = markdown_to_safe_html("One **small** step, *today*.\n\n- first\n- second\n\n> quoted\n\n`code`")
    assert "<strong>small</strong>" in html
    assert "<em>today</em>" in html
    assert "<ul>\n<li>first</li>\n<li>second</li>\n</ul>" in html
    assert "<blockquote>" in html
    assert "<code>code</code>" in html


def test_ordered_lists_and_headings_allowed_by_the_list_are_kept() -> None:
    html = markdown_to_safe_html("### Plan\n\n1. one\n2. two")
    assert "<h3>Plan</h3>" in html
    assert "<ol>\n<li>one</li>\n<li>two</li>\n</ol>" in html


def test_disallowed_tags_keep_their_text() -> None:
    html = markdown_to_safe_html("# Big title\n\n<div class='x'>inside</div>")
    assert "<h1" not in html
    assert "<div" not in html
    assert "Big title" in html
    assert "inside" in html


def test_script_is_removed_with_its_content() -> None:
    html = markdown_to_safe_html("Hello <script>alert('pwned')</script> there")
    assert "<script" not in html.lower()
    assert "alert" not in html
    assert "Hello" in html
    assert "there" in html


def test_img_with_onerror_is_removed() -> None:
    html = markdown_to_safe_html("Look <img src=x onerror=alert(1)> here")
    assert "<img" not in html
    assert "onerror" not in html
    assert "Look" in html


def test_iframe_is_removed() -> None:
    html = markdown_to_safe_html('<iframe src="https://evil.example/"></iframe>\n\nafter')
    assert "iframe" not in html
    assert "evil.example" not in html
    assert "<p>after</p>" in html


@pytest.mark.parametrize(
    "text",
    [
        "[click](javascript:alert(1))",
        '<a href="javascript:alert(1)">click</a>',
        '<a href="JaVaScRiPt:alert(1)">click</a>',
        '<a href="java&#x09;script:alert(1)">click</a>',
        "[click](data:text/html;base64,PHNjcmlwdD4=)",
    ],
)
def test_script_links_lose_their_href(text: str) -> None:
    html = markdown_to_safe_html(text)
    assert "href" not in html
    assert "script:" not in html.lower()
    assert "click</a>" in html


@pytest.mark.parametrize(
    "text",
    [
        '<p onclick="alert(1)">para</p>',
        '<a href="https://example.com" onmouseover="alert(1)">link</a>',
        '<strong onmouseenter="alert(1)">bold</strong>',
        "<svg onload=alert(1)>",
        '<em style="background:url(javascript:alert(1))">styled</em>',
    ],
)
def test_inline_event_handlers_and_styles_are_removed(text: str) -> None:
    html = markdown_to_safe_html(text)
    assert DANGEROUS.search(html) is None, html
    assert "alert" not in html


def test_links_get_rel_noopener() -> None:
    html = markdown_to_safe_html("See [the guide](https://example.com/guide).")
    assert html == ('<p>See <a href="https://example.com/guide" rel="noopener noreferrer nofollow">the guide</a>.</p>')


def test_an_existing_rel_or_target_is_replaced() -> None:
    html = markdown_to_safe_html('<a href="https://example.com" target="_blank" rel="opener">x</a>')
    assert 'rel="noopener noreferrer nofollow"' in html
    assert "target" not in html
    assert 'rel="opener"' not in html


@pytest.mark.parametrize("url", ["https://example.com/a", "http://example.com/b", "mailto:coach@example.com"])
def test_safe_link_schemes_are_kept(url: str) -> None:
    html = markdown_to_safe_html(f"[here]({url})")
    assert f'href="{url}"' in html
