"""MiniWoB++ task lists and per-task facts, as plain data (no imports, nothing computed).

Every list below names its source. Task names are MiniWoB++ subdomains (``click-test``), the
stem of a page ``miniwob/html/miniwob/<name>.html`` of the installed ``miniwob==1.1.0`` package
(Farama, https://github.com/Farama-Foundation/miniwob-plusplus).

Sources:

* :data:`ALL_TASKS`: BrowserGym's 125 registered MiniWoB++ tasks, the ``subdomain`` of each
  task class in https://github.com/ServiceNow/BrowserGym,
  ``browsergym/miniwob/src/browsergym/miniwob/all.py`` (listed in ``ALL_MINIWOB_TASKS`` of
  ``browsergym/miniwob/src/browsergym/miniwob/__init__.py``; read at commit
  ``9e779f087de9a65668b6974d11f9ce9816026e96``, 2026-03-17). The same 125 names are the
  ``task_name`` column (``miniwob.`` prefix dropped) of
  ``browsergym/experiments/src/browsergym/experiments/benchmark/metadata/miniwob.csv``, and the
  same 125 are registered by miniwob 1.1.0's own ``miniwob/registration.py`` (which adds the
  three ``flight.*`` FlightWoB tasks). Every one has its page in the installed package. The
  package has 5 pages that neither BrowserGym nor miniwob 1.1.0 registers: ``button-delay``,
  ``chase-circle``, ``hover-shape``, ``moving-items``, ``simon-says`` (not listed here).
* :data:`HTML_TASKS`: the 56 tasks of WebN-T5 (Gur et al. 2022, "Understanding HTML with Large
  Language Models", arXiv:2210.03945), WebGUM (Furuta et al. 2023, "Multimodal Web Navigation
  with Instruction-Finetuned Foundation Models", arXiv:2305.11854) and HTML-T5 (Gur et al. 2023,
  "A Real-World WebAgent with Planning, Long Context Understanding, and Program Synthesis",
  arXiv:2307.12856). Taken from the ``webgum_subset`` column (``True``: 56 rows) of BrowserGym's
  ``browsergym/experiments/src/browsergym/experiments/benchmark/metadata/miniwob.csv`` (same
  commit). Not checked here against the papers' own per-task appendix tables, which the tools
  at hand could not read; BrowserGym's column is the machine-readable list used.
* :data:`TRAIN_TASKS` / :data:`HELD_OUT_TASKS`: the ``browsergym_split`` column (``train``: 62,
  ``test``: 63) of the same ``miniwob.csv``. BrowserGym made it by grouping similar tasks (the
  ``similarity_group`` column) and assigning whole groups at random (seed 1337) to either side,
  so no variant of a held-out task is trained on
  (``print_miniwob_train_test_splits`` in
  ``browsergym/experiments/src/browsergym/experiments/benchmark/metadata/scripts.py``).
* :data:`CONTINUOUS_REWARD_TASKS`: read from the task pages' own reward code (the first argument
  of ``core.endEpisode(...)`` in ``miniwob/html/miniwob/*.html``; no page of
  ``miniwob/html/common/*.js`` calls it), cross-checked with the ``**Partial reward:**`` notes of
  ``miniwob/envs/miniwob_envs.py`` (20 notes, 5 of which ask for ``get_thresholded_reward``).
  Thresholds: neither MiniWoB++ nor BrowserGym gives a per-task one. miniwob's
  ``miniwob/reward.py`` ``get_thresholded_reward`` defaults to ``threshold=1.0``; BrowserGym's
  ``AbstractMiniwobTask.validate`` (``browsergym/miniwob/src/browsergym/miniwob/base.py``) counts
  any raw reward ``> 0`` as success for every task (with the comment ``# TODO: shouldn't it be
  0.5?``). Each value below is therefore marked as BrowserGym's, miniwob's or ours.
* :data:`COORDINATE_TASKS`: decided by reading each candidate page (its event handlers: d3 or
  jQuery UI drag, ``sortable``, ``resizable``, ``window.getSelection``, or ``e.pageX`` of a click
  on a bare area). One reason per task in a comment.
* :data:`COLOR_TASKS`: the pages' instruction code (``#query`` text built in ``genProblem``, and
  ``shapes.generalDesc`` of ``miniwob/html/common/shapes.js``) grepped for colour words and
  colour swatches.
* :data:`FARAMA_NONDETERMINISTIC`: the ids that ``miniwob/registration.py`` of the installed
  ``miniwob==1.1.0`` registers with ``nondeterministic=True``, with that file's comments.
"""

from __future__ import annotations

#: BrowserGym's 125 MiniWoB++ tasks, sorted (module docstring). All 125 have a page
#: ``miniwob/html/miniwob/<name>.html`` in the installed miniwob 1.1.0.
ALL_TASKS: tuple[str, ...] = (
    "ascending-numbers",
    "bisect-angle",
    "book-flight",
    "book-flight-nodelay",
    "buy-ticket",
    "choose-date",
    "choose-date-easy",
    "choose-date-medium",
    "choose-date-nodelay",
    "choose-list",
    "circle-center",
    "click-button",
    "click-button-sequence",
    "click-checkboxes",
    "click-checkboxes-large",
    "click-checkboxes-soft",
    "click-checkboxes-transfer",
    "click-collapsible",
    "click-collapsible-2",
    "click-collapsible-2-nodelay",
    "click-collapsible-nodelay",
    "click-color",
    "click-dialog",
    "click-dialog-2",
    "click-link",
    "click-menu",
    "click-menu-2",
    "click-option",
    "click-pie",
    "click-pie-nodelay",
    "click-scroll-list",
    "click-shades",
    "click-shape",
    "click-tab",
    "click-tab-2",
    "click-tab-2-easy",
    "click-tab-2-hard",
    "click-tab-2-medium",
    "click-test",
    "click-test-2",
    "click-test-transfer",
    "click-widget",
    "copy-paste",
    "copy-paste-2",
    "count-shape",
    "count-sides",
    "daily-calendar",
    "drag-box",
    "drag-circle",
    "drag-cube",
    "drag-items",
    "drag-items-grid",
    "drag-shapes",
    "drag-shapes-2",
    "drag-single-shape",
    "drag-sort-numbers",
    "draw-circle",
    "draw-line",
    "email-inbox",
    "email-inbox-delete",
    "email-inbox-forward",
    "email-inbox-forward-nl",
    "email-inbox-forward-nl-turk",
    "email-inbox-important",
    "email-inbox-nl-turk",
    "email-inbox-noscroll",
    "email-inbox-reply",
    "email-inbox-star-reply",
    "enter-date",
    "enter-password",
    "enter-text",
    "enter-text-2",
    "enter-text-dynamic",
    "enter-time",
    "find-greatest",
    "find-midpoint",
    "find-word",
    "focus-text",
    "focus-text-2",
    "form-sequence",
    "form-sequence-2",
    "form-sequence-3",
    "generate-number",
    "grid-coordinate",
    "guess-number",
    "highlight-text",
    "highlight-text-2",
    "hot-cold",
    "identify-shape",
    "login-user",
    "login-user-popup",
    "multi-layouts",
    "multi-orderings",
    "navigate-tree",
    "number-checkboxes",
    "odd-or-even",
    "order-food",
    "phone-book",
    "read-table",
    "read-table-2",
    "resize-textarea",
    "right-angle",
    "scroll-text",
    "scroll-text-2",
    "search-engine",
    "sign-agreement",
    "simple-algebra",
    "simple-arithmetic",
    "social-media",
    "social-media-all",
    "social-media-some",
    "stock-market",
    "terminal",
    "text-editor",
    "text-transform",
    "tic-tac-toe",
    "unicode-test",
    "use-autocomplete",
    "use-autocomplete-nodelay",
    "use-colorwheel",
    "use-colorwheel-2",
    "use-slider",
    "use-slider-2",
    "use-spinner",
    "visual-addition",
)

#: The 56-task subset of WebN-T5, WebGUM and HTML-T5, sorted: BrowserGym's ``miniwob.csv``,
#: column ``webgum_subset`` (module docstring). A subset of :data:`ALL_TASKS`.
HTML_TASKS: tuple[str, ...] = (
    "book-flight",
    "choose-date",
    "choose-date-easy",
    "choose-date-medium",
    "choose-list",
    "click-button",
    "click-button-sequence",
    "click-checkboxes",
    "click-checkboxes-large",
    "click-checkboxes-soft",
    "click-checkboxes-transfer",
    "click-collapsible",
    "click-collapsible-2",
    "click-color",
    "click-dialog",
    "click-dialog-2",
    "click-link",
    "click-menu",
    "click-option",
    "click-pie",
    "click-scroll-list",
    "click-shades",
    "click-shape",
    "click-tab",
    "click-tab-2",
    "click-tab-2-hard",
    "click-test",
    "click-test-2",
    "click-widget",
    "count-shape",
    "email-inbox",
    "email-inbox-forward-nl",
    "email-inbox-forward-nl-turk",
    "email-inbox-nl-turk",
    "enter-date",
    "enter-password",
    "enter-text",
    "enter-text-dynamic",
    "enter-time",
    "focus-text",
    "focus-text-2",
    "grid-coordinate",
    "guess-number",
    "identify-shape",
    "login-user",
    "login-user-popup",
    "multi-layouts",
    "multi-orderings",
    "navigate-tree",
    "search-engine",
    "social-media",
    "social-media-all",
    "social-media-some",
    "tic-tac-toe",
    "use-autocomplete",
    "use-spinner",
)

#: BrowserGym's train split (62 tasks), sorted: ``miniwob.csv``, ``browsergym_split == "train"``.
TRAIN_TASKS: tuple[str, ...] = (
    "book-flight",
    "book-flight-nodelay",
    "buy-ticket",
    "choose-date",
    "choose-date-easy",
    "choose-date-medium",
    "choose-date-nodelay",
    "circle-center",
    "click-checkboxes",
    "click-checkboxes-large",
    "click-checkboxes-soft",
    "click-checkboxes-transfer",
    "click-collapsible",
    "click-collapsible-2",
    "click-collapsible-2-nodelay",
    "click-collapsible-nodelay",
    "click-dialog",
    "click-dialog-2",
    "click-option",
    "click-shades",
    "click-test-2",
    "click-test-transfer",
    "count-shape",
    "daily-calendar",
    "drag-box",
    "drag-items",
    "drag-shapes",
    "drag-shapes-2",
    "drag-single-shape",
    "drag-sort-numbers",
    "draw-circle",
    "draw-line",
    "enter-date",
    "enter-password",
    "enter-text",
    "enter-text-2",
    "enter-text-dynamic",
    "enter-time",
    "find-midpoint",
    "focus-text",
    "focus-text-2",
    "form-sequence",
    "identify-shape",
    "login-user",
    "login-user-popup",
    "multi-layouts",
    "multi-orderings",
    "navigate-tree",
    "odd-or-even",
    "read-table",
    "read-table-2",
    "search-engine",
    "text-editor",
    "text-transform",
    "unicode-test",
    "use-autocomplete",
    "use-autocomplete-nodelay",
    "use-colorwheel",
    "use-colorwheel-2",
    "use-slider",
    "use-slider-2",
    "visual-addition",
)

#: BrowserGym's test split (63 tasks), sorted: ``miniwob.csv``, ``browsergym_split == "test"``.
#: Disjoint from :data:`TRAIN_TASKS`; together they are :data:`ALL_TASKS`.
HELD_OUT_TASKS: tuple[str, ...] = (
    "ascending-numbers",
    "bisect-angle",
    "choose-list",
    "click-button",
    "click-button-sequence",
    "click-color",
    "click-link",
    "click-menu",
    "click-menu-2",
    "click-pie",
    "click-pie-nodelay",
    "click-scroll-list",
    "click-shape",
    "click-tab",
    "click-tab-2",
    "click-tab-2-easy",
    "click-tab-2-hard",
    "click-tab-2-medium",
    "click-test",
    "click-widget",
    "copy-paste",
    "copy-paste-2",
    "count-sides",
    "drag-circle",
    "drag-cube",
    "drag-items-grid",
    "email-inbox",
    "email-inbox-delete",
    "email-inbox-forward",
    "email-inbox-forward-nl",
    "email-inbox-forward-nl-turk",
    "email-inbox-important",
    "email-inbox-nl-turk",
    "email-inbox-noscroll",
    "email-inbox-reply",
    "email-inbox-star-reply",
    "find-greatest",
    "find-word",
    "form-sequence-2",
    "form-sequence-3",
    "generate-number",
    "grid-coordinate",
    "guess-number",
    "highlight-text",
    "highlight-text-2",
    "hot-cold",
    "number-checkboxes",
    "order-food",
    "phone-book",
    "resize-textarea",
    "right-angle",
    "scroll-text",
    "scroll-text-2",
    "sign-agreement",
    "simple-algebra",
    "simple-arithmetic",
    "social-media",
    "social-media-all",
    "social-media-some",
    "stock-market",
    "terminal",
    "tic-tac-toe",
    "use-spinner",
)

#: The tasks of :data:`ALL_TASKS` whose raw reward (the first argument of ``core.endEpisode``,
#: before MiniWoB++'s time discount) can be something other than -1 and 1, each mapped to the
#: raw reward a success needs (success: ``raw_reward >= threshold``). BrowserGym's own rule is
#: ``raw_reward > 0`` for every task (module docstring); it is looser than every value here.
#: "ours" marks a threshold no source gives. Tasks absent from this map give only -1 or 1.
CONTINUOUS_REWARD_TASKS: dict[str, float] = {
    # -- Continuous scores in [0, 1] that an exact answer cannot reliably reach 1.0 on. The first
    # five are the ones miniwob_envs.py says to binarize with get_thresholded_reward (no value
    # given; its default 1.0 is all but unreachable here), right-angle is the same kind of
    # score without that note.
    # (totalAngle - largerAngle) / (totalAngle / 2) when the point lies inside the angle, else -1.
    "bisect-angle": 0.9,  # ours
    # (r - distance) / r for a click inside the circle (r: 25-40 px), else -1; 0.9: 2.5-4 px.
    "circle-center": 0.9,  # ours
    # (30 - distance) / 30 within 30 px of the midpoint, else -1; 0.9: within 3 px.
    "find-midpoint": 0.9,  # ours
    # 1 - mean |RGB channel difference| / 255 of the submitted colour; typing the exact hex
    # gives 1.0, the picker approximates; 0.9: mean channel error <= 25.5.
    "use-colorwheel": 0.9,  # ours
    "use-colorwheel-2": 0.9,  # ours (same reward code as use-colorwheel)
    # (90 - |90 - angle|) / 90 within 45 degrees of a right angle, else -1; 0.9: within 9 deg.
    "right-angle": 0.9,  # ours
    # -- Graded levels from a drawn path.
    # sizeReward (-0.25 / 0.25 / 0.5 / 1) x circleReward (1, 0.9, 0.7, ... by the radius's
    # standard deviation); 0.9: a circle at least 20 px across with radius std dev < 4 px.
    "draw-circle": 0.9,  # ours
    # 0.8 x direction (levels 1 / 0.75 / 0.5 / 0.25 / 0.1 / negative) + 0.2 x nearness to the
    # dot (1 within 6 px, 0.75 / 0.5 / 0.25 / 0.1 / 0 / negative further out); 0.9: a straight
    # line of the right direction passing within 15 px of the dot. The nearness term is measured
    # on the sampled mousemove points of the drag, not on the drawn segment.
    "draw-line": 0.9,  # ours
    # -- Partial credit whose full success is an exact 1.0 (miniwob's default threshold 1.0;
    # BrowserGym's raw > 0 would also count the partial values on the right).
    # Wrong click after k of n numbers in order: k / n (>= 0). Only the full order gives 1.
    "ascending-numbers": 1.0,
    # (#right - #wrong checkboxes) / #checkboxes; 1.0 only when every box is right.
    "click-checkboxes": 1.0,
    "click-checkboxes-large": 1.0,
    "click-checkboxes-soft": 1.0,
    "click-checkboxes-transfer": 1.0,
    # (1.3 x #placed right - #placed wrong) / #shapes, clipped to [-1, 1]: reaches 1.0 once
    # about 87 % of the shapes are placed right.
    "drag-shapes-2": 1.0,
    # Opening a card that is not the greatest and submitting: 0.1.
    "find-greatest": 1.0,
    # Click within 5 px of the hot spot: 1; within 10 px: 0.5; within 40 px: 0.25; else -1.
    "hot-cold": 1.0,
    # Per number (3 of them): +1/3 right, -1/3 wrong, -0.25/3 unanswered (3 x 1/3 == 1.0
    # exactly in IEEE doubles).
    "odd-or-even": 1.0,
    # 0.7 x (right person ? 1 : -1) + 0.3 x (right contact field ? 1 : -1): 1.0, 0.4, -0.4, -1.
    "phone-book": 1.0,
    # -- Only the failures are graded (-0.5 / -0.75), so any threshold in (-0.5, 1] is the same.
    # A ticket neither best nor worst by the asked criterion: -0.5.
    "buy-ticket": 1.0,
    # A draw: -0.5; a loss: -0.75.
    "tic-tac-toe": 1.0,
}

#: Tasks of :data:`ALL_TASKS` that clicks and typing on elements by ref cannot solve: they need
#: a click at a free point of the page, a drag, or a text selection by mouse.
#: Not included, though they look related: use-slider, use-slider-2 and form-sequence (jQuery UI
#: slider handles take ArrowLeft/ArrowRight/Home/End keys once clicked); use-colorwheel and
#: use-colorwheel-2 (the colour is a text input: type the hex); copy-paste and copy-paste-2
#: (type the text, or Control+a/c/v); click-pie, grid-coordinate, click-shape, count-shape,
#: identify-shape and ascending-numbers (their targets are SVG elements, clickable by ref);
#: count-sides (answered with buttons, but the shape is drawn on a <canvas>: it needs the
#: screenshot, not coordinates).
COORDINATE_TASKS: frozenset[str] = frozenset(
    {
        "bisect-angle",  # click a free point of the SVG on the bisector (e.pageX/pageY)
        "circle-center",  # click a free point: the circle's centre
        "daily-calendar",  # an event is made by mousedown, mousemove, mouseup over half-hours
        "drag-box",  # jQuery UI draggable: drag the small box into the large one
        "drag-circle",  # d3 drag of a circle in a direction
        "drag-cube",  # mouse drag rotates a CSS 3D cube
        "drag-items",  # jQuery UI sortable list: drag an item to a position
        "drag-items-grid",  # jQuery UI sortable grid: drag an item to a position
        "drag-shapes",  # d3 drag of shapes into a box
        "drag-shapes-2",  # d3 drag of shapes into the left or right box
        "drag-single-shape",  # d3 drag of one shape in a direction
        "drag-sort-numbers",  # jQuery UI sortable: drag numbers into order
        "draw-circle",  # d3 drag draws a path: a circle around the dot
        "draw-line",  # d3 drag draws a path: a line through the dot
        "find-midpoint",  # click a free point: the midpoint of two dots
        "highlight-text",  # select the paragraph with the mouse (window.getSelection)
        "highlight-text-2",  # select one paragraph with the mouse (window.getSelection)
        "hot-cold",  # hover (mousemove hints) then click a free point of #touch-area
        "resize-textarea",  # jQuery UI resizable: drag the textarea's resize handle
        "right-angle",  # click a free point making a right angle
        # select one word of the Quill editor by mouse before styling it (no Shift+Arrow key;
        # the "everything" variants work with Control+a)
        "text-editor",
    }
)

#: Tasks of :data:`ALL_TASKS` whose instruction names or shows a colour that must be matched
#: against the page's elements, so the observation must show element colours. Not included:
#: read-table and read-table-2 (a "Color" row is plain table text), click-checkboxes-soft
#: ("red" can be a word to find synonyms of), and pages whose only colours are CSS decoration.
COLOR_TASKS: frozenset[str] = frozenset(
    {
        "click-color",  # "Click on the <colour> colored box." (name or a colour swatch)
        "click-shades",  # "Select all the shades of <red|green|blue> and press Submit."
        "click-shape",  # shapes.generalDesc may name the colour: "Click on a red circle"
        "count-shape",  # shapes.generalDesc may name the colour: "How many blue items ..."
        "drag-shapes-2",  # one variant: "Drag all <colour> shapes into the left box, ..."
        "text-editor",  # colour variants: "... give the text X the color <colour>."
        "use-colorwheel",  # "Select <colour name> with the color picker and hit Submit."
        "use-colorwheel-2",  # "Select the following color <swatch> with the color picker ..."
    }
)

#: The ids miniwob 1.1.0's ``miniwob/registration.py`` registers with ``nondeterministic=True``
#: (25), with its comments. The three ``flight.*`` FlightWoB tasks are not in
#: :data:`ALL_TASKS` (BrowserGym does not register them).
FARAMA_NONDETERMINISTIC: frozenset[str] = frozenset(
    {
        # datepicker "today" highlight + toLocaleTimeString() + screenshot jitter
        "book-flight",
        "book-flight-nodelay",
        # jQuery datepicker state persists across resets; showAnim fade
        "choose-date",
        "choose-date-easy",
        "choose-date-medium",
        # jQuery datepicker state persists across resets
        "choose-date-nodelay",
        # (Guess) jQuery UI dialog destroy/recreate cycle may desync Math.random stream
        "click-dialog",
        "click-dialog-2",
        # variable RNG consumption in arc generation
        "click-pie",
        "click-pie-nodelay",
        # retry-loop RNG desync + native select layout
        "click-scroll-list",
        # setInterval physics loop; torque not cleared on reset
        "drag-cube",
        # (Guess) textarea/input focus state not reset; caret captured in screenshot
        "scroll-text",
        # scrollHeight-dependent scrollTop varies with font rendering
        "scroll-text-2",
        # (Guess) twbsPagination plugin state leaks after Search click (.empty() before destroy)
        "search-engine",
        # scrollTop() getter doesn't reset feed scroll between episodes
        "social-media",
        "social-media-all",
        "social-media-some",
        # setInterval cursor flicker + new Date().toDateString() in DOM
        "terminal",
        # iframe loads full airline site; observation depends on async page load timing
        "flight.Alaska",
        "flight.Alaska-auto",
        "flight.AA",
        # scrollTop() getter doesn't reset food menu scroll between episodes
        "order-food",
        # twbsPagination plugin state leaks across resets
        "phone-book",
        # setInterval animation mutates DOM continuously
        "stock-market",
    }
)

#: Tasks whose episodes still differ between two fresh processes given the same seed and actions
#: (measured by ``tests/test_miniwob_determinism.py`` on all 125 tasks, 5 random actions each),
#: with the measured reason. Ranked leaderboards exclude them (they cannot be replayed exactly).
NONDETERMINISTIC_TASKS: dict[str, str] = {
    # drawPrices runs every 100 ms (setInterval) and draws a new random price each time: what a
    # read shows depends on how many intervals have run, i.e. on wall-clock time.
    "stock-market": "prices redrawn every 100 ms by setInterval: the chart depends on wall time",
    # the prompt's cursor (span#input-flicker) is shown and hidden by a setInterval: whether a read
    # shows it depends on wall-clock time.
    "terminal": "the cursor blinks by setInterval: a read shows it or not by wall time",
    # the cube turns on with a momentum that a setInterval animation decays frame by frame
    # (common/special/drag-cube/cube.js:193-216): where a read catches it depends on wall time.
    "drag-cube": "the cube's momentum decays by setInterval: its faces' boxes depend on wall time",
}

#: Tasks whose instructions may name a shape's size ("small", "large": ``common/shapes.js``
#: line 135, the size drawn as a font size or radius, line 89): their observations show each
#: element's rendered size.
SIZE_TASKS: frozenset[str] = frozenset({"click-shape", "count-shape"})

#: Tasks whose episodes differ between two fresh processes only where element boxes are shown
#: (coordinate actions on): the same measurement. Without boxes they replay exactly.
BOX_NONDETERMINISTIC_TASKS: dict[str, str] = {
    # the pie menu's titles end each Raphael animation 1-2 px apart from run to run (frame
    # timing), though every animation has ended when the page is read
    "click-pie": "the animated pie menu's items end 1-2 px apart between runs (frame timing)",
}
