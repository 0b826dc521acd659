"""Links in Markdown someone else wrote (a teacher's lesson), for tests/test_views_text.py (`safe_links`)
and tests/data/links_app.py (the same, rendered by Streamlit in chromium)."""

# Links whose target is not http(s) or relative, in every spelling CommonMark reads as one: inline,
# image, reference (its definition's target on the same line or the next), autolink, angle-bracketed,
# and a scheme hidden by character references, backslash escapes, case, spaces and a tab.
DEAD = ["[a](data:text/html,<script>alert(1)</script>)", "[a](javascript:alert(1))", "![i](data:image/png;base64,AA)",
        "<data:text/html,x>", "[a][r]\n\n[r]: data:x", "[a][r]\n\n[r]:\n  data:x", "[a](<data:x>)",
        "[a](java&#115;cript:x)", "[a](data&#58;x)", "[a](data&colon;x)", "[a](data\\:x)", "[a](  DATA:x)",
        "[a](da&#x09;ta:x)", "[a]( &#32;data:x)", "[a](mailto:x@y.org)", "<mailto:x@y.org>",
        "[a](file:///etc/passwd)", "[x\\\\](data:y)"]
# Links left live (their targets, as the page's anchors hold them), and text that only looks like one.
LIVE = {"[a](https://example.org)": "https://example.org", "[a](http://x)": "http://x", "[a](./rel)": "./rel",
        "[a](/abs)": "/abs", "[a](#frag)": "#frag", "[a](//host/x)": "//host/x",
        "<https://example.org>": "https://example.org", "[a][r]\n\n[r]: https://x.org": "https://x.org",
        "[a](note.md)": "note.md", "a < b: c": None, "x\\](data:x)": None, "\\<data:x>": None}
