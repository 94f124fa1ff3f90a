"""Oracles of MiniWoB++'s form tasks: text fields, dates, times, logins, pickers and searches."""

from __future__ import annotations

import re

from agentgym.envs.miniwob_oracles.base import (
    NoOracleMove,
    OracleView,
    fields_get,
    norm,
    oracle,
    typed,
)
from sandboxes.web.miniwob import KEYS, ElementInfo


def _fill_then(view: OracleView, pairs: list[tuple[ElementInfo, str]], button: ElementInfo) -> str:
    """Type each ``(field, text)`` pair not yet holding its text, then click ``button``."""
    for field, text in pairs:
        move = typed(view, field, text)
        if move is not None:
            return move
    return f"click[{button.ref}]"


@oracle("enter-text-dynamic")
def enter_text_dynamic(view: OracleView) -> str:
    """Type the quoted text into the field, then Submit."""
    field = view.one(tag="input_text")
    return _fill_then(view, [(field, fields_get(view.fields, "target"))], view.submit())


@oracle("enter-password")
def enter_password(view: OracleView) -> str:
    """Type the password into both password fields, then Submit."""
    target = fields_get(view.fields, "target")
    pairs = [(field, target) for field in view.find(tag="input_password")]
    return _fill_then(view, pairs, view.submit())


@oracle("login-user", "login-user-popup")
def login_user(view: OracleView) -> str:
    """Close any pop-up (its Cancel button), type username and password, then click the
    form's button (Login, or OK on the pop-up variant)."""
    for popup in view.find(id="popup"):
        for e in popup.walk():
            if e.tag in ("button", "input_button") and norm(e.text) in ("cancel", "close", "x"):
                return f"click[{e.ref}]"
    pairs = [
        (view.one(id="username"), fields_get(view.fields, "username")),
        (view.one(id="password"), fields_get(view.fields, "password")),
    ]
    return _fill_then(view, pairs, view.one(id="subbtn"))


@oracle("focus-text")
def focus_text(view: OracleView) -> str:
    """Click the text box (focusing it ends the episode)."""
    return f"click[{view.one(tag='input_text').ref}]"


@oracle("focus-text-2")
def focus_text_2(view: OracleView) -> str:
    """Click the n-th text box, n from the instruction."""
    n = int(fields_get(view.fields, "target"))
    return f"click[{view.find(tag='input_text')[n - 1].ref}]"


@oracle("enter-date")
def enter_date(view: OracleView) -> str:
    """Type the date's digits (MMDDYYYY) into the date input, whose value then reads
    YYYY-MM-DD; then Submit."""
    month, day, year = fields_get(view.fields, "target").split("/")
    field = view.one(tag="input_date")
    if field.value != f"{year}-{month}-{day}":
        return f"type[{field.ref}, {month}{day}{year}]"
    return f"click[{view.submit().ref}]"


@oracle("enter-time")
def enter_time(view: OracleView) -> str:
    """Type the time as hh mm and AM/PM into the time input, whose value then reads HH:MM
    (24-hour); then Submit."""
    match = re.search(r"(\d+):(\d+)\s*([AP]M)", view.utterance, re.IGNORECASE)
    if match is None:
        raise NoOracleMove(f"no time in {view.utterance!r}")
    hour, minute, half = int(match.group(1)), match.group(2), match.group(3).upper()
    hour24 = hour % 12 + (12 if half == "PM" else 0)
    field = view.one(tag="input_time")
    if field.value != f"{hour24:02d}:{minute}":
        return f"type[{field.ref}, {hour:02d}{minute}{half}]"
    return f"click[{view.submit().ref}]"


def _guess_interval(last: int, higher: bool) -> tuple[int, int]:
    """The interval left after feedback on guess ``last``: the binary search over 0-9 that
    :func:`guess_number` plays guesses each number on exactly one path, so the last guess and
    its feedback alone give the bounds."""
    lo, hi = 0, 9
    while True:
        guess = (lo + hi) // 2
        if guess == last:
            return (guess + 1, hi) if higher else (lo, guess - 1)
        if last > guess:
            lo = guess + 1
        else:
            hi = guess - 1
        if lo > hi:
            raise NoOracleMove(f"guess {last} is not on the search path")


@oracle("guess-number")
def guess_number(view: OracleView) -> str:
    """Binary search over 0-9: the next guess from the shown feedback (``div#lower`` or
    ``div#higher``: "The number is lower than [span] N"), typed into the field, then submitted."""
    lo, hi = 0, 9
    for direction in ("lower", "higher"):
        for feedback in view.find(id=direction):
            last = " ".join(e.text or "" for e in feedback.walk() if e.tag == "span")
            if last.strip().lstrip("-").isdigit():
                lo, hi = _guess_interval(int(last), direction == "higher")
    guess = str((lo + hi) // 2)
    field = view.one(tag="input_number")
    return typed(view, field, guess) or f"click[{view.submit().ref}]"


_MONTHS = [
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
]  # fmt: skip


def _pick_date(view: OracleView, field: ElementInfo, month: int, day: int, year: int) -> str | None:
    """The next step to set the jQuery UI date picker ``field`` to the date: open the calendar
    (click the read-only field), step Prev/Next until its title shows the month and year, click
    the day; with the field focused and ``Control+PageUp`` among the keys, jump back a year
    first when the target is more than six months back. ``None`` once the field holds the
    date."""
    if field.value == f"{month:02d}/{day:02d}/{year}":
        return None
    if not view.find(id="ui-datepicker-div"):
        return f"click[{field.ref}]"
    shown_month = _MONTHS.index(norm(view.one(cls="ui-datepicker-month").text)) + 1
    shown_year = int(norm(view.one(cls="ui-datepicker-year").text))
    step = (year - shown_year) * 12 + month - shown_month
    if step < -6 and field.focused and "Control+PageUp" in KEYS:
        return "press[Control+PageUp]"  # back a year (clamped to the picker's first month)
    if step < 0:
        return f"click[{view.one(cls='ui-datepicker-prev').ref}]"
    if step > 0:
        return f"click[{view.one(cls='ui-datepicker-next').ref}]"
    calendar = view.one(cls="ui-datepicker-calendar")
    for e in calendar.walk():
        if e.tag == "a" and norm(e.text) == str(day):
            return f"click[{e.ref}]"
    raise NoOracleMove(f"no day {day} in the calendar")


@oracle("choose-date", "choose-date-easy", "choose-date-medium")
def choose_date(view: OracleView) -> str:
    """Set the date with the calendar (:func:`_pick_date`), then Submit. The calendar opens on
    December 2016, one Prev click a month: without ``Control+PageUp`` (jQuery UI's previous
    year) among the keys, a date before May needs more than 10 turns."""
    month, day, year = (int(fields_get(view.fields, k)) for k in ("month", "day", "year"))
    move = _pick_date(view, view.one(id="datepicker"), month, day, year)
    return move or f"click[{view.submit().ref}]"


@oracle("use-spinner")
def use_spinner(view: OracleView) -> str:
    """Focus the spinner's field, then step it with keys (the page blocks typing, not the
    spinner's own keys): PageUp/PageDown move by 10, ArrowUp/ArrowDown by 1, fewest presses
    first; then Submit."""
    target = int(fields_get(view.fields, "target"))
    field = view.one(id="spinner")
    try:
        value = int(str(field.value).strip() or "0")
    except ValueError:
        value = None
    if value == target:
        return f"click[{view.submit().ref}]"
    if not field.focused or value is None:
        return f"click[{field.ref}]"
    diff = target - value
    pages = round(diff / 10)
    if pages > 0:
        return "press[PageUp]"
    if pages < 0:
        return "press[PageDown]"
    return "press[ArrowUp]" if diff > 0 else "press[ArrowDown]"


@oracle("use-autocomplete")
def use_autocomplete(view: OracleView) -> str:
    """Type the required start; from the suggestion menu click an item that also has the
    required end; then Submit."""
    start = fields_get(view.fields, "start")
    end = view.fields.get("end", "")
    field = view.one(id="tags")

    def fits(text: str | None) -> bool:
        return bool(text) and text.startswith(start) and text.endswith(end)

    if fits(str(field.value or "")):
        return f"click[{view.submit().ref}]"
    for menu in view.find(cls="ui-autocomplete"):
        for item in menu.walk():
            if item.ref > 0 and fits(item.text):
                return f"click[{item.ref}]"
    return f"type[{field.ref}, {start}]"


@oracle("search-engine")
def search_engine(view: OracleView) -> str:
    """Type the query and click Search; go to the results page holding the n-th result
    (three a page) with the pagination links; click the result there."""
    query = fields_get(view.fields, "query")
    rank = int(fields_get(view.fields, "rank"))
    field = view.one(id="search-text")
    titles = view.find(cls="search-title")
    if str(field.value) != query or not titles:
        return typed(view, field, query) or f"click[{view.one(id='search').ref}]"
    page = (rank - 1) // 3 + 1
    active = [e for li in view.find(cls="active") for e in li.walk() if norm(e.text).isdigit()]
    shown = int(norm(active[0].text)) if active else 1
    if shown == page:
        return f"click[{titles[(rank - 1) % 3].ref}]"
    for link in view.find(tag="a", text=str(page)):
        return f"click[{link.ref}]"
    raise NoOracleMove(f"no link to results page {page}")


def _parents(view: OracleView) -> dict[int, ElementInfo]:
    """Each element's ref -> its parent element."""
    parents: dict[int, ElementInfo] = {}
    for e in view.page.root.walk():
        for child in e.children:
            parents[child.ref] = e
    return parents


def _label(field: ElementInfo, parents: dict[int, ElementInfo]) -> str:
    """The text of the smallest ancestor of ``field`` that holds some text: its row's label."""
    node = field
    while node.ref in parents:
        node = parents[node.ref]
        text = " ".join(e.text or "" for e in node.walk() if e is not field)
        if norm(text):
            return norm(text)
    return ""


@oracle("multi-layouts", "multi-orderings")
def multi_layouts(view: OracleView) -> str:
    """Fill each text field with the value its row's label asks for (genre; director; year or
    "released date"), then click the Submit / Search / Go! control."""
    parents = _parents(view)
    pairs = []
    for field in view.find(tag="input_text"):
        label = _label(field, parents)
        if "genre" in label:
            pairs.append((field, fields_get(view.fields, "genre")))
        elif "director" in label:
            pairs.append((field, fields_get(view.fields, "director")))
        elif "year" in label or "date" in label:
            pairs.append((field, fields_get(view.fields, "year")))
        else:
            raise NoOracleMove(f"field [{field.ref}] has no known label ({label!r})")
    buttons = [e for e in view.elements() if norm(e.text) in ("submit", "search", "go!")]
    if not buttons:
        raise NoOracleMove("no submit control")
    return _fill_then(view, pairs, buttons[-1])


def _autocomplete(view: OracleView, field: ElementInfo, target: str) -> str | None:
    """The next step to fill the autocomplete ``field`` with a suggestion containing ``target``:
    type ``target``, then click the first suggestion containing it. ``None`` once done."""
    value = str(field.value or "")
    if target in value and value != target:
        return None
    for menu in view.find(cls="ui-autocomplete"):
        for item in menu.walk():
            if item.ref > 0 and target in (item.text or ""):
                return f"click[{item.ref}]"
    return typed(view, field, target) or "press[ArrowDown]"


def _minutes(text: str | None) -> int:
    """``"2h 5m"`` -> 125."""
    match = re.search(r"(\d+)h\s*(\d+)m", text or "")
    if match is None:
        raise NoOracleMove(f"no duration in {text!r}")
    return int(match.group(1)) * 60 + int(match.group(2))


@oracle("book-flight")
def book_flight(view: OracleView) -> str:
    """Fill From and To from their suggestion menus (type the city or code, click the entry),
    pick the date on the calendar, Search; then book the flight with the lowest price or the
    shortest duration."""
    flights = view.find(cls="flight")
    if flights:
        best, best_key = None, None
        for flight in flights:
            nodes = flight.walk()
            button = next(e for e in nodes if "flight-price" in e.classes.split())
            if fields_get(view.fields, "criterion") == "cheapest":
                match = re.search(r"\$(\d+)", button.text or "")
                key = int(match.group(1)) if match else 10**9
            else:
                duration = next(e for e in nodes if "time-duration" in e.classes.split())
                key = _minutes(duration.text)
            if best_key is None or key < best_key:
                best, best_key = button, key
        if best is None:
            raise NoOracleMove("no flight to book")
        return f"click[{best.ref}]"
    month, day, year = (int(x) for x in fields_get(view.fields, "date").split("/"))
    move = (
        _autocomplete(view, view.one(id="flight-from"), fields_get(view.fields, "from"))
        or _autocomplete(view, view.one(id="flight-to"), fields_get(view.fields, "to"))
        or _pick_date(view, view.one(id="datepicker"), month, day, year)
    )
    return move or f"click[{view.one(id='search').ref}]"
