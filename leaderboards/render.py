"""Leaderboard tables as text (``show``), Markdown (``render --markdown``) and static HTML.

The HTML page is one file: a sortable table per leaderboard, its style and a small inline script
(no CDN, nothing fetched). Clicking a column header sorts by it (numbers numerically, by the
``data-value`` of each cell); clicking again reverses; the header's ``aria-sort`` says the order.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence

from leaderboards.store import Entry

__all__ = ["board_title", "text_tables", "markdown_tables", "html_page"]

Boards = Mapping[tuple[str, str], Sequence[Entry]]


def board_title(env_id: str, env_kwargs: str) -> str:
    """``agentgym/Sokoban-v0`` or ``agentgym/Sokoban-v0 (max_turns=8)`` for non-default args."""
    kwargs = json.loads(env_kwargs)
    if not kwargs:
        return env_id
    return f"{env_id} ({', '.join(f'{k}={v!r}' for k, v in sorted(kwargs.items()))})"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _ci(e: Entry) -> str:
    return f"[{_pct(e.ci_low)}, {_pct(e.ci_high)}]"


def _seeds(e: Entry) -> str:
    return f"{e.seed}-{e.seed + e.episodes - 1}"


def _row(rank: int, e: Entry) -> list[str]:
    return [
        str(rank),
        e.name,
        e.agent_name,
        _pct(e.success_rate),
        _ci(e),
        f"{e.mean_return:.3f}",
        f"{e.mean_turns:.2f}",
        _pct(e.valid_action_rate),
        str(e.episodes),
        _seeds(e),
        e.submitted[:10],
    ]


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
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def _md(text: str) -> str:
    """A table cell: ``|`` escaped, one line, and HTML markup made inert (Markdown renderers
    pass raw HTML through)."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_tables(boards: Boards) -> str:
    """GitHub-flavoured Markdown: a heading and a table per leaderboard."""
    if not boards:
        return "_The leaderboard is empty._\n"
    parts = []
    headers = ["#", "name", "agent", "success (95% CI)", "mean return", "mean turns", "valid"]
    headers += ["episodes"]
    for (env_id, kwargs), entries in boards.items():
        lines = [f"### {_md(board_title(env_id, kwargs))}", ""]
        lines.append("| " + " | ".join(headers) + " |")
        lines.append(
            "|" + "|".join("---:" if h != "name" and h != "agent" else "---" for h in headers) + "|"
        )
        for i, e in enumerate(entries, 1):
            cells = [
                str(i),
                _md(e.name),
                _md(e.agent_name),
                f"{_pct(e.success_rate)} {_ci(e)}",
                f"{e.mean_return:.3f}",
                f"{e.mean_turns:.2f}",
                _pct(e.valid_action_rate),
                str(e.episodes),
            ]
            lines.append("| " + " | ".join(cells) + " |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin-bottom: 2.5em; }
th, td { padding: 0.3em 0.8em; border-bottom: 1px solid #ddd; text-align: left; }
td.num, th.num { text-align: right; }
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


def _td(value: object, text: str, numeric: bool, title: str | None) -> str:
    cls = ' class="num"' if numeric else ""
    tip = f' title="{html.escape(title)}"' if title else ""
    return f'<td{cls} data-value="{html.escape(str(value))}"{tip}>{html.escape(text)}</td>'


def html_page(boards: Boards, title: str = "agentgym leaderboard") -> str:
    """A standalone HTML page with one sortable table per leaderboard."""
    e = html.escape
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{e(title)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>{e(title)}</h1>",
        "<p>Every entry was replayed from its seeds and actions before it was accepted. "
        "Success intervals are 95% Wilson intervals. Click a column header to sort.</p>",
    ]
    if not boards:
        out.append("<p>The leaderboard is empty.</p>")
    columns = [
        ("#", True),
        ("name", False),
        ("agent", False),
        ("success", True),
        ("95% CI", True),
        ("mean return", True),
        ("mean turns", True),
        ("valid actions", True),
        ("episodes", True),
        ("submitted", False),
    ]
    for (env_id, kwargs), entries in boards.items():
        out.append(f'<table class="board" data-env="{e(env_id)}" data-kwargs="{e(kwargs)}">')
        out.append(f"<caption>{e(board_title(env_id, kwargs))}</caption>")
        out.append("<thead><tr>")
        for name, numeric in columns:
            cls = ' class="num"' if numeric else ""
            out.append(f"<th{cls}>{e(name)}</th>")
        out.append("</tr></thead><tbody>")
        for rank, entry in enumerate(entries, 1):
            cells = [
                (rank, str(rank), True),
                (entry.name, entry.name, False),
                (entry.agent_name, entry.agent_name, False),
                (entry.success_rate, _pct(entry.success_rate), True),
                (entry.ci_low, _ci(entry), True),
                (entry.mean_return, f"{entry.mean_return:.3f}", True),
                (entry.mean_turns, f"{entry.mean_turns:.2f}", True),
                (entry.valid_action_rate, _pct(entry.valid_action_rate), True),
                (entry.episodes, str(entry.episodes), True),
                (entry.submitted, entry.submitted[:10], False),
            ]
            tds = "".join(
                _td(value, text, numeric, entry.agent_description if i == 2 else None)
                for i, (value, text, numeric) in enumerate(cells)
            )
            out.append(f"<tr>{tds}</tr>")
        out.append("</tbody></table>")
    out.append(f"<script>{_SCRIPT}</script></body></html>")
    return "\n".join(out) + "\n"
