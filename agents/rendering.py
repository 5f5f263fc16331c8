"""Model output to HTML: Markdown rendered on the server, then sanitised.

Model text is untrusted. nh3 (the Ammonia sanitiser) keeps only harmless tags and drops
every attribute that could run script, so `<script>` or `onerror=` arrive inert.
"""

import markdown
import nh3

ALLOWED_TAGS = {"p", "br", "strong", "em", "ul", "ol", "li", "blockquote", "code", "pre", "h3", "h4", "a", "hr"}
ALLOWED_ATTRIBUTES: dict[str, set[str]] = {"a": {"href", "title"}}


def markdown_to_safe_html(text: str) -> str:
    html = markdown.markdown(text, extensions=["sane_lists"], output_format="html")
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
