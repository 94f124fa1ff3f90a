"""Oracles of MiniWoB++'s click tasks: buttons, checkboxes, links, tabs, sections, menus.

Every oracle reads the page afresh each turn (what the observation shows) and returns one action;
multi-step tasks go on from what the page already shows (a ticked box, a focused button, an open
tab or section, a highlighted menu item).
"""

from __future__ import annotations

import re

from agentgym.envs.miniwob_oracles.base import NoOracleMove, OracleView, norm, oracle
from sandboxes.web.miniwob import ElementInfo


def squash(text: str | None) -> str:
    """``text`` with runs of white space collapsed and stripped; case kept (the pages compare
    names exactly, and generated names may differ only in case)."""
    return " ".join((text or "").split())


def full_text(element: ElementInfo) -> str:
    """The element's own text and that of its text runs (the observation's quoted lines under
    it), by :func:`squash`."""
    parts = [element.text or ""]
    parts += [c.text or "" for c in element.children if c.ref < 0]
    return squash(" ".join(parts))


def links(view: OracleView, target: str) -> list[ElementInfo]:
    """The shown ``.alink`` links whose text is exactly ``target`` (case counts: the page rewards
    only the link whose text equals the instruction's, and "In" and "in" may both be links)."""
    return [e for e in view.find(cls="alink") if squash(e.text) == squash(target)]


def labelled_inputs(view: OracleView, tag: str) -> list[tuple[str, ElementInfo]]:
    """``(label text, input)`` for every ``<label>`` holding an input of ``tag``."""
    out = []
    for label in view.find(tag="label"):
        inputs = [c for c in label.children if c.tag == tag]
        if inputs:
            out.append((full_text(label), inputs[0]))
    return out


def instruction_list(view: OracleView, pattern: str) -> list[str]:
    """The comma-separated items the instruction's ``pattern`` (one group) captures; empty for
    ``nothing``."""
    match = re.search(pattern, view.utterance)
    if match is None:
        raise NoOracleMove(f"instruction {view.utterance!r} does not match {pattern!r}")
    items = [squash(item) for item in match.group(1).split(",")]
    return [] if items == ["nothing"] else items


def tick_then_submit(view: OracleView, wanted: set[str]) -> str:
    """Click the first checkbox whose state is wrong (its label in ``wanted`` or not), else
    Submit."""
    for text, box in labelled_inputs(view, "input_checkbox"):
        if bool(box.value) != (text in wanted):
            return f"click[{box.ref}]"
    return f"click[{view.submit().ref}]"


@oracle("click-test-2")
def click_test_2(view: OracleView) -> str:
    """Press the button the instruction names.

    The two buttons are placed at random and TWO (later in the page) is drawn over ONE, so a
    click at ONE's centre can land on TWO. TWO is clicked; ONE is reached from the keyboard
    (Tab from the page focuses ONE, the first button) and pressed with Enter.
    """
    target = view.fields.get("target") or view.utterance.split()[-1].rstrip(".")
    button = view.one(tag="button", text=target)
    if norm(target) != "one":
        return f"click[{button.ref}]"
    return "press[Enter]" if button.focused else "press[Tab]"


@oracle("click-button-sequence")
def click_button_sequence(view: OracleView) -> str:
    """Press ONE from the keyboard (Tab focuses it, the first button; Enter presses it), then
    click TWO. The buttons are placed at random and TWO is drawn over ONE, so a click at ONE's
    centre can land on TWO (14 of seeds 20-119); TWO is always on top. The actions taken so far
    say where the sequence is (ONE focused by Tab and ONE pressed look the same on the page)."""
    if not view.history:
        return "press[Tab]"
    if view.history == ("press[Tab]",):
        return "press[Enter]"
    return f"click[{view.one(tag='button', text='TWO').ref}]"


@oracle("click-checkboxes", "click-checkboxes-large", "click-checkboxes-transfer")
def click_checkboxes(view: OracleView) -> str:
    """Tick exactly the boxes the instruction lists (one per turn), then Submit."""
    wanted = set(instruction_list(view, r"Select (.*) and click Submit"))
    return tick_then_submit(view, wanted)


#: click-checkboxes-soft's word groups (the page's ``SYNONYMS``): every box's word and every
#: word of the instruction is one of these, each box from a different group.
SYNONYMS = (
    ("big", "large", "huge", "enormous", "gigantic"),
    ("small", "tiny", "little", "mini", "petite"),
    ("red", "scarlet", "crimson", "vermillion"),
    ("happy", "cheerful", "joyful", "gleeful", "delighted"),
    ("sad", "unhappy", "sorrowful", "miserable", "tragic"),
    ("angry", "mad", "furious", "irritated"),
    ("evil", "wicked", "immoral", "sinful", "corrupt", "depraved"),
    ("wrong", "incorrect", "mistaken", "erroneous"),
    ("real", "genuine", "actual"),
    ("strange", "odd", "peculiar", "unusual", "weird"),
    ("stop", "cease", "halt", "end", "finish"),
    ("scared", "terrified", "panicked", "fearful", "frightened", "afraid"),
    ("quiet", "calm", "peaceful", "serene", "mild"),
    ("old", "aged", "archaic"),
    ("love", "like", "adore", "favor"),
    ("kill", "murder", "assassinate"),
    ("keep", "retain", "preserve", "sustain", "maintain"),
    ("hide", "conceal", "camouflage"),
    ("hate", "despise", "loathe", "detest", "dislike"),
    ("funny", "humorous", "amusing", "comical", "laughable"),
    ("fat", "fleshy", "plump", "chubby"),
    ("stupid", "dumb", "dull", "unwise"),
    ("delicious", "savory", "delectable", "appetizing"),
    ("cut", "slice", "carve", "chop"),
    ("brave", "courageous", "fearless"),
    ("begin", "start", "initiate", "launch"),
    ("answer", "reply", "response"),
    ("television", "televisions", "tv", "tvs"),
    ("house", "home", "houses", "homes"),
    ("fire", "flame", "fires", "flames"),
    ("pig", "pork", "swine"),
    ("rabbit", "rabbits", "bunny", "bunnies"),
    ("car", "cars", "automobile", "automobiles", "vehicle", "vehicles"),
    ("water",),
)


def _synonyms(word: str) -> set[str]:
    found = {w for group in SYNONYMS if word in group for w in group}
    return found or {word}


@oracle("click-checkboxes-soft")
def click_checkboxes_soft(view: OracleView) -> str:
    """Tick the boxes whose word is a synonym (same word group) of a listed word, then Submit."""
    listed = instruction_list(view, r"Select words similar to (.*) and click Submit")
    wanted = set().union(*(_synonyms(norm(word)) for word in listed)) if listed else set()
    for text, box in labelled_inputs(view, "input_checkbox"):
        if bool(box.value) != (norm(text) in wanted):
            return f"click[{box.ref}]"
    return f"click[{view.submit().ref}]"


@oracle("click-option")
def click_option(view: OracleView) -> str:
    """Pick the radio button the instruction names, then Submit."""
    target = squash(view.fields.get("target") or view.utterance.split()[1])
    for text, radio in labelled_inputs(view, "input_radio"):
        if text == target:
            return f"click[{view.submit().ref}]" if radio.value else f"click[{radio.ref}]"
    raise NoOracleMove(f"no option {target!r}")


#: click-color's colour names (the page's ``COLORS``) as the browser computes them.
COLOURS = {
    "red": "rgb(255, 0, 0)",
    "blue": "rgb(0, 0, 255)",
    "olive": "rgb(128, 128, 0)",
    "lime": "rgb(0, 255, 0)",
    "black": "rgb(0, 0, 0)",
    "white": "rgb(255, 255, 255)",
    "grey": "rgb(128, 128, 128)",
    "gray": "rgb(128, 128, 128)",
    "purple": "rgb(128, 0, 128)",
    "orange": "rgb(255, 165, 0)",
    "yellow": "rgb(255, 255, 0)",
    "cyan": "rgb(0, 255, 255)",
    "pink": "rgb(255, 192, 203)",
    "magenta": "rgb(255, 0, 255)",
}


@oracle("click-color")
def click_color(view: OracleView) -> str:
    """Click the box whose background is the named colour."""
    match = re.search(r"Click on the (.*) colored box", view.utterance)
    name = norm(view.fields.get("target") or (match.group(1) if match else ""))
    colour = COLOURS.get(name, name).replace(" ", "")
    for box in view.find(cls="color"):
        if (box.bg_color or "").replace(" ", "") == colour:
            return f"click[{box.ref}]"
    raise NoOracleMove(f"no box of colour {name!r}")


@oracle("click-dialog")
def click_dialog(view: OracleView) -> str:
    """Click the dialog's close button (its title bar's button, "Close")."""
    for button in view.find(tag="button"):
        if "close" in norm(full_text(button)):
            return f"click[{button.ref}]"
    raise NoOracleMove("no close button")


@oracle("click-dialog-2")
def click_dialog_2(view: OracleView) -> str:
    """Click the dialog button named: "x" is the title bar's close button."""
    target = norm(view.fields.get("target") or view.quoted()[0])
    wanted = "close" if target == "x" else target
    for button in view.find(tag="button"):
        if norm(full_text(button)) == wanted:
            return f"click[{button.ref}]"
    raise NoOracleMove(f"no dialog button {target!r}")


@oracle("click-link")
def click_link(view: OracleView) -> str:
    """Click the link whose text the instruction quotes."""
    target = view.fields.get("target") or view.quoted()[0]
    found = links(view, target)
    if not found:
        raise NoOracleMove(f"no link {target!r}")
    return f"click[{found[0].ref}]"


@oracle("click-widget")
def click_widget(view: OracleView) -> str:
    """Click a widget of the named kind (radio, checkbox, text, textarea, button)."""
    kind = norm(view.fields.get("target") or view.quoted()[0])
    tags = {
        "radio": {"input_radio"},
        "checkbox": {"input_checkbox"},
        "text": {"input_text", "input_input"},
        "textarea": {"textarea"},
        "button": {"button"},
    }[kind]
    return f"click[{view.one(tag=tags).ref}]"


@oracle("click-tab")
def click_tab(view: OracleView) -> str:
    """Click the tab "Tab #N" the instruction names."""
    number = view.fields.get("target") or re.findall(r"\d+", view.utterance)[0]
    return f"click[{view.one(cls='ui-tabs-anchor', text=f'Tab #{number}').ref}]"


def _open_panel(view: OracleView) -> int:
    """The number N of the shown tab panel ``#tabs-N`` (0 when none is shown)."""
    for element in view.elements():
        match = re.fullmatch(r"tabs-(\d+)", element.id)
        if match:
            return int(match.group(1))
    return 0


@oracle("click-tab-2", "click-tab-2-hard")
def click_tab_2(view: OracleView) -> str:
    """Click the quoted link if the open tab shows it; else open the next tab."""
    target = view.fields.get("target") or view.quoted()[0]
    found = links(view, target)
    if found:
        return f"click[{found[0].ref}]"
    tabs = view.find(cls="ui-tabs-anchor")
    shown = _open_panel(view)
    if shown >= len(tabs):
        raise NoOracleMove(f"no link {target!r} in any tab")
    return f"click[{tabs[shown].ref}]"


def _open_section(view: OracleView) -> int | None:
    """How many accordion headers come before the shown section's content (``None``: every
    section is collapsed)."""
    headers = 0
    for element in view.elements():
        if "ui-accordion-content" in element.classes.split():
            return headers
        if "ui-accordion-header" in element.classes.split():
            headers += 1
    return None


@oracle("click-collapsible")
def click_collapsible(view: OracleView) -> str:
    """Expand the section (click its header) unless its content shows, then Submit."""
    if _open_section(view) is not None:
        return f"click[{view.submit().ref}]"
    return f"click[{view.one(tag='h3', cls='ui-accordion-header').ref}]"


@oracle("click-collapsible-2")
def click_collapsible_2(view: OracleView) -> str:
    """Click the quoted link if the open section shows it; else expand the next section."""
    target = view.fields.get("target") or view.quoted()[0]
    found = links(view, target)
    if found:
        return f"click[{found[0].ref}]"
    headers = view.find(cls="ui-accordion-header")
    shown = _open_section(view)
    following = 0 if shown is None else shown
    if following >= len(headers):
        raise NoOracleMove(f"no link {target!r} in any section")
    return f"click[{headers[following].ref}]"


@oracle("click-scroll-list")
def click_scroll_list(view: OracleView) -> str:
    """Choose each named option of the multiple-choice list not chosen yet, un-choose any other
    (the observation shows every chosen option), then Submit."""
    names = instruction_list(view, r"Select (.*) from the scroll list")
    box = view.one(tag="select")
    options = [squash(o) for o in box.options or ()]
    wanted = {options.index(name) for name in names}
    chosen = set(box.selected)
    for index in sorted(wanted ^ chosen):
        return f"select[{box.ref}, {(box.options or ())[index]}]"
    return f"click[{view.submit().ref}]"


def _menu_entries(menu: ElementInfo) -> list[tuple[str, ElementInfo, ElementInfo | None]]:
    """``(name, item wrapper, open submenu or None)`` for each item of the shown ``menu``."""
    entries = []
    for item in menu.children:
        if "ui-menu-item" not in item.classes.split():
            continue
        wrappers = [c for c in item.children if "ui-menu-item-wrapper" in c.classes.split()]
        submenus = [c for c in item.children if c.tag == "ul"]
        if wrappers:
            entries.append((full_text(wrappers[0]), wrappers[0], (submenus or [None])[0]))
    return entries


@oracle("click-menu")
def click_menu(view: OracleView) -> str:
    """Walk the path "A>B>C" down the menu, then click its last item.

    A click on an item with a submenu selects that item (a wrong answer), so submenus are opened
    from the keyboard: Tab focuses the menu (its first item highlighted), ArrowDown/ArrowUp move
    the highlight (the shorter way round: the menu wraps), ArrowRight opens the highlighted
    item's submenu. The last item is clicked once its menu shows.
    """
    path = [squash(name) for name in view.utterance.split("Select", 1)[-1].split(">")]
    menu = view.one(id="menu")
    for depth, name in enumerate(path):
        entries = _menu_entries(menu)
        names = [entry[0] for entry in entries]
        if name not in names:
            raise NoOracleMove(f"no menu item {name!r} among {names}")
        index = names.index(name)
        _, wrapper, submenu = entries[index]
        if depth == len(path) - 1:
            return f"click[{wrapper.ref}]"
        if submenu is not None:
            menu = submenu
            continue
        active = [i for i, e in enumerate(entries) if "ui-state-active" in e[1].classes.split()]
        if not active:
            if depth == 0:
                return "press[Tab]"
            raise NoOracleMove(f"no highlighted item in the submenu of {path[depth - 1]!r}")
        if active[0] == index:
            return "press[ArrowRight]"
        down = (index - active[0]) % len(entries)
        return "press[ArrowDown]" if down <= len(entries) - down else "press[ArrowUp]"
    raise NoOracleMove("empty menu path")
