"""Oracles of MiniWoB++'s widget tasks: pie menus, shapes, grids, games, trees, inboxes, feeds."""

from __future__ import annotations

import re

from agentgym.envs.miniwob_oracles.base import NoOracleMove, OracleView, norm, oracle


def _click(element) -> str:
    return f"click[{element.ref}]"


@oracle("click-pie")
def click_pie(view: OracleView) -> str:
    """Expand the wheel with its "+" spreader, then click the title of the slice is the target."""
    target = view.fields.get("target") or view.quoted()[0]
    spreader = view.find(id="wheelnav-divWheel-spreadertitle")
    if spreader and any(c.text == "+" for c in spreader[0].walk()):
        return _click(view.one(id="wheelnav-divWheel-spreader"))
    for title in view.elements():
        if title.id.startswith("wheelnav-divWheel-title-"):
            if any(c.text == target for c in title.walk()):
                return _click(title)
    raise NoOracleMove(f"no slice labelled {target!r}")


_RGB = re.compile(r"rgba?\((\d+), (\d+), (\d+)")
_CHANNEL = {"red": 0, "green": 1, "blue": 2}


def _rgb(colour: str | None) -> tuple[int, int, int] | None:
    match = _RGB.match(colour or "")
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


@oracle("click-shades")
def click_shades(view: OracleView) -> str:
    """Toggle each swatch whose dominant channel is the asked colour (hues 0/120/240 are pure
    red/green/blue shades) until exactly those are ``.selected``, then Submit."""
    colour = view.fields.get("target") or re.search(r"shades of (\w+)", view.utterance)[1]
    channel = _CHANNEL[colour.lower()]
    for swatch in view.find(tag="span"):
        rgb = _rgb(swatch.bg_color)
        if rgb is None:
            continue
        wanted = max(range(3), key=lambda i: rgb[i]) == channel
        if wanted != ("selected" in swatch.classes.split()):
            return _click(swatch)
    return _click(view.submit())


_FIGURES = {"rect": "Rectangle", "circle": "Circle", "polygon": "Triangle"}


@oracle("identify-shape")
def identify_shape(view: OracleView) -> str:
    """Name the one figure by its SVG tag (``rect``/``circle``/``polygon``) or, for ``text``,
    by whether its text is a digit."""
    figure = next(e for e in view.one(id="area_svg").walk() if e.tag != "svg")
    if figure.tag == "text":
        answer = "Number" if (figure.text or "").strip().isdigit() else "Letter"
    else:
        answer = _FIGURES[figure.tag]
    return _click(view.one(tag="button", text=answer))


@oracle("grid-coordinate")
def grid_coordinate(view: OracleView) -> str:
    """Click the grid point whose id is the asked ``(x,y)``."""
    x = view.fields.get("x")
    y = view.fields.get("y")
    if x is None or y is None:
        x, y = re.search(r"\((-?\d+),\s*(-?\d+)\)", view.utterance).groups()
    return _click(view.one(id=f"({x},{y})"))


@oracle("navigate-tree")
def navigate_tree(view: OracleView) -> str:
    """Click the file or folder named as asked where shown; else expand the first collapsed
    folder (an ``li.expandable``) by clicking its name."""
    target = view.fields.get("target") or view.quoted()[0]
    for name in view.find(tag="span"):
        if name.text == target and {"file", "folder"} & set(name.classes.split()):
            return _click(name)
    for item in view.find(tag="li", cls="expandable"):
        for child in item.children:
            if "folder" in child.classes.split():
                return _click(child)
    raise NoOracleMove(f"no {target!r} in the tree and no folder left to open")


def _posts(view: OracleView, user: str) -> list:
    """The ``div.media`` posts whose ``.username`` is ``user``."""
    return [
        post
        for post in view.find(tag="div", cls="media")
        if any(norm(e.text) == norm(user) and "username" in e.classes for e in post.walk())
    ]


def _control(post, cls: str):
    """The element of ``post`` with class ``cls``."""
    for e in post.walk():
        if cls in e.classes.split():
            return e
    raise NoOracleMove(f"no .{cls} in the post")


_SOCIAL_BUTTONS = {
    "reply": "reply",
    "retweet": "retweet",
    "like": "like",
    "share": "share",
    "share via dm": "share",
    "copy link to tweet": "copy",
    "embed tweet": "embed",
    "mute": "menu-user",
    "block": "block-user",
    "report": "report",
}


@oracle("social-media")
def social_media(view: OracleView) -> str:
    """In the first post by the user: click the icon (reply/retweet/like) or, for a menu
    entry, open the post's "more" menu and click the entry once it is shown."""
    user = view.fields.get("user") or re.search(r"(@\S+?),", view.utterance)[1]
    button = view.fields.get("button") or view.quoted()[-1]
    cls = _SOCIAL_BUTTONS[norm(button)]
    post = _posts(view, user)[0]
    if cls in ("reply", "retweet", "like"):
        return _click(_control(post, cls))
    entries = [e for e in post.walk() if e.tag == "li" and cls in e.classes.split()]
    if entries:
        return _click(entries[0])
    return _click(_control(post, "more"))


def _social_toggle(view: OracleView, amount: int | None) -> str:
    """Activate the named button on ``amount`` (all where ``None``) posts by the user, leave
    every other button inactive, then Submit."""
    match = re.search(
        r'"([^"]+)" button on (?:(\d+) posts? |all posts )by (@\S+?) and', view.utterance
    )
    if match is None:
        raise NoOracleMove("instruction not understood")
    cls = _SOCIAL_BUTTONS[norm(match[1])]
    user = match[3]
    mine = {id(p) for p in _posts(view, user)}
    posts = view.find(tag="div", cls="media")
    active = 0
    for post in posts:
        for name in ("reply", "retweet", "like", "share"):
            control = _control(post, name)
            on = "active" in control.classes.split()
            if on and (name != cls or id(post) not in mine):
                return _click(control)
            active += on and name == cls
    for post in posts:
        control = _control(post, cls)
        if id(post) in mine and "active" not in control.classes.split():
            if amount is None or active < amount:
                return _click(control)
    return _click(view.one(tag="button", text="Submit"))


@oracle("social-media-all")
def social_media_all(view: OracleView) -> str:
    """Activate the button on every post by the user (and no other), then Submit."""
    return _social_toggle(view, None)


@oracle("social-media-some")
def social_media_some(view: OracleView) -> str:
    """Activate the button on the asked number of posts by the user (no other), then Submit."""
    match = re.search(r"button on (\d+) posts? by", view.utterance)
    if match is None:
        raise NoOracleMove("instruction names no number of posts")
    return _social_toggle(view, int(match[1]))


_LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
#: The page's opponent (tic-tac-toe.html ``computerMove``): a uniformly random free cell with
#: probability 0.55, else its ``determineSpace`` (complete its own line, else block ours).
_RANDOM_CHANCE = 0.55


def _winner(board: tuple[int, ...], mark: int) -> bool:
    return any(all(board[i] == mark for i in line) for line in _LINES)


def _page_check(board: tuple[int, ...], mark: int) -> int | None:
    """The page's ``determineSpace`` scan for ``mark``: its seven checks (left, middle, right of
    each row; the diagonals; left, middle, right column) in order, the last that found a cell."""
    found = None
    for column in range(3):  # checkLeft/Middle/RightHorizontal: first row that matches
        for row in range(3):
            others = [row * 3 + c for c in range(3) if c != column]
            if board[row * 3 + column] == 0 and all(board[i] == mark for i in others):
                found = row * 3 + column
                break
    for cell, a, b in ((0, 4, 8), (4, 0, 8), (8, 0, 4), (2, 4, 6), (4, 2, 6), (6, 2, 4)):
        if board[cell] == 0 and board[a] == mark and board[b] == mark:
            found = cell  # checkDiagonal: the first match of its six cases
            break
    for column in range(3):  # checkLeft/Middle/RightVertical: first cell that matches
        for row in range(3):
            cell = row * 3 + column
            others = [r * 3 + column for r in range(3) if r != row]
            if board[cell] == 0 and all(board[i] == mark for i in others):
                found = cell
                break
    return found


def _opponent_moves(board: tuple[int, ...]) -> list[tuple[int, float]]:
    """The opponent's (O = -1) moves with their probabilities (tic-tac-toe.html: random with
    probability 0.55, else its own winning cell, else a cell that blocks X, else random)."""
    free = [i for i in range(9) if board[i] == 0]
    smart = _page_check(board, -1)
    if smart is None:
        smart = _page_check(board, 1)
    moves = {i: _RANDOM_CHANCE / len(free) for i in free}
    if smart is not None:
        moves[smart] += 1 - _RANDOM_CHANCE
    else:
        for i in free:
            moves[i] += (1 - _RANDOM_CHANCE) / len(free)
    return list(moves.items())


def _win_chance(board: tuple[int, ...], cache: dict) -> tuple[float, int | None]:
    """X to move: the best chance of winning against the page's opponent, and the move."""
    if board in cache:
        return cache[board]
    best = (0.0, None)
    for cell in (i for i in range(9) if board[i] == 0):
        after = board[:cell] + (1,) + board[cell + 1 :]
        if _winner(after, 1):
            chance = 1.0
        elif 0 not in after:
            chance = 0.0
        else:
            chance = 0.0
            for reply, p in _opponent_moves(after):
                then = after[:reply] + (-1,) + after[reply + 1 :]
                if not _winner(then, -1) and 0 in then:
                    chance += p * _win_chance(then, cache)[0]
        if best[1] is None or chance > best[0]:
            best = (chance, cell)
    cache[board] = best
    return best


@oracle("tic-tac-toe")
def tic_tac_toe(view: OracleView) -> str:
    """Read the board from the cells' ``mark-x``/``mark-o`` classes and play the move with the
    best chance of winning against the page's (partly random) opponent (expectimax)."""
    cells = {}
    board = [0] * 9
    for e in view.elements():
        if e.id.startswith("ttt-"):
            index = int(e.id[4:])
            cells[index] = e
            classes = e.classes.split()
            board[index] = 1 if "mark-x" in classes else -1 if "mark-o" in classes else 0
    move = _win_chance(tuple(board), {})[1]
    if move is None:
        raise NoOracleMove("no free cell")
    return _click(cells[move])


_SHAPE_COLOURS = {
    (255, 0, 0): "red",
    (0, 128, 0): "green",
    (0, 0, 255): "blue",
    (0, 255, 255): "aqua",
    (0, 0, 0): "black",
    (255, 0, 255): "magenta",
    (255, 255, 0): "yellow",
}
_SHAPE_TAGS = {"rect": "rectangle", "circle": "circle", "polygon": "triangle"}
_DESCRIPTION = re.compile(
    r"(?:(large|small) )?(?:(red|green|blue|aqua|black|magenta|yellow) )?(\S+?)s?\s*(?:are|$)"
)


def _shape_query(view: OracleView) -> tuple[str | None, str | None, str]:
    """(size, colour, type) of the instruction's shape description (``shapes.generalDesc``)."""
    if "type" in view.fields:
        return view.fields.get("size"), view.fields.get("color"), view.fields["type"]
    text = re.sub(r"^(Click on an? |How many )", "", view.utterance).rstrip("?. ")
    match = _DESCRIPTION.match(text)
    if match is None:
        raise NoOracleMove("shape description not understood")
    return match[1], match[2], match[3]


def _size(element) -> str:
    """``"large"`` or ``"small"`` from the shown size: ``common/shapes.js`` draws a shape 20 px
    (large) or 10 px (small) across, a letter or digit in a 20 or 10 px font (line 89)."""
    return "large" if max(element.box[2], element.box[3]) > 15 else "small"


def _matching_shapes(view: OracleView) -> list:
    """The shapes of the grid matching the description's size, colour and type (the observation
    shows each shape's size on these tasks)."""
    size, colour, kind = _shape_query(view)
    found = []
    for e in view.one(id="area_svg").walk():
        if e.tag == "text":
            text = (e.text or "").strip()
            e_type, e_name = ("digit" if text.isdigit() else "letter"), text
        elif e.tag in _SHAPE_TAGS:
            e_type, e_name = "shape", _SHAPE_TAGS[e.tag]
        else:
            continue
        if colour is not None and _SHAPE_COLOURS.get(_rgb(e.fill)) != colour:
            continue
        if size and _size(e) != size:
            continue
        if kind in ("item", e_type, e_name):
            found.append(e)
    return found


@oracle("click-shape")
def click_shape(view: OracleView) -> str:
    """Click the first shape of the description's size, colour and type."""
    found = _matching_shapes(view)
    if not found:
        raise NoOracleMove("no shape matches the description")
    return _click(found[0])


@oracle("count-shape")
def count_shape(view: OracleView) -> str:
    """Count the shapes of the description's size, colour and type and click that number."""
    count = len(_matching_shapes(view))
    return _click(view.one(tag="button", text=str(count)))


def _act_on_email(view: OracleView, task: str, by: str, to: str = "", message: str = "") -> str:
    """One step of doing ``task`` (star, delete, forward, reply) to the email by ``by``: in the
    list, star or trash it, or open it; in the open email, click Forward or Reply; in the form,
    fill the recipient or the message, then send."""
    forward_to = view.find(tag="input_text", cls="forward-sender")
    if forward_to:
        if forward_to[0].value != to:
            return f"type[{forward_to[0].ref}, {to}]"
        return _click(view.one(id="send-forward"))
    reply_text = view.find(tag="textarea", id="reply-text")
    if reply_text:
        if reply_text[0].value != message:
            return f"type[{reply_text[0].ref}, {message}]"
        return _click(view.one(id="send-reply"))
    if task in ("forward", "reply"):
        opened = view.find(cls=f"email-{task}")
        if opened:
            return _click(opened[0])
    for thread in view.find(tag="div", cls="email-thread"):
        sender = next((e for e in thread.walk() if "email-sender" in e.classes.split()), None)
        if sender is None or norm(sender.text) != norm(by):
            continue
        if task in ("star", "delete"):
            return _click(_control(thread, "star" if task == "star" else "trash"))
        return _click(sender)
    raise NoOracleMove(f"no email by {by!r} shown")


@oracle("email-inbox")
def email_inbox(view: OracleView) -> str:
    """Do the instruction's task (fields ``task``, ``by``, ``to``, ``message``) step by step."""
    fields = view.fields
    if "task" not in fields or "by" not in fields:
        raise NoOracleMove("instruction not understood")
    return _act_on_email(
        view, fields["task"], fields["by"], fields.get("to", ""), fields.get("message", "")
    )


_DELETE_WORDS = re.compile(r"delet|trash|rid of|remove|recycl|don't want|out of my inbox", re.I)
_STAR_WORDS = re.compile(r"import|imporant|star\b|flag|mark", re.I)
_NAME = re.compile(r"\b([A-Z][a-z]+)(?:'s)?\b")
#: Capitalised words of the instruction templates that are not names.
_NOT_NAMES = frozenset(
    "Alexa Answer Ask Automatically Can Copy Could Create Delete Email Find First Flag For "
    "Forward Foward Get Give Go Hi Highlight If Important In Jend Just Let Locate Look Make "
    "Mark May Navigate Open Please Primary Pull Put Remind Replay Reply Resend Respond Save "
    "Say Search Select Send Set Simply Siri Star Tag Take Tell Text Thanks The There Throw To "
    "Trash Tuesday Will You".split()
)


def _sender(name: str, senders: dict[str, str]) -> str | None:
    """The inbox's spelling of ``name`` (also read as a possessive ``Names``), or ``None``."""
    for candidate in (name, name[:-1] if name.endswith("s") else name):
        if norm(candidate) in senders:
            return senders[norm(candidate)]
    return None


def _nl_instruction(view: OracleView) -> str:
    """The instruction's sentence. (Where the page hands MiniWoB++ a dict ``{'utterance': ...,
    'fields': ...}`` and the observation shows its repr, only the utterance is taken.)"""
    text = view.utterance
    match = re.match(r"""\{'fields': .*'utterance': (['"])(.*)\1\}$""", text)
    if match:
        text = match[2].replace("\\'", "'")
    return text


def _name_role(text: str, start: int, end: int) -> int:
    """How much the name at ``text[start:end]`` reads as the email's sender (> 0) rather than
    its recipient (< 0)."""
    before = text[:start].lower().split()[-2:]
    after = text[end:].lower()
    score = 0
    if before and before[-1] in ("from", "by"):
        score += 3
    if before and before[-1] in ("to", "for") or after.startswith(("'s inbox", "'s email.")):
        score -= 3
    if re.match(r"(?:'s|s)\b", after):
        score += 2
    if re.match(r"\s+(sent|wrote|wants his)", after):
        score += 2
    if re.match(r"\s+(wants|is waiting|needs|must|recieve|receive)", after):
        score -= 2
    return score


def _nl_email(view: OracleView) -> tuple[str, str, str, str]:
    """(task, by, to, message) read from a natural-language email instruction: a quoted
    message means reply; delete and star words; otherwise forward. The sender is a name shown
    in the inbox (or, for a forward, the name that reads most like the sender)."""
    text = _nl_instruction(view)
    senders = {norm(e.text): e.text for e in view.find(cls="email-sender") if e.text}
    if not senders:  # an open form shows no inbox: every name may be the sender
        senders = {norm(m[1]): m[1] for m in _NAME.finditer(text) if m[1] not in _NOT_NAMES}
    if text.count('"') >= 2:
        first, last = text.index('"'), text.rindex('"')
        message = text[first + 1 : last].strip().strip('"').strip()
        rest = text[:first] + text[last + 1 :]
        names = [_sender(m[1], senders) for m in _NAME.finditer(rest)]
        names = [n for n in names if n]
        if not names:
            raise NoOracleMove("no sender named")
        return "reply", names[0], "", message
    names = [m for m in _NAME.finditer(text) if m[1] not in _NOT_NAMES]
    if _DELETE_WORDS.search(text) or _STAR_WORDS.search(text):
        shown = [_sender(m[1], senders) for m in names]
        shown = [n for n in shown if n]
        if not shown:
            raise NoOracleMove("no sender named")
        task = "delete" if _DELETE_WORDS.search(text) else "star"
        return task, shown[0], "", ""
    if len(names) < 2:
        raise NoOracleMove("a forward needs two names")
    ranked = sorted(
        names[:2],
        key=lambda m: (_sender(m[1], senders) is not None, _name_role(text, m.start(1), m.end(1))),
        reverse=True,
    )
    by, to = _sender(ranked[0][1], senders) or ranked[0][1], ranked[1][1]
    return "forward", by, to, ""


@oracle("email-inbox-forward-nl", "email-inbox-forward-nl-turk", "email-inbox-nl-turk")
def email_inbox_nl(view: OracleView) -> str:
    """Read the task from the natural-language instruction (:func:`_nl_email`; the fields are
    not given), then do it step by step as in ``email-inbox``."""
    return _act_on_email(view, *_nl_email(view))
