"""Leaderboard tables as text (``show``), Markdown (``render --markdown``) and static HTML.

The HTML page is one file: a sortable table per leaderboard, its style and a small inline script
(no CDN, nothing fetched). Clicking a column header sorts by it (numbers numerically, by the
``data-value`` of each cell); clicking again reverses; the header's ``aria-sort`` says the order.
Intervals, seeds and dates never wrap; the page fits a 1280-pixel window.

Every text column is printed inert (:func:`inert`), whoever wrote the database: control
characters, which a terminal would obey (``ESC [ 2 J`` clears it), and invisible format
characters (zero-width spaces, bidirectional overrides) and the other default-ignorable code
points (U+3164 HANGUL FILLER, variation selectors) are shown as ``\\x1b``-style escapes. In
Markdown every field is also escaped (:func:`_md`), so that no name becomes a link, an image,
emphasis or HTML.
"""

from __future__ import annotations

import html
import json
import unicodedata
from collections.abc import Mapping, Sequence

from leaderboards.store import Entry

__all__ = [
    "SELF_REPORTED",
    "board_title",
    "inert",
    "invisible",
    "text_tables",
    "markdown_tables",
    "html_page",
]

# Unicode categories printed as escapes: controls (C0, C1, DEL), format characters (zero-width
# spaces and joiners, bidirectional marks, overrides and isolates, soft hyphen), surrogates,
# private use, unassigned code points, line and paragraph separators.
_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})

#: Unicode's Default_Ignorable_Code_Point ranges (DerivedCoreProperties.txt), first and last code
#: point: characters a renderer draws as nothing whatever their category, so they hide in a name
#: as a zero-width space does. Beyond the categories above they hold letters (U+3164 HANGUL
#: FILLER, U+115F, U+1160, U+FFA0) and combining marks (U+034F COMBINING GRAPHEME JOINER, the
#: variation selectors U+FE00-U+FE0F and U+E0100-U+E01EF, U+180B-U+180D, U+17B4, U+17B5).
DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)


def invisible(ch: str) -> bool:
    """Whether ``ch`` is drawn as nothing, or acts on a terminal: a control, format, surrogate,
    private-use, unassigned or separator character (:data:`_INVISIBLE`), or a default-ignorable
    code point (:data:`DEFAULT_IGNORABLE`)."""
    code = ord(ch)
    return unicodedata.category(ch) in _INVISIBLE or any(
        lo <= code <= hi for lo, hi in DEFAULT_IGNORABLE
    )


_SPECIAL = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(ch: str) -> str:
    if ch in _SPECIAL:
        return _SPECIAL[ch]
    code = ord(ch)
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )


def inert(text: object) -> str:
    r"""``text`` (made a string) with every control, format or other invisible character escaped
    (``\x1b``, ``\n``, ``\u202e``, ``\u200b``, ``\u3164``: :func:`invisible`), so that printing
    it cannot move the cursor, recolour or clear a terminal, reorder a line, or hide a character.

    Example:
        >>> inert("ok\x1b[2Jx\n"), inert("a\u200bb")
        ('ok\\x1b[2Jx\\n', 'a\\u200bb')
    """
    text = str(text)
    if text.isprintable() and text.isascii():
        return text
    return "".join(_escape(ch) if invisible(ch) else ch for ch in text)


Boards = Mapping[tuple[str, str], Sequence[Entry]]

#: What the replay does not attest, said under every rendering: it proves which episodes were
#: played (seeds, actions, rewards), not who or what chose the actions.
SELF_REPORTED = (
    "names and agents are self-reported: the replay checks the episodes (seeds, actions and "
    "rewards), not who or what played them"
)


def board_title(env_id: str, env_kwargs: str) -> str:
    """``agentgym/Sokoban-v0`` or ``agentgym/Sokoban-v0 (max_turns=8)`` for non-default args."""
    kwargs = json.loads(env_kwargs)
    if not kwargs:
        return inert(env_id)
    return inert(f"{env_id} ({', '.join(f'{k}={v!r}' for k, v in sorted(kwargs.items()))})")


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _ci(e: Entry) -> str:
    return f"[{_pct(e.ci_low)}, {_pct(e.ci_high)}]"


def _seeds(e: Entry) -> str:
    return f"{e.seed}-{e.seed + e.episodes - 1}"


def _rank(rank: int, e: Entry) -> str:
    return str(rank) if e.ranked else "-"


def _row(rank: int, e: Entry) -> list[str]:
    return [
        _rank(rank, e),
        inert(e.name),
        inert(e.agent_name),
        _pct(e.success_rate),
        _ci(e),
        f"{e.mean_return:.3f}",
        f"{e.mean_turns:.2f}",
        _pct(e.valid_action_rate),
        str(e.episodes),
        _seeds(e),
        inert(e.agentgym_version),
        inert(e.submitted[:10]),
    ]


def _minimum_note(entries: Sequence[Entry]) -> str:
    least = entries[0].min_episodes if entries else 1
    return f"ranked entries need at least {least} episodes; '-': fewer, listed unranked"


_HEADERS = [
    "#",
    "name",
    "agent",
    "success",
    "95% CI",
    "mean return",
    "mean turns",
    "valid actions",
    "episodes",
    "seeds",
    "agentgym",
    "submitted",
]


def text_tables(boards: Boards) -> str:
    """Plain-text ranked tables, one per leaderboard (for the terminal)."""
    if not boards:
        return "the leaderboard is empty: submit a bundle with `python -m leaderboards submit`\n"
    parts = []
    for (env_id, kwargs), entries in boards.items():
        rows = [_HEADERS] + [_row(i, e) for i, e in enumerate(entries, 1)]
        widths = [max(len(r[c]) for r in rows) for c in range(len(_HEADERS))]
        right = {0, 3, 5, 6, 7, 8}
        lines = [board_title(env_id, kwargs)]
        for r in rows:
            cells = [
                cell.rjust(widths[c]) if c in right else cell.ljust(widths[c])
                for c, cell in enumerate(r)
            ]
            lines.append("  ".join(cells).rstrip())
        lines.append(f"({_minimum_note(entries)})")  # every board states it (issue 14)
        parts.append("\n".join(lines))
    parts.append(f"({SELF_REPORTED})")
    return "\n\n".join(parts) + "\n"


# What Markdown (CommonMark and GitHub's) could read as markup in a field: `&`, `<` and `>` as
# entities (raw HTML, entities); the rest backslash-escaped: links and images (`[`, `]`, `(`,
# `)`, `!`), emphasis and strikethrough (`*`, `_`, `~`), code (`` ` ``), math (`$`), table cells
# (`|`), headings and lists (`#`, `+`), and the bare autolinks GitHub makes of `http:`, `www.`
# and `a@b` (`:`, `.`, `@`). A newline ends a table row: a space.
_MD_ESCAPES = {
    **{ch: "\\" + ch for ch in "\\`*_{}[]()#+!|~:@.$"},
    "&": "&amp;",
    "<": "&lt;",
    ">": "&gt;",
    "\n": " ",
    "\r": " ",
}


def _md(text: object) -> str:
    r"""A field in Markdown: every character Markdown could read as markup escaped
    (:data:`_MD_ESCAPES`), on one line, and :func:`inert`.

    Example:
        >>> _md("[x](http://a.b) <b>")
        '\\[x\\]\\(http\\://a\\.b\\) &lt;b&gt;'
    """
    return inert("".join(_MD_ESCAPES.get(ch, ch) for ch in str(text)))


def markdown_tables(boards: Boards) -> str:
    """GitHub-flavoured Markdown: a heading and a table per leaderboard."""
    if not boards:
        return "_The leaderboard is empty._\n"
    parts = []
    headers = ["#", "name", "agent", "success (95% CI)", "mean return", "mean turns", "valid"]
    headers += ["episodes", "seeds"]
    for (env_id, kwargs), entries in boards.items():
        lines = [f"### {_md(board_title(env_id, kwargs))}", "", f"_{_minimum_note(entries)}._", ""]
        lines.append("| " + " | ".join(headers) + " |")
        lines.append(
            "|" + "|".join("---:" if h != "name" and h != "agent" else "---" for h in headers) + "|"
        )
        for i, e in enumerate(entries, 1):
            cells = [
                _rank(i, e),
                _md(e.name),
                _md(e.agent_name),
                f"{_pct(e.success_rate)} {_ci(e)}",
                f"{e.mean_return:.3f}",
                f"{e.mean_turns:.2f}",
                _pct(e.valid_action_rate),
                str(e.episodes),
                _seeds(e),
            ]
            lines.append("| " + " | ".join(cells) + " |")
        parts.append("\n".join(lines))
    parts.append(f"_{SELF_REPORTED[0].upper()}{SELF_REPORTED[1:]}._")
    return "\n\n".join(parts) + "\n"


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1em 1.5em; color: #222; font-size: 14px; }
table { border-collapse: collapse; margin-bottom: 0.6em; }
th, td { padding: 0.25em 0.5em; border-bottom: 1px solid #ddd; text-align: left; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.num, td.nowrap, th { white-space: nowrap; }
td.name { max-width: 11em; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
tr.unranked td { color: #888; }
p.note { color: #555; font-size: 0.9em; margin: 0 0 2em 0; }
th { cursor: pointer; user-select: none; background: #f4f4f4; }
th[aria-sort="ascending"]::after { content: " \\25B2"; }
th[aria-sort="descending"]::after { content: " \\25BC"; }
caption { text-align: left; font-weight: bold; font-size: 1.1em; padding: 0.4em 0; }
"""

# Sorts the rows of the clicked header's table by that column: numeric cells by data-value.
_SCRIPT = """
document.querySelectorAll("table.board").forEach(function (table) {
  table.querySelectorAll("th").forEach(function (th, col) {
    th.addEventListener("click", function () {
      var asc = th.getAttribute("aria-sort") !== "ascending";
      table.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", asc ? "ascending" : "descending");
      var numeric = th.classList.contains("num");
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = a.cells[col].getAttribute("data-value"), y = b.cells[col].getAttribute("data-value");
        var d = numeric ? parseFloat(x) - parseFloat(y) : x.localeCompare(y);
        return asc ? d : -d;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"""


def _td(value: object, text: str, kind: str, title: str | None) -> str:
    """A cell; ``kind`` is its CSS class: ``num`` (right-aligned, sorted numerically),
    ``nowrap`` (text kept on one line) or ``name`` (one line, cut with an ellipsis, whole in
    the tooltip)."""
    cls = f' class="{kind}"' if kind else ""
    if kind == "name" and title is None:
        title = text
    tip = f' title="{html.escape(inert(title))}"' if title else ""
    value = inert(str(value))
    return f'<td{cls} data-value="{html.escape(value)}"{tip}>{html.escape(inert(text))}</td>'


def html_page(boards: Boards, title: str = "agentgym leaderboard") -> str:
    """A standalone HTML page with one sortable table per leaderboard."""
    e = html.escape
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{e(title)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>{e(title)}</h1>",
        "<p>Every entry's episodes were replayed from their seeds and actions before it was "
        f"accepted; {e(SELF_REPORTED)}. Entries rank by the lower bound of the 95% Wilson "
        "interval of their success rate, on the first seeds of the official sequence 0, 1, "
        "2, .... Click a column header to sort.</p>",
    ]
    if not boards:
        out.append("<p>The leaderboard is empty.</p>")
    import agentgym

    out.append(
        f"<p>Rendered by agentgym {e(agentgym.__version__)}. Seeds are the reset seeds of the "
        "episodes; turns: mean turns per episode; valid: the share of turns whose action was "
        "valid. An errored episode counts as a failure with the environment's worst return.</p>"
    )
    columns = [
        ("#", "num"),
        ("name", "name"),
        ("agent", "name"),
        ("success", "num"),
        ("95% CI", "num"),
        ("mean return", "num"),
        ("turns", "num"),
        ("valid", "num"),
        ("episodes", "num"),
        ("seeds", "num"),
        ("agentgym", "nowrap"),
        ("submitted", "nowrap"),
    ]
    for (env_id, kwargs), entries in boards.items():
        out.append(
            f'<table class="board" data-env="{e(inert(env_id))}" data-kwargs="{e(inert(kwargs))}">'
        )
        out.append(f"<caption>{e(board_title(env_id, kwargs))}</caption>")
        out.append("<thead><tr>")
        for name, kind in columns:
            cls = ' class="num"' if kind == "num" else ""
            out.append(f"<th{cls}>{e(name)}</th>")
        out.append("</tr></thead><tbody>")
        for rank, entry in enumerate(entries, 1):
            cells = [
                (rank if entry.ranked else 1e18, _rank(rank, entry)),
                (entry.name, entry.name),
                (entry.agent_name, entry.agent_name),
                (entry.success_rate, _pct(entry.success_rate)),
                (entry.ci_low, _ci(entry)),
                (entry.mean_return, f"{entry.mean_return:.3f}"),
                (entry.mean_turns, f"{entry.mean_turns:.2f}"),
                (entry.valid_action_rate, _pct(entry.valid_action_rate)),
                (entry.episodes, str(entry.episodes)),
                (entry.seed, _seeds(entry)),
                (entry.agentgym_version, entry.agentgym_version),
                (entry.submitted, entry.submitted[:10]),
            ]
            tds = "".join(
                _td(
                    value,
                    text,
                    columns[i][1],
                    entry.agent_description if i == 2 else entry.submitted if i == 11 else None,
                )
                for i, (value, text) in enumerate(cells)
            )
            row_cls = "" if entry.ranked else ' class="unranked"'
            out.append(f"<tr{row_cls}>{tds}</tr>")
        out.append("</tbody></table>")
        out.append(f'<p class="note">{e(_minimum_note(entries))}.</p>')
    out.append(f"<script>{_SCRIPT}</script></body></html>")
    return "\n".join(out) + "\n"
