"""Mathematical answer checking for the math environments: exact where the numbers are exact.

An answer is read in three steps, the same for the reference and for the model's answer (the
hedge rules of step 1 aside); a
text of more than :data:`MAX_ANSWER_CHARS` (1000) code points goes through step 0 first:

0. **A whole reply.** A longer text, up to :data:`MAX_REPLY_CHARS` (16,000), is a worked reply
   (Math-Verify reads whole replies): only its *final region* is read, found in one linear pass
   and read by the steps below as the whole reply would be, and it must itself be at most
   :data:`MAX_ANSWER_CHARS` long (else the reply is not read). The region is every answer marker
   the reply has, so that a hedge stays a hedge: its boxed answers (every distinct run, below; a
   number that a hedge joins to them; a box never closed), the last ``final answer is`` with what
   step 1 reads after it, and ``#### X``. Two markers anywhere in the reply that differ, or a
   hedging sentence anywhere after its answer (step 1), are found over the whole reply in the
   same pass: the region is then those two markers, or the answer and that sentence, read alone
   (a hedge: ``\\boxed{3}``, 1,360 characters, ``Answer: 4``). A reply without any is read by
   its last :data:`MAX_ANSWER_CHARS` characters, from the first line start in them that is
   outside math and follows the end of a sentence, else from the first sentence start outside
   math; never
   where a hedge crosses the break (``3 or\\n4``, ``3.\\nOr 4``), and never from within a sentence
   (a cut there could split a hedge): without such a start the reply is not read. Longer text is
   not read.
1. **The final span.** The contents of the boxes if any, several joined as the parts of one
   answer (``\\boxed{2}`` and ``\\boxed{3}`` is ``2, 3``; a repeat counts once). A box is
   ``\\boxed``, ``\\fbox``, ``\\framebox`` (its optional ``[...]`` arguments skipped),
   ``\\colorbox{c}{...}`` or ``\\fcolorbox{c}{c}{...}`` alike, with its argument in braces, after
   white space or not (``\\boxed {4}``), or one token as TeX reads it (``\\boxed 4`` boxes 4,
   and so does ``\\boxed 42``). A TeX comment in a box goes as TeX removes it: an unescaped
   ``%`` to the end of its line, with the spaces before it (math mode ignores them), the line
   break and the next line's leading spaces (``\\boxed{4 % \\n 3}`` boxes ``43``); a ``%``
   with no line break after it in the box, and ``\\%``, are percent signs (``\\boxed{25\\%}``).
   Boxes with only separators between them
   (``,`` ``;`` ``and`` ``or``, spaces, math delimiters, ``\\quad``, ``\\text{and}``, a unit before a separator: ``\\boxed{1} papers
   and \\boxed{2} bins``) are one *run*; runs of different answers (``\\boxed{3} or maybe
   \\boxed{4}``, ``\\fbox{1} no no \\boxed{2}``) are a *hedge* (below). The same run restated
   after other text (a draft's ``\\boxed{-2} and \\boxed{1}``, then the same at the end) is no
   hedge but one answer (Math-Verify reads the last run).
   Else the text after the last ``####`` (GSM8K's convention); else what follows the last
   ``final answer is``: the math that opens it where its sentence ends after that math
   (``$28$.``, a line break, the end), else all of it up to a later ``####`` or box (``$3$ or
   $4$.`` is the list ``3 or 4``; Minerva's ``Final Answer: The final answer is $X$. I hope it is
   correct.``; Math-Verify reads the last); else a number in
   single emphasis that ends the text (``The answer is *42*.``, ``_42_``, ``***42***``) and
   follows any bold span, else the last markdown-bold span (``**42**``, ``__42__``) if any, with
   the emphasised values before it that only separators part from it, as a run of boxes (``The
   answer is **3** or **4**`` is ``3, 4``); else
   the whole text. Math delimiters (``$``, ``\\(``, ``\\[``) and emphasis marks go, so do
   ``\\text{}``, ``\\mathrm{}``, ``\\textbf{}`` and ``\\mathbf{}`` around their content, ``\\left``
   and ``\\right`` go (``\\left( 3, \\frac{\\pi}{2} \\right)`` is a pair), ``\\$`` is
   a currency sign, U+2212 is ``-``, a Unicode vulgar fraction is the fraction it writes and,
   glued to digits, the mixed number (``1½`` is 3/2), a full-width colon is a colon (``答案：3``),
   invisible characters between digits go
   (``3\\u200b0`` is 30, as the reader sees it), and trailing punctuation (``42.``, ``7,``; a
   ``!`` after a space) is dropped; a leading ``.`` stays (``.4`` is 0.4) and so does a ``!``
   after a number (``6!`` is 720). Inline math that spans a line break (``$ \\n 9 \\n $``, as in LaTeX, where
   it is an error; display math ``$$...$$`` may) makes an answer without a ``\\boxed{}`` read but
   equal to nothing.

   **A hedge** names several answers where one is given; an answer that hedges is read but
   equal to nothing, never rewarded (a reference is trusted text: of these rules only that of
   runs applies to it, so that a MATH solution's ``$x=1/5$, or $\\boxed{20}$ percent`` is 20).
   The hedges: runs of boxes with different answers; a box never closed (``\\boxed{3} or
   \\boxed{4``: it holds the rest of the text); a number, or any value up to the next space,
   that a *hedge join* ties to the boxes, or to the emphasised answer, from outside them and
   that does not read equal to them (``\\boxed{3} or 4``, ``3 or maybe \\boxed{4}``, ``**3** or
   perhaps **4**``, ``\\boxed{A} or maybe B``, ``\\boxed{2} or \\sqrt{2}``; not ``\\boxed{3} or,
   equivalently, 3.0``; words are left out); two *answer markers* whose values differ, in any
   order, with a box or without, each read by steps 2 and 3 (``Answer: x = 4`` is 4;
   ``\\frac{1}{2}`` and ``0.5`` agree; one that is words is left out). The markers: the boxes,
   every ``####`` line, the last ``final answer is``, every sentence without a box after an
   answer word (``answer is``, ``Answer:``, ``Ans:``, ``**Answer:** 4``, ``<answer>``,
   ``<final_answer>``, ``the answer should be``, ``Antwort:``, ``Antwoord:``, ``Réponse :``,
   ``Respuesta:``, ``Odpowiedź:``, ``Cevap:``, ``Jawaban:``, ``Đáp án:``, ``答案：``, ``答え：``,
   ``답:``, ...; a heading alone on its line, ``### Final Answer``; a marker whose line ends
   there has its value on the next line: ``Answer:\\n4``), and
   every emphasised value (``**4**``, ``__4__``, ``*4*``, ``\\textbf{}``, ``\\mathbf{}``,
   ``\\emph{}``, ``\\textit{}``, ``\\underline{}``, ``<b>``, ``<strong>``, ``<em>``, ``<i>``,
   ``<u>``) after the last box or alone on its line, and the emphasised answer of the final span
   (``\\boxed{3}`` then ``The answer is 4.``; ``**3**`` then ``The answer is 4.``; ``\\boxed{3}``
   then ``\\textbf{4}``; the same marker twice, ``Answer: 4`` then ``Answer: 3``); a number
   in parentheses right after the boxes or a ``####`` value (``\\boxed{3} (4)``, ``#### 3 (4)``);
   a sentence after the answer (after the last box, else after the last answer word's
   sentence) that names a number other than the answer (with its sign: ``3`` then ``it might be
   -3``) and holds "or", a hedge word, ``might``, ``could``, ``may``, ``possible`` (not in a
   bound: ``the smallest possible``), ``also``, ``instead`` or ``either`` (``\\boxed{3}``
   then ``But it might be 4.``; ``The answer is 3. 4 is also possible.``; a number in arithmetic,
   ``We could also check that 1+1=2.``, is none, nor one that is a command's argument equal to
   the answer: ``\\boxed{\\sqrt{2}} or \\sqrt{2}``); two different numbers in
   the cells of a markdown table (``| 4 | 3 |``); math outside a box that changes it (read,
   equal to nothing): before it a sign, operator, ``{`` or ``\\frac`` (``$-\\boxed{3}$``,
   ``\\frac{1}{\\boxed{3}}``), a relation (``x > \\boxed{3}``, ``\\ge``, ``\\approx``, ``≠``; not
   ``=``, an arrow, ``\\implies``, nor ``\\equiv \\boxed{9} \\pmod{11}``), a negation or bound in
   words (``not``, ``isn't``, ``at least``), a digit or point glued to it (``1\\boxed{3}``,
   ``0.\\boxed{3}``); after it, one test on what follows in its sentence and line: anything but
   sentence punctuation, white space, a closing math delimiter, a ``\\pmod``, words (a unit,
   ``\\boxed{3} apples``, ``\\boxed{5}\\text{ cm}``, ``is the answer``) or the next sentence or
   line: an operator, digit or point (``$\\boxed{3} + 1$``, ``\\boxed{3}.5``), a command
   (``\\boxed{3}\\pi``, ``\\boxed{3}\\frac{1}{2}``), a letter glued to it that is no unit
   (``\\boxed{3}x``, ``\\boxed{3}e2``, ``\\boxed{3}M``), a change word (step 3: ``\\boxed{3}
   squared``, ``\\boxed{3}\\text{ thousand}``, ``\\boxed{3}千``, ``B.C.E.``, ``‰``), ``and`` and a
   number (``\\boxed{3} and 1/2``, ``and a half``), or a factorial or power after it or its
   closing brackets (``\\boxed{3}!``, ``(\\boxed{3})^2``; ``$\\boxed{3}$!`` ends a sentence); and
   a span read as a sentence
   (step 3) whose sentence with the last digit ties two different numbers by a hedge join (``3 or
   maybe 4``, ``It is 3, or possibly 4.``, ``The answer is 3.\\nOr 4.``: a sentence that opens
   with "or" continues the one before; a hedge word anywhere in that sentence with two different
   numbers: ``Maybe 4, but the answer is 3.``, ``(4 or) 3``). A number is digits with its sign
   (``3, but it might be -3``: two numbers) or a number word (``3 or four``, ``\\boxed{3} or
   four``; ``zero`` to ``twenty`` and the tens).
   A hedge join is "or" in any spelling (``or``, ``ou``, ``oder``, ``o``, ``или``, ``或``,
   ``atau``, ``أو``, ``∨``, ``\\lor``, ``||``, ``else``, ``if not``, ...; letters that look Latin
   read as Latin: a Cyrillic ``оr`` is ``or``; accents and invisible characters do not count:
   ``ór`` is ``or``), with up to four words such as ``maybe``
   or ``it could be`` after it or up to four words between commas (``3 or, depending on
   interpretation, 4``), or a hedge word (``maybe``, ``perhaps``, ``possibly``, ``probably``,
   ``alternatively``, ``otherwise``), with any punctuation, brackets or symbols around it (``1/2
   [or -1/2]``, ``\\boxed{3} or ... 4``, ``or = 4``, ``or -> 4``); a ``\\footnote{`` is no barrier
   (``\\boxed{3}\\footnote{or 4}``).
   No hedge: "or" inside a word (``for``, ``more``, ``therefore``), a number joined to one equal
   to it (``1/2, or equivalently 0.5``; ``x = 3 or x = 3`` is the list of two parts it writes,
   step 2), a hedge in the work before the sentence of the answer (``Is it 3 or 4? ... The answer
   is 4.``), and a list read whole by step 2 (``3 or 4``, ``x = 1 or x = 2``: two parts, which
   are no one value).
2. **Its parts.** ``(a, b)`` and ``[a, b]`` (spaced or not: ``(0,1)``; its parts parted by
   ``;`` alike: ``(0;-2;6)``) are an ordered *tuple*;
   ``[a, b)`` and ``(a, b]`` (spaced or not: ``[-2,7)``) are a half-open *interval*;
   ``\\{a, b\\}`` and ``{a, b}`` are a *set*; otherwise the span splits at top-level ``,`` ``;``
   ``and`` ``or`` into a *list* (one part: a *scalar*); a tuple among the parts is one part
   (``(2, 2), (6, 2)``; ``(0;-2;6)``). A comma between digit groups of three (``1,234``,
   ``1{,}234``, ``11,\\! 111``; never after a lone ``0``: ``0,111``) is a thousands separator, and
   so is a single space between such groups (``1 000``; ``7 8`` stays two numbers); a pair in
   brackets stays a pair (``(12,102)``). Any other comma separates parts (``3, 4`` and ``3,4``
   are two numbers), except that a span that is just ``digits,digits`` (``1000,99``, ``0,111``)
   is read with a decimal comma against a reference of one number (1000.99; a European
   writer's decimal, the only reading that can equal one number). Names before an ``=`` go when
   they name a tuple or a ratio (``(p, q) = (3, 2)`` is ``(3, 2)``, ``V_1 : V_2 = 11 : 21`` is
   ``11 : 21``), and so does ``x \\in`` before a range (``x \\in [-2, 7]``). One value in
   parentheses is that value (``(2)`` is 2); a value with ``\\pm`` is the set of its values
   (``\\pm 2021`` is ``\\{-2021, 2021\\}``).
   A part written with a top-level ``=`` (``\\sum_{k=1}^{9} k`` has none) is its last side where
   the other sides name it (``x = 1 or x = 2``, ``a = 12``), where names open a chain of numbers
   that all agree (``x = 6/2 = 3`` and ``x = 4 - 1 = 3`` are 3) or where no side has a variable
   (``8 - 5 = 3`` is 3; in a box every side must have the same value: ``\\boxed{4 = 3}`` and
   ``\\boxed{1 + 1 = 3}`` name two values and equal nothing, while ``$x = 5+5+1 = 7 = 11$`` outside
   a box is read by its last side, as Math-Verify reads it); any other equation is a *relation*
   (``y = 2x + 1``, ``x^2 - 1 = 0``), compared only as an equation.
3. **Each part's value.** Numbers are read exactly by this module: integers, decimals (as the
   exact decimal written), ``a/b``, ``\\frac{a}{b}``, mixed numbers (``3 1/2`` and
   ``3\\frac{1}{2}`` are 7/2), scientific forms (``3e-9``, ``3 \\times 10^{-9}``), with a currency
   sign before or a unit after (``$18.00``, ``12 apples``, ``5\\text{ cm}``, ``5 m/s``), or ``%``
   (``25%`` matches 25 and 0.25), repeating decimals (``0.\\overline{3}`` is 1/3), and numerals
   with a base subscript, never the number of their digits (``1011_2`` and ``1011_{2}`` are
   eleven in base 2; bases 2 to 36 with digits valid for the base, else equal to nothing; in an
   answer, a numeral with another subscript, ``1011_{(2)}`` or ``(1011)_2``, or in an expression,
   ``1011_2 + 1``, equals nothing: math-verify reads the digits, 1011 and 1012). A *change
   word* after a number is no unit: the part equals nothing. The change words, one list for
   every reader (a plain number, a sentence, a ``####`` value, what follows a box): scale words
   in any language (``3 thousand``, ``3\\text{ million}``, ``3 dozen``, ``3 k``, ``3 K``, ``3 M``,
   ``3 bn``, ``3 score``, ``3 gross``, ``3 lakh``, ``3 tausend``, ``3 Hundert``, ``3 Mio.``, ``3
   Mrd.``, ``3 millones``, ``3 тысяч``, ``3 млн``, ``3万``, ``3千``, ``3億``), fraction words (``3
   quarters``, ``3 hundredths``, ``3 and a half``), powers (``3 squared``, ``3 cubed``, ``3
   factorial``) and words that change the sign (``3 negative``, ``3 below``, ``3 BC``, ``3
   B.C.E.``, ``3 per mille``, ``3 ‰``, ``3 ppm``). So does a relation with no left side (``\\neq
   3``, ``\\geq 3``, ``\\to 3``, ``> 3``). Plain numbers side by side (``7 8``) are no value:
   never 15, 56 or 78. Anything else (``\\sqrt{50}``, ``2^10``, ``6!``, ``\\pi/2``, ``x+1``, matrices,
   inequalities ``x \\geq 5``, ``x \\neq 3``: the ``=`` of ``<=``, ``>=``, ``!=`` is no equation's)
   is parsed by Hugging Face's ``math-verify`` into SymPy; sums, products and factorials within the bounds
   below are evaluated. A part with other words (``I think 41, no wait, 42``) makes the span a
   *sentence*: then the answer is the tuple of plain numbers it ends with (``The point is (2,
   3).``), else the single value ``math-verify`` reads last in it (here 42; a tuple it reads is a
   tuple: ``... the ordered pair is $(7, 6)$.``), unless the sentence hedges (above) or negates
   that number (``not 42``, ``isn't 42``, ``anything but 42``, ``other than 42``, ``except 42``;
   letters that look Latin read as Latin; but ``x \\neq 3`` is a relation): then it has no value
   (wrong). In an answer, a number so read is read as the rest of its sentence (the one with the
   last digit) lets it stand: with a sign written apart (``minus 3``, ``negative 3``, ``- 3``,
   ``− 3`` are -3), its scientific notation (``3e1`` is 30; ``3 \\times 10^2`` and ``3×10²`` are
   300), its ``%`` and an escaped dollar before it (``\\$42``); ``5, not 4`` is 5. It equals
   nothing where the rest of the sentence could change it: a different number after it (``3
   hours and 20 minutes``, ``3:20``, ``3 (4)``, ``3 (mod 7)``; with its sign: ``3, but it might
   be -3``), a number word in parentheses after it (``3 (four)``), a scale word or one that
   changes its sign or scale (``3 thousand``, ``3k``, ``3 below zero``, ``3 BC``, ``3 per
   mille``, ``3 ‰``, ``3 ppm``; no unit after a number alone either), arithmetic or a bound
   after it (``3 squared``, ``3 or more``, ``3 is also possible``, ``alternatively``) or a
   relation or negation just before it (``greater than 3``, ``at most 3``, ``half of 3``,
   ``cannot be 3``, ``different from 3``, ``не 3``, ``x \\geq 3``, ``→ 3``); numbers earlier in
   the sentence do not count (``I think 41, no wait, 42``; ``With 2 or more red balls, the count is 15``) unless
   they make one quantity with it (``3:20``, ``3 hours and 20``). It equals nothing too with a
   letter glued to it (``3x``, ``3M``; a unit such as ``12cm`` is read), ``-ish``, a second decimal point (``3.000.000``), an
   operator or relation after it (``3 + x``, ``3 < x``), a scale, fraction or bound word after it
   (``3 bn``, ``3 score``, ``3 quarters``, ``3 and a half``, ``3 and above``, ``3 less than x``),
   an approximation or an operation in words before it (``\\approx 3``, ``≈ 3``, ``almost 3``,
   ``just under 3``, ``upwards of 3``, ``tends to 3``, ``twice 2``, ``the reciprocal of 3``, ``a
   multiple of 3``), a LaTeX command, a radical sign or a function word just before it, whose
   argument it is, with its arguments, limits, powers and spacing between (``\\sqrt 3``, ``\\frac
   12``, ``\\frac{1} 3``, ``\\sqrt[3] 8``, ``\\log_2 8``, ``\\sin^{2} 3``, ``\\log~ 3``,
   ``\\operatorname{sqrt} 3``, ``√ 9``, ``∛ 8``, ``sqrt 3``, ``ln 3``; not a command that formats
   or spaces: ``\\text``, ``\\quad``), a bare ``^`` or ``_`` just before it, whose exponent it
   is (``e^ 3``), or an ``=`` before it whose left side is an
   expression with a variable (``x + 1 = 3``, ``2x = 3``, ``x^2 = 3``: a relation, as in a box;
   ``x = 3`` and ``2 + 3 = 5`` are read); so does a box holding ``\\approx 3``.

   **Plain-text notation** is judged as Math-Verify judges it, never more leniently. Functions
   and constants written as words (``exp(2)``, ``pi``, ``pi/2``, ``sqrt(2)``, ``ln(2)``, and
   ``e^2`` outside math delimiters) are no expression ``math-verify`` reads, so an answer written
   so is not read (in an environment: an invalid turn, as ``twelve``); next to a number their
   letters are variables (``2*pi``, ``2pi`` and ``2 pi`` are 2·p·i: never 2π, and never 2, which
   Math-Verify reads in ``2pi``). LaTeX is read (``\\pi``, ``$e^2$``, ``\\sqrt{2}``,
   ``\\exp(2)``), and so is the symbol in ``2π``. Why: the reward agrees with the Math-Verify
   graders that evaluate the models trained on it, and words are ambiguous (``e`` is often a
   variable, ``log`` has no fixed base, and ``pi`` in LaTeX is p times i).

   **LaTeX commands and symbols in an answer.** ``math-verify`` drops a command it does not know
   and reads what is left (``3 \\equiv 4``, ``3 \\lor 4``, ``3\\hphantom{ or 4}`` and
   ``\\begin{cases} 3 \\\\ 4 \\end{cases}`` all read 4). So in an answer (a reference is trusted
   text) every command of a part read by steps 2 and 3, and of what ``math-verify`` reads in a
   sentence, must be on a closed list of those the reading models, else that part is read but
   equal to nothing: ``\\frac``, ``\\dfrac``, ``\\tfrac``, ``\\cfrac`` and ``\\binom`` with their
   two arguments, ``\\sqrt`` and ``\\overline`` with theirs, none empty, nor an index (``3
   \\frac 4``, ``3 \\sqrt{} 4``, ``\\sqrt{{}} 9`` and ``\\sqrt[] 9`` read 4 or 9); an argument
   without braces only where math-verify reads it as TeX does, one token of ``\\frac`` or of
   ``\\sqrt`` without index (``\\frac12``, ``\\sqrt 9``; ``\\binom 5 3`` reads 3, ``\\binom 53``
   53, ``\\sqrt[3] 8`` 8); ``\\cdot``, ``\\times``, ``\\div``, ``\\pi``, ``\\infty``, Greek
   letters; ``\\sin`` to ``\\tanh``, ``\\log``, ``\\ln``, ``\\exp``, and ``\\max``, ``\\min``,
   ``\\gcd``, ``\\lcm``, ``\\det`` before their argument; ``\\sum`` and ``\\prod`` with their
   limits; ``\\lfloor``/``\\rfloor``, ``\\lceil``/``\\rceil``, ``\\lvert``/``\\rvert`` in pairs,
   around something; ``\\circ`` as a degree sign after ``^`` (``90^\\circ``, not ``3 \\circ 4``)
   and ``\\degree`` ending its part (``\\boxed{90\\degree}`` is 90); ``\\left``, ``\\right`` and
   sizing (``\\bigl(3\\bigr)`` is 3); spacing (``\\,``
   ``\\;`` ``\\quad`` ...); ``\\text``, ``\\mathrm``, ``\\mathbf``, ``\\textbf``, ``\\textnormal``,
   ``\\textrm``, ``\\mbox`` around one group of words without braces (read as words; ``3
   \\text{{ or }} 4`` reads 4); ``\\%``, ``\\$``, ``\\{``, ``\\}``;
   ``\\displaystyle``; ``\\approx`` (below); and the matrix environments ``pmatrix``,
   ``bmatrix``, ``vmatrix``, ``matrix``, ``array``, ``smallmatrix`` (``\\\\`` only in them).
   Relation and set commands (``\\le``, ``\\ge``, ``\\lt``, ``\\ne``, ``\\in``, ``\\notin``,
   ``\\subset``, ``\\cup``, ``\\cap``, ``\\setminus``, ``\\pm``, ``\\mp``, ``\\emptyset``,
   ``\\mathbb``) count only where the value read keeps them (``x \\le 3``, ``(-\\infty, 1) \\cup
   (2, \\infty)``, ``\\pm 2``, ``\\mathbb{R}``): in a plain number they are a second value
   dropped (``3 \\cap 4``, ``3 \\mathbb{R}``). Any other command or environment (``\\equiv``,
   ``\\to``, ``\\Rightarrow``, ``\\mid``, ``\\dots``, ``\\lor``, ``\\textsf``, ``\\substack``,
   ``cases``, and hidden or coloured text: ``\\phantom``, ``\\hphantom``, ``\\textcolor``,
   ``\\color``) makes the part equal nothing,
   and so do unbalanced brackets (``3 ) 4``, what ``\\left(3 \\right. 4`` leaves). Symbols
   likewise: besides ASCII letters, digits, ``+-*/^_=<>()[]{},.;:!'%$``, currency signs, white
   space and Greek letters (``2π``), a part may hold only ``≤ ≥ ≠ ± ∓`` (in the roles of their
   commands), ``|`` in pairs around something (``|-3|``), ``&`` in a matrix, ``×`` in a
   scientific form (``3 × 10^5``), and ``°`` or ``~`` before no digit (``90°``); never ``==``,
   ``->``, ``=>`` or a ``_`` set apart (``3 × 4``, ``3 ∨ 4``, ``3 ∩ 4``, ``3 | 4``, ``3 -> 4``
   and ``(-∞, 4)`` read 4: equal to nothing), nor two such symbols that math-verify drops one
   of, spaced or not (``3 = = 4``, ``3 - > 4``, ``3 < > 4``, ``3 :: 4``, ``3 ^ ^ 4``; ``<=``,
   ``>=``, ``= -`` are kept). Nor may a part hold two numbers that no operator it evaluates
   joins: an empty group between them (``3 {} 4``, ``3 () 4``, ``3 [] 4``, ``3^{} 4``), a
   power's exponent then a number (``10^0 4``), or a number then brackets of numbers (``3
   (4)``, ``3 ( 4 )``, ``3 \\left( 4 \\right)``, ``3 (-4)``, ``2(3+4)``: all equal nothing;
   math-verify reads some as products, some as the first or last number; ``2(x+1)`` is read).
   In a box, as every side of an ``=`` must agree, ``A \\approx B`` is ``A`` only where the number
   ``B`` is ``A`` rounded to the digits written (``\\frac{1}{3} \\approx 0.33``), else nothing
   (``\\boxed{3 \\approx 4}``); outside a box it is read as Math-Verify reads it, by its left side
   (its table's ``$x = 5+5+1 = 1/3 \\approx 11$`` is 1/3). An answer so refused is still paid
   where it is written as the reference is, spaces aside (``x \\equiv 3 \\pmod{7}`` for itself: a
   copy of trusted text).

Comparison:

* A scalar equals a scalar; a tuple equals a tuple (or a list) of the same length part by part,
  in order; a pair's brackets count, as either may be a range with open or closed ends (``(0,
  1)`` is not ``[0, 1]``, nor ``x \\in (0, 1)`` ``x \\in [0, 1]``, as Math-Verify reads them; nor
  does a bare ``0, 1`` answer either), a longer tuple's do not (``[1, 2, 3]`` is ``(1, 2, 3)``,
  as there); never a set (``\\{2, 7\\}`` is not ``(2, 7)``, ``\\pm 1`` not ``[-1, 1]``, ``x
  \\in (1, 2)`` not ``\\{1, 2\\}``; bare braces, ``{1, 3}``, are a TeX group that prints ``1,
  3``, and still equal a tuple); an interval equals an interval with the same brackets and
  ends; a list or set equals a list or set of the same parts. Parts joined by ``or`` and sets are order-free (solutions:
  ``x = 1 or x = 2`` = ``x = 2 or x = 1``); other lists are ordered unless the task says the
  order is free (``unordered=True``). Every part is required: ``20`` is not ``12 and 20``, and
  ``(0, 1)`` is not ``1``. A numeral with a base subscript equals one of the same base and
  value (a bare number is in base 10: ``12_{10}`` is 12), and a bare whole number whose digits,
  read in the reference's base, make its value (``204`` answers ``204_5``, as Math-Verify reads
  both); ``1011_3`` is not ``1011_2``, nor ``12_3`` 12, nor ``11`` ``1011_2``.
* Exact numbers compare exactly (``3e-9`` is not ``4e-9``; ``18.00`` is ``18``; ``0.333`` is
  not ``1/3``). A decimal inside an expression is the exact number it writes, and an expression
  whose value is a rational number is that number, compared exactly (``12345679.0 + 0`` is not
  12345678, nor ``1.000001 \\cdot 1`` 1, nor ``\\frac{10^{900}+1}{10^{900}}`` or ``1 + 10^{-900}``
  1). A decimal written alone that approximates a number with no finite decimal form (``1/3``,
  ``\\sqrt{2}``) matches it within a relative :data:`REL_TOL` (six significant digits:
  ``0.333333`` is ``1/3``; ``0.333333 + 0`` is exact, and not ``1/3``). Only values that are not
  rational (as SymPy evaluates them) compare to :data:`EXACT_DIGITS` significant digits
  (``5\\sqrt{2}`` is ``\\sqrt{50}``; ``\\sqrt{9.000001}`` is not 3); expressions with variables
  through ``math-verify``.
* A chained inequality in the *reference* (``0 < x < 1``, ``-2 \\le x \\le 7``, ``0 \\le x < 1``)
  equals the range written with the same brackets (``(0, 1)``, ``[-2, 7]``, ``[0, 1)``; not
  ``[0, 1]`` for ``0 < x < 1``); an inequality in the *answer* is compared only as a relation
  (Math-Verify's default: a range reference is not answered by an inequality). Two values that
  ``math-verify`` reads but that are no number (``12:00``) are equal when written the same.
* A relation equals only an equation whose ``lhs - rhs`` is a nonzero constant times its own
  (``y = 2x + 1`` is ``2x - y + 1 = 0``; ``x^2 - 1 = 0`` is ``x^2 = 1``), in either role: the bare
  right-hand side ``2x + 1`` is not ``y = 2x + 1``, nor ``0`` the equation ``x^2 - 1 = 0``.

Time, in two layers:

* **Bounds, before anything is evaluated** (deterministic: the same verdict on any machine). On
  the length: over :data:`MAX_REPLY_CHARS` code points a text is not read; over
  :data:`MAX_ANSWER_CHARS` only its final region is (step 0), found in one linear pass (no
  regular expression backtracks over the reply: a hostile reply of 16,000 characters, such as
  unclosed ``\\boxed{`` openings, ``$`` signs, braces or digits, takes milliseconds). On the text
  read (on the boxed content where there is a ``\\boxed{}``: a worked solution around it is
  not read), before it is parsed: a
  nesting of brackets deeper than :data:`MAX_NESTING`, more than :data:`MAX_COMMANDS` LaTeX
  commands or :data:`MAX_BIG_OPERATORS` sums and products, an integral or a limit (math-verify
  reads ``\\int_{x=1}^{2} x dx`` as its bound, 1), a matrix of more than
  :data:`MAX_MATRIX_CELLS` cells, a run of more than :data:`MAX_DIGIT_RUN` digits or a tower of
  powers higher than :data:`MAX_TOWER` make it read but never compared (wrong). On the SymPy
  value, before it is evaluated: a power with an exponent over :data:`MAX_EXPONENT`, a power of
  an expression with variables over :data:`MAX_SYMBOLIC_EXPONENT` (a 40th power of a four-term
  sum would expand to 12,341 terms), a factorial of more than :data:`MAX_FACTORIAL`, a numeric
  binomial SymPy left unevaluated (``\\binom{10^{9000}}{10^{8999}}``), a sum or product of more
  than :data:`MAX_SUM_TERMS` terms without a closed form, an expression of more than
  :data:`MAX_NODES` nodes, or a number of more than :data:`MAX_DIGITS` digits before or after the
  point (``(2^{10000})^{10000}``, ``e^{10^{9000}}``: its size is estimated from the exponents,
  bottom up, never computed) is likewise wrong.
* **A deadline** for what the bounds miss (``\\sum_{k=1}^{\\infty} \\sin(\\sin(k))``: SymPy
  searches for its value without end). Every public function reads and compares in a worker
  process (:mod:`agentgym.deadline`) that is killed after ``timeout_s`` seconds of wall time,
  :data:`CHECK_TIMEOUT_S` (5 s) by default: the answer is then wrong (``timed_out``), never an
  exception. Answers within the bounds take milliseconds, so only an answer near the limit can
  get another verdict on a much slower machine. The limit does not count the start of a worker
  (about a second, once per process and after each answer that reached the limit). The worker
  adds about 0.1 ms per call (``benchmarks/bench_grading.py``); ``math-verify``'s own timeouts
  (``signal.alarm``, main thread only) stay off. A value that cannot be sent back from the worker
  (a SymPy set that does not unpickle) is read as too large; the verdict computed there stands.

Measured against Math-Verify's own test table (``tests/test_math_verify_table.py``): no false
positive, 96.2 % agreement over all 266 rows that use the library's default options (256
agree, whole worked replies of up to 11,422 characters included); each other divergence is a
rule above (a hedge, a repeated part, six significant digits) listed there with its reason.

A reference (never an answer) that cannot be read as written, and has no words, is read inside
math delimiters (``x^2+1`` as ``$x^2+1$``): :func:`parse_reference`.

Nothing here raises on any text: an answer that cannot be read gives ``None`` from
:func:`parse_answer` and ``False`` from :func:`check_answer`. An answer is read when
``math-verify`` finds an expression in it (``c`` and ``+6`` are not read, ``2x`` is) or when it is
one of the forms above that ``math-verify`` misses: a final emphasised number (``*12*``), a tuple of
plain numbers written without spaces (``(0,1)``, ``The point is (2,3).``), a half-open interval
of numbers (``[-2,7)``).

``math-verify`` is an optional dependency (``pip install 'agentgym[math]'``), imported on first use.

Example:
    >>> check_answer("18", "The total is $18.00.")
    True
    >>> check_answer("1/2", "\\\\frac{1}{2}"), check_answer("1/2", "0.49")
    (True, False)
    >>> check_answer("12 and 20", "20"), check_answer("(0, 1)", "1"), check_answer("3e-9", "4e-9")
    (False, False, False)
    >>> parse_answer("no number here") is None
    True
    >>> check_answer("y = 2x + 1", "2x + 1"), check_answer("720", "6!"), check_answer("0.4", ".4")
    (False, True, True)

Sources: Hugging Face ``math-verify`` (https://github.com/huggingface/Math-Verify), Apache-2.0;
Faulhaber's formula for sums of powers (SymPy's ``summation``).
"""

from __future__ import annotations

import bisect
import functools
import logging
import math
import pickle
import re
import threading
import unicodedata
from dataclasses import dataclass, replace
from fractions import Fraction
from itertools import combinations
from typing import Any

from agentgym.deadline import DeadlineExceeded, WorkerCrashed, WorkerPool

__all__ = [
    "CHECK_TIMEOUT_S",
    "MAX_ANSWER_CHARS",
    "MAX_REPLY_CHARS",
    "MAX_NESTING",
    "MAX_COMMANDS",
    "MAX_BIG_OPERATORS",
    "MAX_MATRIX_CELLS",
    "MAX_DIGIT_RUN",
    "MAX_TOWER",
    "MAX_FACTORIAL",
    "MAX_SUM_TERMS",
    "MAX_EXPONENT",
    "MAX_SYMBOLIC_EXPONENT",
    "MAX_DIGITS",
    "MAX_NODES",
    "REL_TOL",
    "EXACT_DIGITS",
    "Value",
    "ParsedAnswer",
    "parse_answer",
    "parse_reference",
    "check_answer",
    "grade_answer",
    "final_answer_text",
    "final_span",
    "require_math_verify",
]

#: Wall-clock seconds one call of :func:`parse_answer`, :func:`parse_reference`,
#: :func:`check_answer` or :func:`grade_answer` may spend reading and comparing (in a worker
#: process, killed when the time is up: the answer is then wrong). Answers within the bounds below
#: take milliseconds; this is the backstop for what the bounds miss.
CHECK_TIMEOUT_S = 5.0
#: Longest answer text (in code points) that is read as it stands, and longest final region of
#: a longer reply (:data:`MAX_REPLY_CHARS`): every rule and bound below applies to at most this.
MAX_ANSWER_CHARS = 1000
#: Longest text (in code points) that is read at all: a whole worked reply (Math-Verify reads
#: whole replies; the longest in its test table is 11,422 characters, a reasoning trace and its
#: summary), from which only the final region of at most :data:`MAX_ANSWER_CHARS` is read, in one
#: linear pass (about 4,000 tokens of text: room for a worked solution, not for a book).
MAX_REPLY_CHARS = 16_000
#: The structural bounds, checked on the text before anything is parsed or evaluated: over any,
#: the text is read but never compared (wrong). Deepest nesting of brackets ``( [ {``.
MAX_NESTING = 10
#: Most LaTeX commands (``\\sin``, ``\\frac``, ...) in the text.
MAX_COMMANDS = 40
#: Most big operators ``\\sum`` and ``\\prod`` (integrals and limits are never compared).
MAX_BIG_OPERATORS = 2
#: Most cells of a matrix (``\\begin{pmatrix}``, a determinant's ``vmatrix``, ``array``).
MAX_MATRIX_CELLS = 16
#: Longest run of digits (``1`` to ``9`` and ``0``) in the text.
MAX_DIGIT_RUN = 300
#: Highest tower of powers: ``a^{b^{c}}`` (3) is read, ``a^{b^{c^{d}}}`` and ``9^9^9^9`` are not.
MAX_TOWER = 3
#: Largest integer whose factorial (``6!``) is evaluated; a larger one is never compared.
MAX_FACTORIAL = 1000
#: Most terms of a sum or product with numeric limits that is evaluated term by term; a sum of a
#: polynomial in its index (of degree up to :data:`MAX_SYMBOLIC_EXPONENT`) has a closed form
#: (Faulhaber's formula, SymPy's ``summation``) and may have any number of terms.
MAX_SUM_TERMS = 100
#: Largest exponent (absolute value) of a power of numbers; above it the answer is wrong without
#: comparison (``9^9^9^9`` would never finish).
MAX_EXPONENT = 10_000
#: Largest exponent of a power of an expression with variables (``(x+y+z+w)^{40}`` is refused).
MAX_SYMBOLIC_EXPONENT = 12
#: Most decimal digits of a number that is compared, before or after the point: a value beyond
#: 10^MAX_DIGITS or closer to 0 than 10^-MAX_DIGITS (estimated to within a factor of two, never
#: computed: ``(2^{10000})^{10000}`` has 30 million digits) is wrong without comparison. Room above
#: :data:`MAX_EXPONENT` for a long mantissa: plain numbers (``1e10000``) stay below it, and so does
#: ``10^{10000}``.
MAX_DIGITS = 12_000
#: Largest SymPy expression (nodes of its tree) that is compared.
MAX_NODES = 200
#: Most parts an answer may have.
MAX_PARTS = 50
#: Relative tolerance of a decimal against a number with no finite decimal form.
REL_TOL = Fraction(1, 10**6)
#: Significant digits to which two irrational values must agree.
EXACT_DIGITS = 30

_INSTALL_HINT = "pip install 'agentgym[math]'"


def require_math_verify() -> Any:
    """Import and return the ``math_verify`` module.

    Raises:
        ImportError: ``math-verify`` is not installed; the message says how to install it.
    """
    try:
        import math_verify
    except ImportError as err:
        raise ImportError(
            f"the math environments check answers with math-verify, which is not installed: "
            f"run `{_INSTALL_HINT}`"
        ) from err
    for name in ("math_verify.parser", "math_verify.grader"):
        logger = logging.getLogger(name)
        if _TIMEOUT_WARNING_FILTER not in logger.filters:
            logger.addFilter(_TIMEOUT_WARNING_FILTER)
    return math_verify


def _not_the_timeout_warning(record: logging.LogRecord) -> bool:
    """Drop math-verify's "Timeout is disabled" warning: the bounds and the worker's deadline
    (module docstring) are the interruption logic it asks for, so it would only alarm users."""
    return not record.getMessage().startswith("Timeout is disabled")


_TIMEOUT_WARNING_FILTER = _not_the_timeout_warning


@dataclass(frozen=True)
class Value:
    """One part of an answer.

    Attributes:
        number: the exact value as a :class:`fractions.Fraction` when the part is a plain number,
            else ``None``.
        expr: the SymPy value when the part needed ``math-verify`` (``\\sqrt{50}``, ``x+1``).
        decimal: written as a decimal (may approximate a number with no finite decimal form).
        percent: written with ``%`` (matches the number or its hundredth).
        too_large: beyond the work bounds (never compared).
        equation: the first and last sides (SymPy) of a part written as an equation, else
            ``None``; ``number`` or ``expr`` then hold the last side.
        relation: the part is an equation that is compared only as an equation (``y = 2x + 1``,
            ``x^2 - 1 = 0``; not ``x = 5`` or ``8 - 5 = 3``, which are their last sides).
        numeral: ``(base, value)`` of a numeral written with a base subscript (``1011_2``:
            ``(2, 11)``; ``number`` is then ``None``), else ``None``.
    """

    number: Fraction | None = None
    expr: Any = None
    decimal: bool = False
    percent: bool = False
    too_large: bool = False
    equation: tuple[Any, Any] | None = None
    relation: bool = False
    numeral: tuple[int, int] | None = None


@dataclass(frozen=True)
class ParsedAnswer:
    """An answer as read (module docstring).

    Attributes:
        text: the text read: the text given to :func:`parse_answer`, or the final region of a
            longer reply (step 0 of the module docstring).
        kind: ``"scalar"``, ``"tuple"``, ``"list"``, ``"set"`` or ``"interval"`` (half-open:
            ``[-2, 7)``, ``(0, 1]``; its parts are the two ends).
        parts: the values, in the order written.
        ordered: whether the order of the parts counts (tuples; lists not joined by ``or``).
        brackets: an interval's two brackets (``"[)"`` or ``"(]"``), a pair's (``"()"`` or
            ``"[]"``), else ``""``.
        timed_out: reading it ran past :data:`CHECK_TIMEOUT_S` (its one part is too large).
        decimal_comma: the value of ``1000,99`` or ``0,111`` read with a decimal comma (the
            reading used against a reference of one number), else ``None``.
    """

    text: str
    kind: str
    parts: tuple[Value, ...]
    ordered: bool = True
    brackets: str = ""
    timed_out: bool = False
    decimal_comma: Fraction | None = None

    @property
    def too_large(self) -> bool:
        """Some part is beyond the work bounds: the answer is never compared (wrong)."""
        return any(p.too_large for p in self.parts)


# ----------------------------------------------------------------------------- the final span


def final_answer_text(text: str) -> str:
    """The final answer in a reference text: after the last ``####`` if any (GSM8K's convention).

    Example:
        >>> final_answer_text("48/2 = 24 clips in May. 48+24 = 72 #### 72")
        '72'
        >>> final_answer_text(" 3/4 ")
        '3/4'
    """
    return text.rpartition("####")[2].strip()


#: A box command, whatever its argument (``\\fboxsep`` and ``\\fboxrule`` are none).
_BOX_COMMAND = re.compile(r"\\(?:boxed|fbox|framebox|colorbox|fcolorbox)(?![A-Za-z])")
#: Arguments before a box's content: ``\\framebox[2cm][c]{4}``, ``\\colorbox{yellow}{4}``,
#: ``\\fcolorbox{red}{yellow}{4}`` (optional ones in brackets, then colours in braces).
_BOX_OPTIONAL = re.compile(r"\s*\[[^\[\]{}]{0,80}\]")
_BOX_COLOUR = re.compile(r"\s*\{[^{}]{0,80}\}")
#: A box's argument without braces, as TeX reads it: one token (``\\boxed 4`` boxes ``4``, and
#: ``\\boxed 42`` boxes ``4`` too; ``\\boxed\\pi`` boxes ``\\pi``).
_TEX_TOKEN = re.compile(r"\\[A-Za-z]+|\\[^A-Za-z\s]|[^\s{}\\$%]")


def _scan_boxes(text: str) -> tuple[list[tuple[int, int, int, int]], int]:
    """Every box of ``text`` (``\\boxed`` and ``\\fbox`` alike), in order, in one pass:
    ``(command start, content start, content end, box end)`` each, and where a box that is never
    closed (``\\boxed{4``) or has no argument starts, else ``-1`` (the scan stops there: the rest
    of the text is that box's content). The argument is a group in balanced braces after any white
    space (``\\boxed {4}``), else one TeX token (:data:`_TEX_TOKEN`); a box inside a box is part
    of the outer box's content."""
    found: list[tuple[int, int, int, int]] = []
    pos = 0
    while (command := _BOX_COMMAND.search(text, pos)) is not None:
        i = command.end()
        while (optional := _BOX_OPTIONAL.match(text, i)) is not None:
            i = optional.end()
        for _ in range({"colorbox": 1, "fcolorbox": 2}.get(command.group()[1:], 0)):
            colour = _BOX_COLOUR.match(text, i)
            if colour is None:
                return found, command.start()
            i = colour.end()
        while i < len(text) and text[i].isspace():
            i += 1
        if not text.startswith("{", i):
            token = _TEX_TOKEN.match(text, i)
            if token is None:
                return found, command.start()
            found.append((command.start(), token.start(), token.end(), token.end()))
            pos = token.end()
            continue
        depth, end = 0, -1
        for j in range(i, len(text)):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    end = j
                    break
        if end < 0:
            return found, command.start()
        found.append((command.start(), i + 1, end, end + 1))
        pos = end + 1
    return found, -1


_BOLD = re.compile(r"(?<![\w*])\*\*(?!\s)(.+?)\*\*(?![\w*])|(?<!\w)__(?!\s)(.+?)__(?!\w)", re.S)
_TRAILING = " \t\n.,;:?"
#: A "!" that ends a sentence (after a space or punctuation); one after a number is a factorial.
_END_BANG = re.compile(r"(?<=[\s.,;:?])!+$|^!+$")
#: A final emphasised span (``*12*``, ``_12_``, ``***12***``): only trailing punctuation after it.
_FINAL_EMPHASIS = re.compile(
    r"(?<![\w*])(\*{1,3}|_{1,3})(?![\s*_])([^*_\n]{1,80}?)(?<![\s*_])\1[\s.,;:!?]*$"
)
_WRAPPERS = re.compile(r"\\(?:text|mathrm|textbf|mathbf)\{([^{}]*)\}")


def _final_emphasis(text: str) -> re.Match[str] | None:
    """A final emphasised number (``The answer is *12*.``; group 2 is ``12``), or ``None``."""
    match = _FINAL_EMPHASIS.search(text)
    if match and _plain_value(match[2].strip()) is not None:
        return match
    return None


def _strip_ends(text: str) -> str:
    """``text`` without surrounding space, emphasis marks and sentence punctuation: trailing
    ``.,;:?`` and a sentence's ``!`` (``6!`` keeps its factorial), leading ``,;:!?`` (``.4`` keeps
    its point)."""
    text = text.lstrip(" \t\n,;:!?*_")
    while True:
        stripped = _END_BANG.sub("", text.rstrip(_TRAILING + "*_"))
        if stripped == text:
            return text
        text = stripped


#: Minerva's closing line: ``Final Answer: The final answer is $X$. I hope it is correct.``
_FINAL_ANSWER_IS = re.compile(r"final answer is:?\s*", re.IGNORECASE)
#: The math that opens what follows ``final answer is`` (``$X$``, ``$$X$$``, ``\(X\)``, ``\[X\]``).
_OPENING_MATH = re.compile(r"\$\$.+?\$\$|\$[^$]+\$|\\\(.+?\\\)|\\\[.+?\\\]", re.DOTALL)
#: What must follow that math for it to be the answer: the end of its sentence (``$3$.``, a line
#: break, the end of the text), not more of it (``$3$ or $4$``, ``$3$ dollars``).
_SENTENCE_ENDS = re.compile(r"[ \t]*(?:[.!?](?!\d)|\n|$)")
_I_HOPE = re.compile(r"\.\s+I hope it is correct\.?$", re.IGNORECASE)


def _last_final_answer_is(text: str) -> tuple[int, int, re.Match[str] | None] | None:
    """``(start, end, math)`` of the last ``final answer is`` in ``text`` (Math-Verify reads the
    rightmost) and the math that opens what follows it where the sentence ends after that math
    (else ``None``), or ``None`` where the phrase is absent."""
    last = None
    for last in _FINAL_ANSWER_IS.finditer(text):  # noqa: B007 - the last one counts
        pass
    if last is None:
        return None
    math = _OPENING_MATH.match(text, last.end())
    if math is not None and not _SENTENCE_ENDS.match(text, math.end()):
        math = None
    return last.start(), last.end(), math


def _after_final_answer_is(text: str, end: int) -> int:
    """Where what follows a ``final answer is`` that ends at ``end`` stops: at a later ``####`` or
    box (another marker, compared with it: :func:`_markers_disagree`), else at the end."""
    box = _BOX_COMMAND.search(text, end)
    stops = [i for i in (text.find("####", end), box.start() if box else -1) if i >= 0]
    return min(stops, default=len(text))


def _final_answer_is(text: str) -> str | None:
    """What follows the last ``final answer is`` in ``text`` (Minerva's closing line): the math
    that opens it where the sentence ends after it (``$28\\%$.``, not a note after it), else the
    rest up to a later ``####`` or box, without ``. I hope it is correct.`` (``$3$ or $4$.`` is
    read whole); ``None`` where the phrase is absent."""
    found = _last_final_answer_is(text)
    if found is None:
        return None
    _, end, math = found
    if math:
        return math.group()
    return _I_HOPE.sub("", text[end : _after_final_answer_is(text, end)].rstrip())


def final_span(text: str) -> str:
    """Step 1 of the module docstring: the span of ``text`` that holds the final answer.

    Example:
        >>> final_span("So $x = \\\\boxed{12, 20}$."), final_span("... #### 1,234"), final_span("**7**.")
        ('12, 20', '1,234', '7')
        >>> final_span("\\\\fbox{3} and \\\\boxed {4}"), final_span("It is *3* or *4*.")
        ('3, 4', '3, 4')
    """
    text = _answer_text(text) or ""
    text = text.strip().replace("\u2212", "-")
    boxes, _ = _scan_boxes(text)
    if boxes:  # several boxed answers are one answer of several parts (repeats count once)
        text = ", ".join(dict.fromkeys(text[a:b].strip() for _, a, b, _ in boxes))
    elif "####" in text:
        text = text.rpartition("####")[2]
    elif (final := _final_answer_is(text)) is not None:
        text = final
    elif (run := _emphasis_run(text)) is not None:
        text = ", ".join(dict.fromkeys(c.strip() for c in run[0]))
    return _tidy(text)


def _tidy(text: str) -> str:
    """A final span without its markup (step 1 of the module docstring): math delimiters,
    ``\\text{}`` and like wrappers, ``\\left``/``\\right``, LaTeX spaces, surrounding punctuation."""
    text = text.replace("\\$", " ").replace("\\%", "%").replace("{,}", ",")
    text = text.replace("‰", " per mille").replace("‱", " per mille")  # no percent: a scale
    text = re.sub(r"(?<=\d),\\[!,]\s*(?=\d{3}(?!\d))", ",", text)  # 11,\! 111,\! 100
    text = re.sub(r"\\{1,2}(?:left|right|[bB]igg?[lrm]?)(?![A-Za-z])\s*", "", text)  # \left( is (
    for mark in ("$", "\\(", "\\)", "\\[", "\\]", "`"):
        text = text.replace(mark, " ")
    text = re.sub(r"\\[,;:! ]|\\quad|\\qquad", " ", text)
    text = _WRAPPERS.sub(r" \1 ", text)
    return _strip_ends(text)


#: Any emphasised span of one line (``**3**``, ``*3*``, ``__3__``): a candidate part of a run.
_EMPHASIS_SPAN = re.compile(
    r"(?<![\w*])(\*{1,3}|_{1,3})(?![\s*_])([^*_\n]{1,200}?)(?<![\s*_])\1(?![\w*])"
)


def _emphasis_run(text: str) -> tuple[tuple[str, ...], int, int] | None:
    """``(contents, start, end)`` of the emphasised answer of ``text``: a number in single emphasis
    that ends the text and follows any bold span, else the last bold span; with the emphasised
    values before it that only separators part from it (``**3** or **4**`` is ``3, 4``, as boxes
    are: :data:`_BOX_GAP`). ``None`` where nothing is emphasised."""
    bold = list(_BOLD.finditer(text))
    emphasis = _final_emphasis(text)
    if emphasis is not None and (not bold or emphasis.start() >= bold[-1].end()):
        contents, start, end = [emphasis[2]], emphasis.start(), emphasis.end(2) + len(emphasis[1])
    elif bold:
        contents, start, end = [bold[-1][1] or bold[-1][2]], bold[-1].start(), bold[-1].end()
    else:
        return None
    for before in reversed([m for m in _EMPHASIS_SPAN.finditer(text, 0, start)]):
        content = before[2]
        value = _clean(content) or _plain_value(_tidy(content)) is not None
        if not value or not _separator_gap(text[before.end() : start]):
            break
        contents.insert(0, content)
        start = before.start()
    return tuple(contents), start, end


def _final_region(text: str) -> str | None:
    """Step 0 (module docstring): the part of a reply over :data:`MAX_ANSWER_CHARS` that holds its
    final answer, at most :data:`MAX_ANSWER_CHARS` long and read as the rules read the whole
    reply, or ``None`` (not read). Each step is one linear pass over the text (no regular
    expression here can backtrack over it). The region is every answer marker the reply has, so
    that a hedge stays a hedge: its boxes, rebuilt (every distinct run, a number that a hedge joins
    to one of them, and the opening of a box never closed); the last ``final answer is`` with the
    math that opens what follows it where the sentence ends there (else what follows, up to a later
    ``####`` or box); and ``#### X``; else the reply's last lines (:func:`_tail`). Where two
    markers of the whole reply differ (:func:`_markers_disagree`) or a sentence after its answer
    hedges (:func:`_late_hedge`), the region is those two, or the answer and that sentence."""
    pieces: list[str] = []
    boxes, unclosed = _scan_boxes(text)
    if unclosed < 0:  # every marker, and the sentences after the answer, of the whole reply
        disagree = _markers_disagree(text, boxes)
        hedge = "\n".join(disagree) if disagree else _late_hedge(text, boxes)
        if hedge is not None:  # the two markers, or the answer and that sentence: a hedge
            return hedge if 0 < len(hedge) <= MAX_ANSWER_CHARS else None
    if boxes or unclosed >= 0:
        region = _boxes_region(text, boxes, unclosed)
        if region is None or unclosed >= 0:  # a box never closed holds all that follows it
            return region
        pieces.append(region)
    found = _last_final_answer_is(text)
    if found is not None:
        start, end, math = found
        piece = text[start : math.end() if math else _after_final_answer_is(text, end)]
        if len(piece) <= MAX_ANSWER_CHARS:
            pieces.append(piece)
        elif not pieces and "####" not in text:
            return _tail(text)
    if "####" in text:
        piece = "#### " + text.rpartition("####")[2].strip()
        if len(piece) > MAX_ANSWER_CHARS:
            return None
        pieces.append(piece)
    if not pieces:
        return _tail(text)
    region = "\n".join(pieces)  # a line break ends the sentence of a final answer's math
    if len(region) > MAX_ANSWER_CHARS:  # several markers: read as one if they say the same
        said = {re.sub(r"\s+", "", final_span(p)) for p in pieces}
        region = pieces[0] if len(said) == 1 else ""
    return region if 0 < len(region) <= MAX_ANSWER_CHARS else None


def _boxes_region(text: str, boxes: list[tuple[int, int, int, int]], unclosed: int) -> str | None:
    """The boxes of a whole reply, rebuilt for :func:`_final_region`: each distinct run once
    (``...`` between runs is no separator: two runs stay a hedge), ``or X`` after the first where a
    hedge joins a number ``X`` to a run (:func:`_hedge_beside`), and the opening of a box never
    closed (still unclosed: it is a prefix of that box); ``None`` where longer than
    :data:`MAX_ANSWER_CHARS` (of several runs, a hedge, the first two are kept)."""
    runs = _runs(text, boxes)
    distinct: dict[frozenset[str], tuple[str, ...]] = {}
    for contents, _, _ in runs:
        distinct.setdefault(frozenset(contents), contents)
    rendered = [", ".join(f"\\boxed{{{c}}}" for c in run) for run in distinct.values()]
    beside = _hedge_beside_runs(text, runs) if len(rendered) == 1 else None  # else a hedge
    if beside is not None:
        rendered[0] += f" or {beside}"
    if unclosed >= 0:
        rendered.append(text[unclosed : unclosed + 200])
    region = " ... ".join(rendered)
    if len(region) > MAX_ANSWER_CHARS and len(rendered) > 1:
        region = " ... ".join(rendered[:2])  # still a hedge, read as one
    return region if len(region) <= MAX_ANSWER_CHARS else None


#: Math delimiters, and what is no delimiter (``\\\\``, ``\\$``); a line break ends inline math.
_DELIMITER = re.compile(r"\\\\|\\\$|\$\$|\$|\\[()\[\]]|\n")
_CLOSING = {"$$": "$$", "$": "$", "\\(": "\\)", "\\[": "\\]"}
#: Where a tail may start: a line after one that ends a sentence (its ``.``, ``!``, ``?`` or ``:``
#: may have closing marks after it: ``$$``, ``**``, a bracket, a quote), else a sentence.
_TAIL_STARTS = [
    re.compile(r"[.!?:][$*_)\]\"'”’]*[ \t]*\n"),
    re.compile(r"[.!?:][$*_)\]\"'”’]*\s"),
]


def _math_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of every math span of ``text``, in order, in one pass. Inline math
    (``$``, ``\\(``) ends at a line break, as in LaTeX; display math (``$$``, ``\\[``) may span
    lines."""
    spans, closing, start = [], "", 0
    for token in _DELIMITER.finditer(text):
        mark = token.group()
        if mark in ("\\\\", "\\$"):
            continue
        if not closing:
            if mark in _CLOSING:
                closing, start = _CLOSING[mark], token.start()
        elif mark == closing or (mark == "\n" and closing in ("$", "\\)")):
            spans.append((start, token.end()))
            closing = ""
    if closing:
        spans.append((start, len(text)))
    return spans


def _tail(text: str) -> str | None:
    """The last at most :data:`MAX_ANSWER_CHARS` characters of ``text``, from the first line start
    outside math in them that follows the end of a sentence, else the first sentence start outside
    math; never where a hedge crosses the break (``3 or.``, ``3.\\n Or 4``: :func:`_hedge_crosses`),
    and never within a sentence (a cut there could split ``3 or\\n4``). ``None`` where there is no
    such start."""
    cut = len(text) - MAX_ANSWER_CHARS
    spans = _math_spans(text)
    opens = [a for a, _ in spans]

    def outside(at: int) -> bool:
        k = bisect.bisect_right(opens, at) - 1
        return k < 0 or at == spans[k][0] or at >= spans[k][1]

    for start in _TAIL_STARTS:
        for boundary in start.finditer(text, max(cut - 40, 0)):
            at = boundary.end()
            if at >= cut and outside(at) and not _hedge_crosses(text, boundary.start(), at):
                return text[at:]
    return None


# ----------------------------------------------------------------------------- parts


_THOUSANDS = re.compile(r"(?<![\d.,])[-+]?(?!0,)\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d|,\d)")
#: Digit groups of three after single spaces (``1 000``, ``12 345 678``): one number (SI style).
_SPACED_THOUSANDS = re.compile(
    r"(?<![\d.,])(?<![\d.,]\s)[-+]?[1-9]\d{0,2}(?: \d{3})+(?:\.\d+)?(?![\d.,]| \d)"
)
#: A decimal comma: a whole span ``1000,99`` or ``0,111`` (no space; not thousands groups).
_DECIMAL_COMMA = re.compile(r"[-+]?\d+,\d+")
_SEPARATOR = re.compile(r"\s*(?:;|,|\band\b|\bor\b)\s*")
_BRACKETS = {"(": ")", "[": "]", "\\{": "\\}", "{": "}"}


def _top_level_split(span: str) -> tuple[list[str], list[str]]:
    """Parts of ``span`` split at separators outside brackets, and the separators found."""
    parts, seps, depth, last, i = [], [], 0, 0, 0
    while i < len(span):
        ch = span[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0:
            match = _SEPARATOR.match(span, i)
            if match:
                parts.append(span[last:i])
                seps.append(match.group().strip())
                last = i = match.end()
                continue
        i += 1
    parts.append(span[last:])
    return parts, seps


#: A half-open interval: one square and one round bracket around two parts (``[-2,7)``).
_INTERVAL = re.compile(r"^(?:\[(?P<a>.+)\)|\((?P<b>.+)\])$", re.S)


def _interval_parts(span: str) -> tuple[str, list[str]] | None:
    """``(brackets, [start, end])`` of a half-open interval, or ``None``."""
    match = _INTERVAL.match(span)
    if not match:
        return None
    inner = match["a"] if match["a"] is not None else match["b"]
    parts, seps = _top_level_split(inner)
    if len(parts) != 2 or seps != [","] or not _balanced(inner):
        return None
    return span[0] + span[-1], [p.strip() for p in parts]


#: Names of a tuple or a ratio before its value: ``(p, q) = (3, 2)``, ``V_1 : V_2 = 11 : 21``.
_NAMED_GROUP = re.compile(
    r"^\s*(?:\(\s*{n}(?:\s*[,;]\s*{n})+\s*\)|{n}(?:\s*:\s*{n})+)\s*=(?![=<>])\s*(?P<value>[^=]+)$".format(
        n=r"(?:[A-Za-z](?:_\{?[A-Za-z0-9]+\}?)?|\\[A-Za-z]+)"
    )
)


_LESS = re.compile(r"<|≤|\\leq?(?![A-Za-z])|[>≥]|\\geq?(?![A-Za-z])")
_LE = r"(<=|<|≤|\\{1,2}leq?(?![A-Za-z]))"
#: A chained inequality: ``0 < x < 1``, ``-2 \\le x \\le 7``, ``0 < f(x) < 1``.
_CHAIN = re.compile(
    rf"^(?P<lo>[^=]+?)\s*(?P<r1>{_LE[1:-1]})\s*"
    r"(?:[A-Za-z](?:_\{?[A-Za-z0-9]+\}?)?(?:\s*\(\s*[A-Za-z]\s*\))?|\\[A-Za-z]+)"
    rf"\s*(?P<r2>{_LE[1:-1]})\s*(?P<hi>[^=]+)$"
)


def _chain_as_brackets(span: str) -> str:
    """A chained inequality as the range it bounds: ``0 < x < 1`` is ``(0, 1)``,
    ``-2 \\le x \\le 7`` is ``[-2, 7]``, ``0 \\le x < 1`` is ``[0, 1)``; else ``span``."""
    chain = _CHAIN.match(span)
    if not chain or any(_LESS.search(chain[end]) for end in ("lo", "hi")):
        return span
    opening, closing = ("(" if chain[r] == "<" else "[" for r in ("r1", "r2"))
    return f"{opening}{chain['lo'].strip()}, {chain['hi'].strip()}{')' if closing == '(' else ']'}"


def _ungrouped(match: re.Match[str], span: str, separator: str) -> str:
    """A number's digit groups joined, unless it fills a bracket pair (``(12,102)`` is a pair)."""
    before, after = span[: match.start()].rstrip()[-1:], span[match.end() :].lstrip()[:1]
    if separator == "," and before in ("(", "[") and after in (")", "]"):
        return match.group()
    return match.group().replace(separator, "")


def _split(span: str) -> tuple[str, list[str], bool]:
    """``(kind, parts, ordered)`` of a final span (intervals: :func:`_interval_parts`)."""
    span = _THOUSANDS.sub(lambda m: _ungrouped(m, span, ","), span)
    span = _SPACED_THOUSANDS.sub(lambda m: _ungrouped(m, span, " "), span).strip()
    named = _NAMED_GROUP.match(span)
    if named:
        span = named["value"].strip()
    interval = _interval_parts(span)
    if interval is not None:
        return "interval", interval[1], True
    for open_, close in _BRACKETS.items():
        if span.startswith(open_) and span.endswith(close):
            inner = span[len(open_) : len(span) - len(close)]
            parts, seps = _top_level_split(inner)
            kind = "set" if open_ in ("\\{", "{") else "tuple"
            uniform = set(seps) == {","} or (kind == "tuple" and set(seps) == {";"})
            if len(parts) > 1 and uniform and _balanced(inner):  # (0, 1); (0;-2;6)
                return kind, [p.strip() for p in parts], kind == "tuple"
    parts, seps = _top_level_split(span)
    parts = [p.strip() for p in parts]
    if len(parts) == 1:
        return "scalar", parts, True
    ordered = "or" not in seps
    return "list", parts, ordered


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth < 0:
            return False
    return depth == 0


# ----------------------------------------------------------------------------- values

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)"
_PLAIN = re.compile(
    rf"^(?:[$€£¥]\s*)?(?P<sign>-)?\s*(?:[$€£¥]\s*)?(?P<num>{_NUM})"
    rf"(?:\s*(?:[eE](?P<e1>[-+]?\d+)|(?:\\times|\\cdot|\*|×|x)\s*10\s*\^\s*\{{?\s*(?P<e2>[-+]?\d+)\s*\}}?))?"
    r"(?:\s*/\s*(?P<den>\d+))?"
    r"\s*(?P<pct>%)?"
    r"(?P<unit>\s+[A-Za-z][A-Za-z .°/]*|[A-Za-z]{2}[A-Za-z .°]*|\s*°)?$"
)
_FRAC = re.compile(
    r"^(?P<sign>-)?\s*\\[dt]?frac\s*\{\s*(?P<a>[-+]?\d+)\s*\}\s*\{\s*(?P<b>\d+)\s*\}$"
)
#: A mixed number: a whole number and a proper fraction (``3 1/2``, ``3\\frac{1}{2}``).
_MIXED = re.compile(
    r"^(?P<sign>-)?\s*(?P<whole>\d+)(?:\s+(?P<a>\d+)\s*/\s*(?P<b>\d+)"
    r"|\s*\\[dt]?frac\s*\{\s*(?P<c>\d+)\s*\}\s*\{\s*(?P<d>\d+)\s*\})$"
)
#: Plain numbers side by side (``7 8``): no one value (never added, never multiplied).
_JUXTAPOSED = re.compile(rf"^{_NUM}(?:\s+{_NUM})+$")
_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")
_FUNCTIONS = frozenset({"sqrt", "pi", "sin", "cos", "tan", "log", "ln", "exp", "frac", "infty"})


def _plain_value(part: str) -> Value | None:
    """A plain number (fast path, no SymPy), or ``None``; numbers side by side give a value that
    equals nothing."""
    match = _MIXED.match(part)
    if match:
        whole, num, den = (
            int(match["whole"]),
            int(match["a"] or match["c"]),
            int(match["b"] or match["d"]),
        )
        if 0 < num < den:
            value = whole + Fraction(num, den)
            return Value(number=-value if match["sign"] else value)
    if _JUXTAPOSED.match(part):
        return Value()
    match = _FRAC.match(part)
    if match:
        if int(match["b"]) == 0:
            return None
        value = Fraction(int(match["a"]), int(match["b"]))
        return Value(number=-value if match["sign"] else value)
    match = _PLAIN.match(part)
    if not match or _math_word(match["unit"]):
        return None
    if _SCALE_WORD.match(match["unit"] or "") or _SIGN_UNIT.search(match["unit"] or ""):
        return Value()  # 3 thousand, 3 dozen: no unit but a factor (equal to nothing)
    text = match["num"]
    exponent = int(match["e1"] or match["e2"] or 0)
    if abs(exponent) > MAX_EXPONENT:
        return Value(too_large=True)
    value = Fraction(text) * Fraction(10) ** exponent
    decimal = "." in text or bool(match["e1"] or match["e2"])
    if match["den"]:
        if decimal or int(match["den"]) == 0:
            return None
        value /= int(match["den"])
    if match["sign"]:
        value = -value
    return Value(number=value, decimal=decimal, percent=bool(match["pct"]))


#: The one list of words that change the number before them, used by every reader (a plain
#: number's unit, a sentence's number, what follows a box or a ``####`` value): a scale word in
#: any language (``3 thousand``, ``3k``, ``3 K``, ``3 M``, ``3 bn``, ``3 score``, ``3万``, ``3
#: Mio.``, ``3 тысяч``, ``3 tausend``), a fraction word (``3 quarters``, ``3 hundredths``), a
#: power (``3 squared``, ``3 factorial``) or a word that changes its sign (``3 below zero``, ``3
#: BC``, ``3 negative``, ``3 per mille``, ``3 ppm``).
_CHANGE_WORDS = (
    r"(?:[kKMB]|(?i:thousands?|millions?|billions?|trillions?|quadrillions?|dozens?|hundreds?"
    r"|lakhs?|crores?|grand|bn|mn|mln|bln|tn|score|gross|tausend|hundert|mio\.?|mrd\.?"
    r"|mill?i?on(?:es|en|i)?|milh[õo]es|mill?iard(?:s|i|en)?|mila|mille|тыс\.?|тысяч\w*|млн\.?|млрд\.?|миллион\w*"
    r"|миллиард\w*|halves|halfs?|thirds?|quarters?|fourths?|fifths?|sixths?|sevenths?|eighths?"
    r"|ninths?|tenths?|hundredths?|thousandths?|millionths?|and a (?:half|third|quarter)"
    r"|squared|cubed|factorial|to the power|negative|below|beneath|bce?|b\.c\.(?:e\.)?"
    r"|per[ -]?mill?e|per (?:thousand|ten thousand|million|billion)|pp[mbt]|basis points?)"
    r"|[万萬千百億亿兆‰‱])(?![A-Za-z])"
)
#: A unit that is a change word (:data:`_CHANGE_WORDS`, ``under``): no unit.
_SCALE_WORD = re.compile(rf"\s*(?:{_CHANGE_WORDS}|(?i:under)(?![A-Za-z]))")


#: A word in a unit that changes the sign of the number (``3 degrees below zero``, ``3 BC``).
_SIGN_UNIT = re.compile(r"(?<![A-Za-z])(?i:below|beneath|bce?|b\.c\.|per[ -]?mill?e)(?![A-Za-z])")


def _math_word(unit: str | None) -> bool:
    """A "unit" that is a function's or a constant's name (``2pi``, ``3 sqrt``): no unit, so the
    text is no plain number (Math-Verify reads ``2pi`` as 2; we do not, see step 3)."""
    return bool(unit) and unit.split()[0].lower() in _FUNCTIONS  # type: ignore[union-attr]


# ----------------------------------------------------------------------------- modelled commands

#: LaTeX commands whose meaning the reading keeps wherever they stand (module docstring, step 3):
#: values, operators, functions, Greek letters, spacing, sizing and text wrappers.
_MODELLED = frozenset(
    (
        "cdot times div pi infty sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh"
        " coth log ln exp approx left right big Big bigg Bigg bigl bigr Bigl Bigr biggl biggr Biggl"
        " Biggr bigm Bigm quad qquad displaystyle textstyle"
        " boxed fbox"
        " alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu"
        " xi rho varrho sigma varsigma tau upsilon phi varphi chi psi omega Gamma Delta Theta"
        " Lambda Xi Pi Sigma Upsilon Phi Psi Omega"
    ).split()
)
#: Commands that need their arguments, not empty (``\\frac{1}{2}``, ``\\frac12``; ``3 \\frac 4``
#: and ``3 \\sqrt{} 4`` read 4).
_WITH_ARGUMENTS = dict.fromkeys("frac dfrac tfrac cfrac binom dbinom tbinom".split(), 2) | {
    "sqrt": 1,
    "overline": 1,
}
#: Relation and set commands: kept only where the value read is no plain number (a relation,
#: a set, an interval union, ``\\pm``'s set); ``3 \\cap 4`` reads 4.
_RELATIONAL = frozenset(
    "le leq leqslant ge geq geqslant lt gt ne neq in notin subset subseteq supset supseteq cup"
    " cap setminus pm mp emptyset varnothing mathbb".split()
)
#: Environments the reading models (matrices); ``cases``, ``aligned`` and the rest are not.
_ENVIRONMENTS = frozenset(
    "pmatrix bmatrix Bmatrix vmatrix Vmatrix matrix array smallmatrix".split()
)
#: A command (a doubled backslash before letters, as escaped text has it, is one backslash).
_ANY_COMMAND = re.compile(r"\\{1,2}[A-Za-z]+|\\.", re.S)
_ENVIRONMENT = re.compile(r"\\(?:begin|end)\s*\{([^{}]*)\}")
#: An argument as TeX reads it without braces: one token.
_TOKEN_ARGUMENT = re.compile(r"\s*(?:\\[A-Za-z]+|[^\s{}\\])")
_PAIRS = (("lfloor", "rfloor"), ("lceil", "rceil"), ("lvert", "rvert"))
#: Characters a part may hold outside commands; others as :func:`_unmodelled` says.
_PLAIN_CHARACTERS = frozenset(
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ+-*/^_=<>()[]{},.;:!'%$€£¥"
)
#: Text wrappers: their contents are words, in one group without braces (``\\text{ cm}``);
#: ``3 \\text{{ or }} 4`` reads 4.
_TEXT_WRAPPERS = frozenset("text mathrm mathbf textbf textnormal textrm mbox".split())


#: Two numbers that no operator math-verify evaluates joins: a number, then brackets of numbers
#: (``3 (4)``, ``3 ( 4 )``, ``3 \\left( 4 \\right)``, ``3 (-4)``, ``2(3+4)``: math-verify reads
#: some as a product, some as the first or the last number; ``2(x+1)`` is read), a power's exponent then a number (``10^0 4``, ``3^{} 4``),
#: or an empty group between them (``3 {} 4``, ``3 () 4``, ``3 [] 4``).
_NO_ONE_VALUE = re.compile(
    r"\d\s*(?:\\left\s*|\\[bB]igg?l?\s*)?\((?=[^()A-Za-z\\]*(?:\\right\s*|\\[bB]igg?r?\s*)?\))"
    r"|\^\s*(?:\{[^{}]*\}|[\w.]+)\s+\.?\d"
    r"|(?<!\\)\{\s*\}|\(\s*\)|\[\s*\]"
)


def _unmodelled(text: str, number: bool) -> bool:
    """A LaTeX command in ``text`` (an answer's part, or what ``math-verify`` read in its
    sentence) that the reading does not model, or a listed one in a role its value drops
    (``number``: the value read is a plain number): module docstring, step 3. ``math-verify``
    drops what it does not know and reads the rest (``3 \\equiv 4``, ``3 \\lor 4`` and
    ``3\\hphantom{ or 4}`` read 4), so such a part equals nothing."""
    environments = _ENVIRONMENT.findall(text)
    if any(e.strip() not in _ENVIRONMENTS for e in environments):
        return True  # cases, substack-like stacks, align: two values stacked
    if _BASE_NUMERAL_IN.search(text) and not _BASE_NUMERAL.fullmatch(text.strip()):
        return True  # 1011_2 + 1: math-verify reads the digits as a decimal number
    if not _balanced(text):
        return True  # 3 ) 4, \left(3 \right. 4: math-verify reads 4
    if _NO_ONE_VALUE.search(text):
        return True  # 3 (4), 3 ( 4 ), 10^0 4, 3 {} 4: two numbers no operator joins
    names = []
    for command in _ANY_COMMAND.finditer(text):
        name, rest = command.group().lstrip("\\") or "\\", text[command.end() :]
        names.append(name)
        if name in _MODELLED or name in ("begin", "end") or name in ",!;: %${}()[]":
            continue
        if name == "\\" and environments:
            continue  # a matrix's row break
        if name in _RELATIONAL:
            if number:
                return True
        elif name in _TEXT_WRAPPERS:
            if not re.match(r"\s*\{[^{}]*\}", rest):
                return True
        elif name in _WITH_ARGUMENTS:
            at = command.end()
            index = name == "sqrt" and re.match(r"\s*\[([^\[\]]*)\]", rest)
            if index:
                if not re.sub(r"[\s{}]", "", index[1]):
                    return True  # \sqrt[] 9 reads 9
                at += index.end()  # \sqrt[3]{8}
            for _ in range(_WITH_ARGUMENTS[name]):
                start, at = at, _argument_end(text, at)
                if at < 0:
                    return True
                if (index or "binom" in name) and not text[start:at].lstrip().startswith("{"):
                    return True  # \binom 5 3 reads 3, \binom 53 53, \sqrt[3] 8 8
        elif name in ("det", "gcd", "lcm", "max", "min"):
            if not re.match(r"\s*(?:\(|\{|\\left|\\begin)", rest):
                return True  # 3 \max 4 reads 4
        elif name in ("sum", "prod"):
            if not re.match(r"\s*(?:_|\\limits)", rest):
                return True
        elif name == "circ":  # a degree sign: 90^\circ, 90^{\circ}; 3 \circ 4 reads 4
            before = text[: command.start()].rstrip()
            if not before.endswith(("^", "^{")) or re.match(r"(?:\s|\}|\\[,;:! ])*[\w{]", rest):
                return True
        elif name == "degree":  # 90\degree ends its part: 3 \degree + 4 reads 4
            if not re.fullmatch(r"[\s}]*", rest):
                return True
        elif not any(name in pair for pair in _PAIRS):
            return True
    for left, right in _PAIRS:
        brackets = [n for n in names if n in (left, right)]
        if brackets != [left, right] * (len(brackets) // 2) or len(brackets) % 2:
            return True  # \lfloor x \rfloor, in pairs
        if re.search(rf"\\{left}\s*\\{right}", text):
            return True  # around nothing: 3 \lceil\rceil 4 reads 4
    return _unmodelled_characters(_ANY_COMMAND.sub("c", text), number, bool(environments))


def _unmodelled_characters(text: str, number: bool, matrix: bool) -> bool:
    """A character of ``text`` (its commands replaced by a letter) that ``math-verify`` drops
    (``3 × 4``, ``3 ∨ 4``, ``3 | 4``, ``3 ~ 4``, ``3 _ 4``, ``3 ° 4``, ``3 == 4`` and ``3 -> 4``
    read 4 or 3): outside
    :data:`_PLAIN_CHARACTERS` only white space, Greek letters (``2π``), ``≤ ≥ ≠ ± ∓`` where the
    value is no plain number, ``|`` in pairs around something, ``&`` in a matrix, ``×`` in a
    scientific form (``3 × 10^5``), and ``°`` or ``~`` before no digit (``90°``, ``5~cm``)."""
    for ch in set(text) - _PLAIN_CHARACTERS:
        if ch.isspace() or unicodedata.name(ch, "").startswith("GREEK"):
            continue
        if ch in "≤≥≠±∓":
            if number:
                return True
        elif ch == "|":
            if text.count("|") % 2 or re.search(r"\|\s*\|", text):
                return True
        elif ch in "°~":
            if re.search(rf"{ch}\s*\d", text):
                return True
        elif ch == "&":
            if not matrix:
                return True
        elif ch != "×" or re.search(r"×(?!\s*10\s*\^)", text):
            return True
    # 3 _ 4 reads 3; 3 == 4, 3 -> 4, 3 => 4 read 4 (<= and >= are relations), spaced or not
    # (3 = = 4, 3 - > 4, 3 < > 4, 3 :: 4, 3 ^ ^ 4)
    return bool(re.search(r"(?:^|\s)_|_(?:\s|$)", text)) or bool(
        re.search(
            r"=[=<>:^]|[-=]>|<-|<[<>:^]|>[<>:^]|:[:<>^]|\^[\^=<>:_]|_[\^_]", re.sub(r"\s", "", text)
        )
    )


def _argument_end(text: str, at: int) -> int:
    """Where the argument that starts at ``text[at:]`` ends (a group in balanced braces, or one
    token), or ``-1`` where there is none (``3 \\frac 4`` has one argument, not two)."""
    while at < len(text) and text[at].isspace():
        at += 1
    if not text.startswith("{", at):
        token = _TOKEN_ARGUMENT.match(text, at)
        return token.end() if token else -1
    depth = 0
    for i in range(at, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return i + 1 if re.sub(r"[\s{}]", "", text[at + 1 : i]) else -1  # {} or {{}}: none
    return -1


def _is_number(expr: Any) -> bool:
    """A SymPy value that is a plain number (no variable, no set, no relation)."""
    import sympy

    return isinstance(expr, sympy.Expr) and not expr.free_symbols and expr.is_number is True


# ----------------------------------------------------------------------------- structural bounds

_COMMAND = re.compile(r"\\[A-Za-z]+")
_BIG_OPERATOR = re.compile(r"\\(?:sum|prod|coprod)(?![A-Za-z])")
#: Never compared: math-verify reads ``\int_{x=1}^{2} x dx`` as its bound (1), a limit likewise.
_NEVER_COMPARED = re.compile(r"\\(?:i*int|oint|lim|liminf|limsup)(?![A-Za-z])")
_ATOM = re.compile(r"\\[A-Za-z]+|[0-9.]+|[A-Za-z]")


def _structure_too_large(text: str) -> bool:
    """The structural bounds (module docstring: :data:`MAX_NESTING` to :data:`MAX_TOWER`), on the
    text alone: nothing is parsed or evaluated."""
    if _NEVER_COMPARED.search(text) or len(_BIG_OPERATOR.findall(text)) > MAX_BIG_OPERATORS:
        return True
    if len(_COMMAND.findall(text)) > MAX_COMMANDS:
        return True
    if re.search(rf"\d{{{MAX_DIGIT_RUN + 1}}}", text):
        return True
    if "&" in text or "\\begin" in text:  # matrix cells: one more than the & and \\ separators
        if text.count("&") + text.count("\\\\") + 1 > MAX_MATRIX_CELLS:
            return True
    return _nesting_too_deep(text)


def _nesting_too_deep(text: str) -> bool:
    """Brackets deeper than :data:`MAX_NESTING`, or a tower of powers higher than
    :data:`MAX_TOWER`: ``^`` (or ``**``) puts the group or the one token after it a level up, and
    a ``^`` right after such a token goes up from there (``9^9^9``)."""
    bases = [0]  # the power level of each open bracket
    level = None  # the level of the token just read after a "^", for a chain
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "^" or text.startswith("**", i):
            i += 1 if ch == "^" else 2
            up = (bases[-1] if level is None else level) + 1
            if up >= MAX_TOWER:  # a tower of up + 1 levels
                return True
            while i < len(text) and text[i].isspace():
                i += 1
            if i < len(text) and text[i] in "([{":
                bases.append(up)
                level, i = None, i + 1
            else:
                match = _ATOM.match(text, i)
                level, i = up, (match.end() if match else i + 1)
            if len(bases) > MAX_NESTING + 1:
                return True
            continue
        if ch in "([{":
            bases.append(bases[-1])
            if len(bases) > MAX_NESTING + 1:
                return True
        elif ch in ")]}" and len(bases) > 1:
            bases.pop()
        if not ch.isspace():
            level = None
        i += 1
    return False


def _clean(part: str) -> bool:
    """No words in ``part`` other than LaTeX commands and the names of functions. Letters that
    look Latin count as Latin (``3 \u043er 4``, with a Cyrillic o, has the word "or"), invisible
    characters part no word, and a letter of a script other than Latin and Greek (``3 或 4``,
    ``3 или 4``) is a word."""
    letters = _INVISIBLE.sub("", unicodedata.normalize("NFKC", part)).translate(_LOOKALIKES)
    if any(
        ch.isalpha() and not ch.isascii() and not unicodedata.name(ch, "").startswith("GREEK")
        for ch in letters
    ):
        return False
    return all(w.lower() in _FUNCTIONS for w in _WORD.findall(letters))


def _tree_too_large(expr: Any) -> bool:
    """Step 3's bounds on a SymPy value's tree (module docstring); evaluates only the exponent of
    a tower, in floating point."""
    import sympy

    nodes = 0
    for node in sympy.preorder_traversal(expr):
        nodes += 1
        if nodes > MAX_NODES:
            return True
        if isinstance(node, sympy.Pow):
            exponent = node.exp
            if exponent.free_symbols:
                return True
            if not exponent.is_Number:  # a tower: evaluate the exponent in floating point
                try:
                    exponent = sympy.Float(exponent.evalf(15))
                except (TypeError, ValueError, ArithmeticError, RecursionError):
                    return True
            bound = MAX_SYMBOLIC_EXPONENT if node.base.free_symbols else MAX_EXPONENT
            try:
                if not abs(exponent) <= bound:  # also true for nan and zoo
                    return True
            except TypeError:
                return True
        elif isinstance(node, (sympy.factorial, sympy.factorial2, sympy.subfactorial)):
            argument = node.args[0]
            if not argument.free_symbols and not (
                argument.is_Integer and 0 <= argument <= MAX_FACTORIAL
            ):
                return True
        elif isinstance(node, sympy.gamma):
            return True
        elif isinstance(node, sympy.binomial) and not node.free_symbols:
            return True  # SymPy evaluates small numeric binomials: one left unevaluated is huge
        elif isinstance(node, (sympy.Sum, sympy.Product)) and _too_many_terms(node):
            return True
    return False


def _too_many_terms(node: Any) -> bool:
    """A sum or product with numeric limits over more than :data:`MAX_SUM_TERMS` terms, unless a
    sum of a polynomial in its index (closed form). Other limits (``n``, ``\\infty``) are left to
    SymPy under the deadline."""
    import sympy

    for index, *ends in node.limits:
        # math-verify leaves "10^9" unevaluated; the power bounds above hold for it already
        ends = [end.doit() if end.is_number else end for end in ends]
        if not all(isinstance(end, sympy.Integer) for end in ends):
            continue
        if ends[1] - ends[0] + 1 <= MAX_SUM_TERMS:
            continue
        summand = node.function
        if not isinstance(node, sympy.Sum) or not summand.is_polynomial(index):
            return True
        if sympy.degree(summand, index) > MAX_SYMBOLIC_EXPONENT:
            return True
    return False


def _evaluated() -> tuple[type, ...]:
    """What :func:`_too_large` evaluates once the bounds hold."""
    import sympy

    return (sympy.Sum, sympy.Product, sympy.factorial, sympy.factorial2, sympy.subfactorial)


def _too_large(expr: Any) -> tuple[bool, Any]:
    """``(too large, value)``: Step 3's bounds (module docstring) on a SymPy value, and the value
    with its sums, products and factorials evaluated once they are within the bounds."""
    import sympy

    if _tree_too_large(expr):
        return True, expr
    if isinstance(expr, sympy.Basic) and expr.has(*_evaluated()):
        expr = expr.doit()
        if _tree_too_large(expr):
            return True, expr
    return _too_many_digits(expr), expr


_LOG10_2 = math.log10(2)
_LOG10_E = math.log10(math.e)


def _log10_abs(value: Any) -> float | None:
    """About ``log10|value|`` (within 0.2) of a number SymPy evaluated, real or complex, from its
    binary exponent (never an exact power); ``None`` for 0, infinities, nan and non-numbers."""
    result = None
    for part in value.as_real_imag():
        mpf = getattr(part, "_mpf_", None)
        if mpf is None or not mpf[1]:  # exactly 0, or inf / nan (no mantissa)
            continue
        _, mantissa, exponent, _ = mpf
        digits = (exponent + math.log2(mantissa)) * _LOG10_2
        result = digits if result is None else max(result, digits)
    return result


def _too_many_digits(expr: Any) -> bool:
    """The magnitude bound (module docstring, :data:`MAX_DIGITS`), estimated bottom-up: a power's
    digits are its exponent times its base's, ``e^a``'s are ``a`` times log10(e), so nothing
    larger than the bound is ever evaluated (``(2^{10000})^{10000}`` has 30 million digits,
    ``e^{10^{9000}}`` 10^9000); then the value itself (a product of many bounded powers)."""
    import sympy

    def log10_abs(node: Any) -> float | None:
        return _log10_abs(sympy.N(node, 15))

    try:
        for node in sympy.postorder_traversal(expr):
            if not isinstance(node, sympy.Expr) or node.is_Atom or node.free_symbols:
                continue
            digits = None
            if isinstance(node, sympy.Pow):
                base = log10_abs(node.base)
                power = sympy.re(sympy.N(node.exp, 15))
                if base is not None and power.is_Number:
                    digits = float(power) * base
            elif isinstance(node, (sympy.exp, sympy.sinh, sympy.cosh)):
                argument = sympy.re(sympy.N(node.args[0], 15))
                if argument.is_Number:
                    digits = float(argument) * _LOG10_E
                    if not isinstance(node, sympy.exp):
                        digits = abs(digits)
            if digits is not None and not abs(digits) <= MAX_DIGITS:  # also true for nan
                return True
        if not isinstance(expr, sympy.Expr) or expr.free_symbols:
            return False
        digits = log10_abs(expr)
    except Exception:  # noqa: BLE001 - no number SymPy can evaluate: compared as before
        return False
    return digits is not None and not abs(digits) <= MAX_DIGITS


def _parse(text: str) -> list[Any]:
    math_verify = require_math_verify()
    try:  # math-verify's timeouts off (signal.alarm): the caller's worker has the deadline
        return list(math_verify.parse(text, parsing_timeout=None))
    except Exception:  # math-verify catches its own errors; this guards its edge cases too
        return []


def _sympy_value(text: str, *, whole: bool, answer: bool = False) -> Value | None:
    """A value read by ``math-verify`` (bounded), or ``None``.

    With ``whole``, ``text`` is one clean part: it is read as a plain expression when
    ``math-verify`` matches all of it (``2^10``), else as LaTeX (``2x``, ``9^{9^{9}}``). Without,
    ``text`` is a sentence and the last value ``math-verify`` finds in it counts: a numeral with
    a base subscript as such (``1011_2``), and in an ``answer`` equal to nothing where what it read
    holds a command it does not model (:func:`_unmodelled`).
    """
    import sympy

    values = _parse(text)
    if whole:
        matched = [v for v in values if isinstance(v, str)]
        squeezed = re.sub(r"\s+", "", text)
        if not matched or re.sub(r"\s+", "", matched[-1]) != squeezed:
            values = _parse(f"${text}$")
    elif "\\" in text and not ("$" in text.replace("\\$", "") or "\\(" in text or "\\[" in text):
        values = _parse(f"${text}$")  # LaTeX without delimiters: read only inside them
    exprs = [
        sympy.ImmutableMatrix(v) if isinstance(v, sympy.MatrixBase) else v
        for v in values
        if isinstance(v, (sympy.Basic, sympy.MatrixBase))
    ]
    if not exprs:
        return None
    expr = exprs[0]
    matched = [v for v in values if isinstance(v, str)]
    if not whole and matched:
        numeral = _BASE_NUMERAL.fullmatch(_strip_ends(matched[-1]))
        if numeral:  # "The answer is $1011_2$.": eleven
            return _numeral_value(numeral)
        if answer and _unmodelled(matched[-1], _is_number(expr)):
            return Value()  # "The answer is $3 \equiv 4$.": math-verify dropped a command
    if matched and isinstance(expr, sympy.Number):  # as written, exactly ("18.00" in a sentence)
        plain = _plain_value(_strip_ends(matched[-1]))
        if plain is not None:
            return plain
    if isinstance(expr, sympy.Equality):  # "The line is $y = 2x + 1$."
        lhs, rhs = _expr_value(expr.lhs), _expr_value(expr.rhs)
        if lhs.too_large or rhs.too_large:
            return Value(too_large=True)
        is_name = isinstance(expr.lhs, sympy.Symbol) or (
            isinstance(expr.lhs, sympy.core.function.AppliedUndef)
            and all(isinstance(a, sympy.Symbol) for a in expr.lhs.args)
        )
        return _equation_value([lhs], rhs, is_name)
    return _expr_value(expr)


def _expr_value(expr: Any) -> Value:
    """A SymPy value as a :class:`Value`, evaluated where the bounds allow (step 3)."""
    import sympy

    try:
        too_large, expr = _too_large(expr)
    except Exception:  # noqa: BLE001 - a value SymPy cannot walk: do not compare it
        return Value(too_large=True)
    if too_large:
        return Value(too_large=True)
    if isinstance(expr, sympy.Basic) and expr.atoms(sympy.Float):
        exact = _exact_decimals(expr)  # 12345679.0 + 0 is the exact 12345679
        if exact is not None:
            expr = exact
    if isinstance(expr, sympy.Expr) and not expr.free_symbols and not expr.is_Atom:
        try:  # math-verify may leave 10^{900} unevaluated: an exact rational compares exactly
            evaluated = expr.doit()
            if isinstance(evaluated, sympy.Rational):
                expr = evaluated
        except Exception:  # noqa: BLE001, S110 - left as read
            pass
    if isinstance(expr, sympy.Rational):
        return Value(number=Fraction(int(expr.p), int(expr.q)))
    return Value(expr=expr, decimal=bool(expr.atoms(sympy.Float)))


def _exact_decimals(expr: Any) -> Any:
    """``expr`` with each decimal (a SymPy ``Float``) replaced by the exact number it writes, or
    ``None`` where one cannot be (its digits beyond the bounds)."""
    import sympy

    try:
        floats = expr.atoms(sympy.Float)
        mapping = {}
        for f in floats:
            mapping[f] = sympy.Rational(str(f))  # the digits written
        exact = expr.xreplace(mapping)
        if _tree_too_large(exact) or _too_many_digits(exact):
            return None
        return exact.doit() if exact.has(*_evaluated()) else exact
    except Exception:  # noqa: BLE001 - left as written
        return None


def _sides(part: str) -> list[str]:
    """``part`` cut at every ``=`` outside brackets (``x = 5``: ``["x ", " 5"]``);
    ``\\sum_{k=1}^{9} k`` has one side (its ``=`` is inside braces)."""
    sides, depth, last = [], 0, 0
    for i, ch in enumerate(part):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "=" and depth == 0 and part[i - 1 : i] not in ("<", ">", "!"):
            sides.append(part[last:i])
            last = i + 1
    return [*sides, part[last:]]


#: A side that names a value: a variable (``x``, ``a_1``, ``\theta``) or a function (``f(x)``).
_NAME = re.compile(
    r"\s*(?:[A-Za-z](?:_\{?[A-Za-z0-9]+\}?)?(?:\s*\(\s*[A-Za-z](?:\s*,\s*[A-Za-z])*\s*\))?"
    r"|\\[A-Za-z]+)\s*"
)


def _read_part(part: str, boxed: bool = False) -> Value | None:
    """One part's value (step 3); a part written as an equation, see :func:`_equation_value`;
    in a box, ``A \\approx B`` is ``A`` only where the number ``B`` is ``A`` rounded to its digits
    (``\\frac{1}{3} \\approx 0.33``), else nothing (``\\boxed{3 \\approx 4}``)."""
    approximate = _APPROX.split(part)
    if boxed and len(approximate) > 1 and approximate[0].strip():
        value = _read_part(approximate[0], boxed)
        if value is None or all(_rounds(value, side) for side in approximate[1:]):
            return value
        return Value()
    *others, last = _sides(part)
    value = _read_side(last)
    if value is None or not others or value.too_large:
        return value
    firsts = [_read_side(s) if _clean(s) else None for s in others]
    if not all(f is not None and (f.number is not None or f.expr is not None) for f in firsts):
        # words before the "=": a number is its last side, as before ("The total = 12"); an
        # expression leaves the reading to the sentence's ("The line is y = 2x + 1")
        if _has_variables(value) or _variable_left_side(others[-1] + "="):
            return None  # "The answer is x + 1 = 3": the sentence's reading (no plain number)
        return value
    names = 0
    while names < len(others) and _NAME.fullmatch(others[names]):
        names += 1
    if 0 < names < len(others):  # x = 4 - 1 = 3: names, then a chain of numbers
        if any(map(_has_variables, firsts[names:])):  # type: ignore[arg-type]
            return Value(equation=(_as_expr(firsts[0]), _as_expr(value)), relation=True)
        return _equation_value(firsts[names:], value, False, boxed)  # type: ignore[arg-type]
    return _equation_value(firsts, value, names == len(others), boxed)  # type: ignore[arg-type]


_APPROX = re.compile(r"\\approx(?![A-Za-z])")


def _rounds(value: Value, text: str) -> bool:
    """``text`` is a number that ``value`` rounds to at the digits written (``0.33`` for 1/3)."""
    written = _plain_value(_strip_ends(text))
    exact = value.number if value.number is not None else None
    if exact is None and _is_number(value.expr):
        exact = _as_fraction(value.expr)
    if written is None or written.number is None or exact is None or written.percent:
        return False
    point = _strip_ends(text).partition(".")[2]
    places = len(point) if point.isdigit() else 0
    return abs(exact - written.number) <= Fraction(1, 2 * 10**places)


def _equation_value(firsts: list[Value], last: Value, named: bool, boxed: bool = False) -> Value:
    """A part written as an equation: its last side where the other sides name it (``x = 5``,
    ``a = 12``) or where no side has a variable (``8 - 5 = 3``; in a box every side must have the
    same value: ``\\boxed{4 = 3}`` and ``\\boxed{1 + 1 = 3}`` equal nothing); else a relation, compared only as an equation
    (``y = 2x + 1``, ``x^2 - 1 = 0``)."""
    if any(f.too_large for f in firsts):
        return Value(too_large=True)
    if (
        boxed
        and not any(map(_has_variables, [*firsts, last]))
        and not all(_values_equal(f, last) for f in firsts)
    ):
        return Value()  # 4 = 3, 1 + 1 = 3: a false equation of numbers names two values
    equation = (_as_expr(firsts[0]), _as_expr(last))
    if (named and not _has_variables(last)) or not any(map(_has_variables, [*firsts, last])):
        return replace(last, equation=equation)
    return Value(equation=equation, relation=True)


def _as_expr(value: Value) -> Any:
    import sympy

    if value.number is not None:
        return sympy.Rational(value.number.numerator, value.number.denominator)
    return value.expr


def _has_variables(value: Value) -> bool:
    return value.expr is not None and bool(getattr(value.expr, "free_symbols", False))


def _tuple_value(part: str) -> Value | None:
    """A tuple inside a list (``(2, 2), (6, 2)``; ``(0;-2;6)``) as one value, a SymPy ``Tuple``
    of its exact parts, or ``None`` where ``part`` is no such tuple or a component is unread."""
    import sympy

    if not (part.startswith("(") and part.endswith(")")) or not _balanced(part[1:-1]):
        return None
    components, seps = _top_level_split(part[1:-1])
    if len(components) < 2 or len(set(seps)) != 1 or seps[0] not in (",", ";"):
        return None
    values = [_read_side(c) for c in components]
    if any(v is None or v.too_large or (v.number is None and v.expr is None) for v in values):
        return None
    return Value(expr=sympy.Tuple(*(_as_expr(v) for v in values if v is not None)))


#: A relation with no left side (``\\neq 3``, ``\\geq 3``, ``\\to 3``, ``> 3``): no value.
_LEADING_RELATION = re.compile(
    r"\s*(?:\\(?:neq?|geq?|leq?|gt|lt|to|rightarrow|Rightarrow|longrightarrow|mapsto|implies"
    r"|neg|lnot|approx|sim|simeq|cong)(?![A-Za-z])|[<>≠≤≥→⇒¬≈∼])"
)


#: A repeating decimal: ``0.\\overline{3}``, ``0.1\\overline{6}``, ``2.\\overline{142857}``.
_REPEATING = re.compile(
    r"(?P<sign>-)?\s*(?P<whole>\d{0,50})\.(?P<fixed>\d{0,50})\s*\\overline\s*\{\s*(?P<period>\d{1,50})\s*\}"
)


#: A numeral with a base subscript: ``1011_2``, ``204_{5}``, ``1F_{16}`` (digits and capitals).
_BASE_NUMERAL = re.compile(
    r"(?P<sign>-)?\s*(?P<digits>\d[0-9A-Z]*(?:\.[0-9A-Z]*)?)_\s*(?:\{\s*(?P<b1>\d+)\s*\}|(?P<b2>\d))"
)
#: A subscript on a numeral anywhere in a text (``1011_2 + 1``, ``1011_{(2)}``, ``(1011)_2``).
_BASE_NUMERAL_IN = re.compile(r"(?:(?<![\w\\])\d[0-9A-Z.]*|\))\s*_")


def _numeral_value(match: re.Match[str]) -> Value:
    """A numeral with a base subscript as the number it writes in that base (bases 2 to 36,
    digits valid for the base, a whole number), else a value equal to nothing."""
    base = int(match["b1"] or match["b2"])
    if not 2 <= base <= 36 or "." in match["digits"]:
        return Value()
    try:
        value = int(match["digits"], base)
    except ValueError:  # a digit the base does not have (129_2)
        return Value()
    return Value(numeral=(base, -value if match["sign"] else value))


def _numerals_equal(gold: Value, pred: Value) -> bool:
    """A numeral with a base subscript equals a numeral of the same base and value (a bare
    number is one of base 10), and a bare whole number whose digits, read in the base of the
    reference, are its value (``204`` answers ``204_5``, as Math-Verify reads both)."""
    bases = [v.numeral[0] if v.numeral else 10 for v in (gold, pred)]
    values = [v.numeral[1] if v.numeral else v.number for v in (gold, pred)]
    if bases[0] == bases[1]:
        return values[0] is not None and values[0] == values[1]
    number = pred.number
    if gold.numeral is None or pred.numeral is not None or number is None:
        return False
    if pred.decimal or pred.percent or number.denominator != 1:
        return False
    try:
        digits = int(str(abs(number.numerator)), bases[0])
    except ValueError:
        return False
    return (-digits if number < 0 else digits) == values[0]


def _read_side(part: str) -> Value | None:
    part = _strip_ends(part)
    if _LEADING_RELATION.match(part):
        return Value()  # read, equal to nothing
    numeral = _BASE_NUMERAL.fullmatch(part)
    if numeral:  # 1011_2 is eleven: never the number of its digits
        return _numeral_value(numeral)
    tuple_value = _tuple_value(part)
    if tuple_value is not None:
        return tuple_value
    if len(part) > 2 and part[0] == "(" and part[-1] == ")" and _balanced(part[1:-1]):
        part = part[1:-1].strip()  # "(2)", "(-5)": one value in parentheses is that value
    if not part:
        return None
    repeating = _REPEATING.fullmatch(part)
    if repeating:  # 0.\overline{3} is 1/3, 0.1\overline{6} is 1/6
        fixed, period = repeating["fixed"], repeating["period"]
        whole = Fraction(f"{repeating['whole'] or 0}.{fixed}" if fixed else repeating["whole"] or 0)
        cycle = Fraction(int(period), (10 ** len(period) - 1) * 10 ** len(fixed))
        return Value(number=-(whole + cycle) if repeating["sign"] else whole + cycle)
    value = _plain_value(part)
    if value is not None:
        return value
    if not _clean(part):
        return None
    return _sympy_value(part, whole=True)


#: A TeX comment: an unescaped ``%`` to the end of its line, with the spaces before it (math
#: mode ignores them), that line break and the spaces that open the next line (TeX reads ``4 %
#: note\n 3`` as ``43``).
_TEX_COMMENT = re.compile(r"[ \t]*(?<!\\)%[^\n]*\n[ \t]*")


def _uncomment_boxes(text: str) -> str:
    """``text`` with the TeX comments inside its boxes removed as TeX removes them (``\\boxed{4 %
    \n 3}`` boxes ``43``); a ``%`` with no line break after it in the box stays a percent sign
    (``\\boxed{25%}``), and so does ``\\%``. One pass over the boxes."""
    if "%" not in text:
        return text
    boxes, _ = _scan_boxes(text)
    pieces, last = [], 0
    for _, a, b, _ in boxes:
        if "%" in text[a:b]:
            pieces += [text[last:a], _TEX_COMMENT.sub("", text[a:b])]
            last = b
    return "".join(pieces) + text[last:] if pieces else text


def _answer_text(text: str) -> str | None:
    """The text the rules read: ``text`` itself up to :data:`MAX_ANSWER_CHARS`, the final region
    of a reply up to :data:`MAX_REPLY_CHARS` (:func:`_final_region`), else ``None``."""
    if len(text) <= MAX_ANSWER_CHARS:
        return text
    if len(text) > MAX_REPLY_CHARS:
        return None
    try:
        return _final_region(text)
    except Exception:  # noqa: BLE001 - a guard: never raise on any text
        return None


def _parse_answer_now(text: object, hedges: bool = True) -> ParsedAnswer | None:
    """:func:`parse_answer` in this process, without a deadline (the worker's side); without
    ``hedges``, as a reference is read (of the hedge rules only that of runs of boxes:
    :func:`parse_reference`)."""
    region = _answer_text(text) if isinstance(text, str) else None
    return None if region is None else _parse_text(_uncomment_boxes(_unglued(region)), hedges)


#: A Unicode vulgar fraction (``½``, ``¾``, ``⅞``), and invisible characters between digits.
_VULGAR = re.compile("(\\d?)([\u00bc-\u00be\u2150-\u215e])")
_INVISIBLE_IN_DIGITS = re.compile(
    "(?<=\\d)[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]+(?=\\d)"
)


def _unglued(text: str) -> str:
    """``text`` with a vulgar fraction written as the fraction it is, a mixed number where it is
    glued to digits (``1½`` is ``1 1/2``, 3/2), and digits that an invisible character splits
    joined (``3\\u200b0`` is 30, as the reader sees it)."""
    text = _INVISIBLE_IN_DIGITS.sub("", text).replace("\uff1a", ": ")  # a full-width colon

    def fraction(match: re.Match[str]) -> str:
        value = Fraction(unicodedata.numeric(match[2])).limit_denominator(10)
        return f"{match[1]} {value.numerator}/{value.denominator}" if match[1] else f"{value}"

    return _VULGAR.sub(fraction, text)


@functools.lru_cache(maxsize=4096)
def _parse_text(text: str, hedges: bool = True) -> ParsedAnswer | None:
    require_math_verify()
    try:
        # With a \boxed answer only its content is read (math-verify too parses the boxed first),
        # so a worked solution around it (a MATH reference) is not bounded.
        boxed = _BOX_COMMAND.search(text)
        if _structure_too_large(final_span(text) if boxed else text):
            return ParsedAnswer(text=text, kind="scalar", parts=(Value(too_large=True),))
        return _parse_answer(text, hedges)
    except Exception:  # noqa: BLE001 - a guard: never raise on any text
        return None


def _parse_answer(text: str, hedges: bool = True) -> ParsedAnswer | None:
    if not _readable(text):
        return None
    boxed = _BOX_COMMAND.search(text)
    if _hedged(text, answer=hedges) or (not boxed and _inline_math_over_lines(text)):
        return ParsedAnswer(text=text, kind="scalar", parts=(Value(),))  # read, equals nothing
    span = final_span(text)
    parsed = _read_span(text, span, boxed=boxed is not None, answer=hedges)
    if parsed is not None:
        return parsed
    # A sentence: a pair of numbers it ends with counts ("The point is (2, 3)."), else its last
    # value (math-verify reads the text with its delimiters), unless it hedges ("3 or maybe 4"),
    # negates that value ("not 42") or ends with numbers side by side ("7 8").
    if hedges and (_sentence_hedged(span) or _sentence_hedged(text)):  # math-verify reads text
        return ParsedAnswer(text=text, kind="scalar", parts=(Value(),))
    tail = _FINAL_TUPLE.search(span)
    parsed = _read_span(text, tail.group()) if tail else None
    if parsed is not None:
        return parsed
    negations = _INVISIBLE.sub("", span).translate(_LOOKALIKES)
    if (_NEGATED.search(negations) and not _NUMBER_NOT_LAST.search(negations)) or (
        _FINAL_JUXTAPOSED.search(span)
    ):
        return ParsedAnswer(text=text, kind="scalar", parts=(Value(),))
    prepared = text.strip().replace("\u2212", "-").replace("\\$", " ")
    value = _sympy_value(prepared, whole=False, answer=hedges)
    if hedges:  # an answer's sentence: its number as the rest of the sentence lets it stand
        value = _sentence_number(span, value)
    if value is not None and value.equation is None and _is_tuple(value.expr):
        # "... the ordered pair is $(7, 6)$.": a tuple, compared part by part
        members = tuple(_expr_value(m) for m in value.expr.args)
        if 1 < len(members) <= MAX_PARTS:
            return ParsedAnswer(text=text, kind="tuple", parts=members)
    return ParsedAnswer(text=text, kind="scalar", parts=(value or Value(),))


# ----------------------------------------------------------------------------- a sentence's number

_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
#: A number-like token of a sentence: a sign written apart (``- 3``, ``− 3``), digits (groups of
#: three after commas), scientific notation (``3e1``, ``3 \\times 10^2``, ``3×10²``), a ``%``.
_SENTENCE_NUMBER = re.compile(
    r"(?<![\w.^{/])(?P<sign>-[ \t]?)?(?P<num>\d+(?:,\d{3})+(?:\.\d+)?(?![\d,])|\d+(?:\.\d+)?|\.\d+)"
    r"(?:/(?P<den>[1-9]\d*)(?!\d|\.\d))?"
    r"(?:[ \t]*(?:[eE](?P<e1>[-+]?\d+)(?![\w])|(?:\\times|\\cdot|×|\*|x)[ \t]*10[ \t]*"
    r"(?:\^[ \t]*\{?[ \t]*(?P<e2>[-+]?\d+)[ \t]*\}?|(?P<e3>[⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+))))?"
    r"(?P<pct>[ \t]*%)?"
)
#: What ends a sentence's number's reading when it follows the number: a scale word
#: (``3 thousand``, ``3k``), arithmetic (``3 squared``), a bound (``3 or more``), a second
#: value (``3:20``, ``3 (4)``, ``but 4 is also possible``).
_AFTER_NUMBER = re.compile(
    rf"^[ \t]*(?:{_CHANGE_WORDS}|[:^!²³¹⁰-₟‰‱]|\\times|\\cdot|×|\\pm|±)"
    r"|(?i:\bsquared\b|\bcubed\b|\bto the power\b|\bfactorial\b|\bor (?:more|less|fewer|above"
    r"|below|greater|higher|lower|larger|smaller|so)\b|\bat (?:most|least)\b|\bpossible\b"
    r"|\balternatively\b|\bplus\b|\bminus\b|\btimes\b|\bdivided\b|\bpercent of\b"
    r"|\bbelow (?:zero|freezing|sea level)\b|\bper[ -]?mill?e\b)"
    r"|(?<![A-Za-z])B\.?C\.?(?:E\.?)?(?![A-Za-z])"
    # a letter glued to it (3x, 3M, 3bn), -ish, [.,]digit (3.000.000), an operator (3 + x),
    # a scale word (3 bn, 3 score), a fraction word (3 and a half, 3 quarters), a bound or
    # relation in words (3 and above, 3 less than x)
    r"|^(?:(?!(?:cm|mm|km|m|kg|mg|g|s|ms|h|hr|hrs|min|ml|mL|L|ft|lb|lbs|oz|cents?|mph|kph)"
    r"(?![A-Za-z]))[A-Za-z]|-[ \t]*ish\b|[.,]\d|[ \t]*(?:[-+*/=>≈∼]|<(?!/)"
    r"|\\(?:times|cdot|div|pm|mp|frac|dfrac|sqrt|leq?|geq?|neq?|approx|sim|over|cdots|ldots"
    r"|dots|ast|star|circ|wedge|vee|cup|cap|setminus|mod|bmod|pmod)(?![A-Za-z]))"
    # a word that changes its sign or scale (3 below zero, 3 BC, 3 per mille, 3 ppm)
    r"|[ \t]+(?:[MB](?![A-Za-z])|(?i:below|beneath|under (?:zero|par|sea level)|bce?|b\.c\.(?:e\.)?"
    r"|per[ -]?mill?e|per (?:thousand|ten thousand|million|billion)|pp[mbt]|basis points?"
    r"|bn|mn|mln|bln|tn|score|gross|halves|halfs?|thirds?|quarters?|fourths?"
    r"|fifths?|sixths?|sevenths?|eighths?|ninths?|tenths?|and a (?:half|third|quarter)"
    r"|and (?:above|below|up|upwards?|over|under|beyond|higher|lower|more|less)"
    r"|(?:less|more|fewer|greater|smaller|larger) than|or (?:so|thereabouts))(?![A-Za-z])))"
)
#: A left side with a variable before the ``=`` just before a sentence's number (``x + 1 = 3``,
#: ``2x = 3``, ``x^2 = 3``): a relation, compared only as an equation; a name alone (``x = 3``)
#: and numbers alone (``2 + 3 = 5``) are read.
_LEFT_SIDE = re.compile(
    r"(?<![A-Za-z])((?:(?<![A-Za-z])[A-Za-z](?![A-Za-z])|\d|[-+*/^(){}_.\s\\])+)=[ \t]*$"
)
#: A relation or negation just before a sentence's number (``greater than 3``, ``at most 3``,
#: ``half of 3``, ``cannot be 3``, ``different from 3``, ``не 3``, ``x \\geq 3``, ``→ 3``).
_BEFORE_NUMBER = re.compile(
    r"(?:\b(?:greater|less|more|fewer|larger|smaller|bigger|higher|lower) than|\bat (?:most|least)"
    r"|\bup to|\babove|\bbelow|\bexceed(?:s|ing)?|\b(?:half|twice|double|triple|thrice|third"
    r"|quarter|square|cube|root|sqrt) of|\bhalf|\bdifferent from|\bother than|\bcannot|\bcan't"
    r"|\bnot|n't|\bnever|\bexcept|\bno longer|не|nicht|pas|不是|不|非|≠|≥|≤|>|<|→|⇒|=>"
    r"|\\(?:neq?|geq?|leq?|gt|lt|to|rightarrow|Rightarrow|implies|approx|sim|simeq|cong)(?![A-Za-z])"
    # an approximation, a bound in words, an operation in words (twice 2, the reciprocal of 3)
    r"|≈|∼|\b(?:almost|nearly|roughly|approximately|approx|about|around|circa|under|over"
    r"|upwards(?: of)?|downwards(?: of)?|beyond|twice|thrice|(?:tends?|tending|converg(?:es|ing)"
    r"|approach(?:es|ing)?) to|(?:reciprocal|inverse|negative|opposite|multiple|factor|divisor"
    r"|power|fraction|logarithm|log|product|quotient|difference|square|cube) of))"
    r"(?:\s+(?:be|is|or|equal|equals|to|exactly|just|the|a|number|value|answer|of))*\s*$",
    re.IGNORECASE,
)
#: A LaTeX command (TeX reads a one-token argument: ``\\sqrt 3``, ``\\frac 12``, ``\\sqrt[3] 8``)
#: or a function word (``sqrt 3``, ``ln 3``, ``sin(3``) just before a sentence's number: the
#: number is its argument. Commands that only format or space (``\\text``, ``\\quad``) are none.
_ARGUMENT_OF = re.compile(
    r"(?:\\(?!(?:text|textbf|textit|textrm|textnormal|mathbf|mathrm|mathit|mathnormal|emph|bm"
    r"|boldsymbol|displaystyle|textstyle|quad|qquad|left|right|[bB]igg?[lr]?|enspace|thinspace"
    r"|medspace|thickspace|space|hfill|noindent|par|newline|item|hline)(?![A-Za-z]))[A-Za-z]+"
    r"(?:[ \t]*\[[^\]\n]{0,20}\])?(?:[ \t]*\{[^{}\n]{0,20}\})*"
    r"|(?<![A-Za-z])(?i:sqrt|cbrt|root|ln|lg|log\d*|exp|sinh?|cosh?"
    r"|tanh?|cot|sec|csc|arc(?:sin|cos|tan)|arg|abs|floor|ceil|det|gcd|lcm|max|min)|[√∛∜])"
    # its limits, powers and spacing (\log_2 8, \sin^{2} 3, \log~ 3), or a power's bare
    # exponent (e^ 3)
    r"(?:[ \t]*[_^][ \t]*(?:\{[^{}\n]{0,20}\}|\w))*(?:[ \t~]|\\[,;: !])*\(?[ \t]*$"
    r"|[_^][ \t{]*$"
)
#: A sign in words just before a sentence's number (``minus 3``, ``negative 3``).
_SIGN_WORD = re.compile(r"\b(?:minus|negative)\s*$", re.IGNORECASE)
#: A number, then a negated other number, ending the sentence (``5, not 4``): the first.
_NUMBER_NOT_NUMBER = re.compile(r"^[ \t]*,?[ \t]*(?:and |but )?not[ \t]*$", re.IGNORECASE)
#: Two numbers that make one quantity (``3:20``, ``3 hours and 20``) or a second value ``3 (4``.
_COMPOUND_GAP = re.compile(r"^[ \t]*(?::|\(|[A-Za-z]+[ \t]+and)[ \t]*$")


#: A parenthesis after a sentence's number that holds another (``3 (4)``, ``7 (seven)``).
_PAREN_AFTER = re.compile(r"[ \t]*\([ \t]*([A-Za-z]+)[ \t]*\)")


def _token_value(token: re.Match[str]) -> Fraction:
    value = Fraction(token["num"].replace(",", "")) / int(token["den"] or 1)
    exponent = token["e1"] or token["e2"] or (token["e3"] or "").translate(_SUPERSCRIPTS)
    if exponent and abs(int(exponent)) <= MAX_EXPONENT:
        value *= Fraction(10) ** int(exponent)
    return value


def _signed(sentence: str, token: re.Match[str], value: Fraction) -> Fraction:
    """A sentence's number with its sign (``- 3``, ``minus 3``; not the ``-`` of ``5 - 3``)."""
    before = sentence[max(0, token.start() - 40) : token.start()]
    negative = _SIGN_WORD.search(before) is not None
    if token["sign"] and not re.search(r"(?:^|[^A-Za-z\\])[A-Za-z]$|[\d)\]}]$", before.rstrip()):
        negative = not negative
    return -value if negative else value


def _variable_left_side(text: str) -> bool:
    """``text`` ends with ``=`` after a left side with a variable in an expression (``x + 1 =``,
    ``2x =``, ``x^2 =``; not ``x =`` nor ``2 + 3 =``)."""
    left = _LEFT_SIDE.search(text[-80:])
    return bool(left and re.search(r"[A-Za-z]", left[1]) and re.search(r"[\d+*/^(\\-]", left[1]))


def _sentence_number(span: str, value: Value | None) -> Value | None:
    """The value of a final span read as a sentence (step 3), checked against the rest of its
    sentence: ``value`` (math-verify's reading) where it is no plain number; else the number it
    reads (the last token of that value, else the last token) as written there, with the sign
    written apart (``minus 3``, ``- 3``: -3), its scientific notation (``3 \\times 10^2``: 300)
    and its ``%``, unless the rest of the sentence can change it (:data:`_AFTER_NUMBER`,
    :data:`_BEFORE_NUMBER`, a different number after it, a compound ``3:20``): then a value equal
    to nothing. ``5, not 4`` is 5."""
    if value is not None and value.number is None:
        return value
    at = max(span.rfind(digit) for digit in "0123456789")
    if at < 0:
        return value
    sentence = _INVISIBLE.sub("", _sentence_at(span, at)).translate(_LOOKALIKES)
    sentence = sentence.replace("\u2212", "-").replace("\\$", " ").replace("\\%", "%")
    tokens = list(_SENTENCE_NUMBER.finditer(sentence))
    if not tokens:
        return value
    negated = len(tokens) > 1 and bool(
        _NUMBER_NOT_NUMBER.match(sentence[tokens[-2].end() : tokens[-1].start()])
        and not sentence[tokens[-1].end() :].strip(" \t\n.!")
    )
    if negated:
        tokens.pop()  # "5, not 4": the negated number is no value
    values = [_token_value(t) for t in tokens]
    signed = [_signed(sentence, t, v) for t, v in zip(tokens, values, strict=True)]
    k = len(tokens) - 1
    if value is not None:
        wanted = abs(value.number)  # type: ignore[arg-type]
        mantissas = [abs(Fraction(t["num"].replace(",", ""))) / int(t["den"] or 1) for t in tokens]
        matches = [
            i for i in range(len(tokens)) if wanted in (values[i], mantissas[i], values[i] / 100)
        ]
        if not matches and not negated:
            return value
        exact = [i for i in matches if value.number in (signed[i], signed[i] / 100)]
        k = (exact or matches)[-1] if matches else k
    token = tokens[k]
    if any(v != signed[k] for v in signed[k + 1 :]):
        return Value()  # a different number after it (-3 is not 3)
    after = sentence[token.end() :]
    if _AFTER_NUMBER.search(after):
        return Value()
    word = _PAREN_AFTER.match(after)
    if word and _NUMBER_WORDS.get(word[1].lower(), values[k]) != values[k]:
        return Value()  # 3 (4), 3 (four): a second value
    previous = tokens[k - 1].end() if k else 0
    before = sentence[previous : token.start()]
    if k and values[k - 1] != values[k] and _COMPOUND_GAP.match(before):
        return Value()
    if _BEFORE_NUMBER.search(before[-60:]):
        return Value()
    if _variable_left_side(sentence[: token.start()]):
        return Value()  # x + 1 = 3, 2x = 3: a relation, no plain number
    if _ARGUMENT_OF.search(sentence[max(0, token.start() - 40) : token.start()]):
        return Value()  # \\sqrt 3, \\frac 12, sqrt 3, ln 3: a function's argument
    negative = _SIGN_WORD.search(before[-40:]) is not None
    if token["sign"]:
        ahead = sentence[: token.start()].rstrip()
        if re.search(r"(?:^|[^A-Za-z\\])[A-Za-z]$|[\d)\]}]$", ahead):
            return Value()  # 5 - 3, x - 3: arithmetic, not a sign
        negative = not negative
    number = -values[k] if negative else values[k]
    decimal = "." in token["num"] or bool(token["e1"] or token["e2"] or token["e3"])
    return Value(number=number, decimal=decimal, percent=bool(token["pct"]))


def _is_tuple(expr: Any) -> bool:
    import sympy

    return isinstance(expr, sympy.Tuple)


#: What may stand between boxed (or emphasised) answers that are the parts of one answer
#: (``\\boxed{1} and \\boxed{2}``, ``**1** or **2**``): separators, spaces and math delimiters.
_BOX_GAP = re.compile(
    r"\s*(?:[A-Za-z]+\s*(?=,|;|\band\b))?"  # a unit before a separator: "\\boxed{1} papers and"
    r"(?:\s|,|;|\band\b|\bor\b|\$|\\[()\[\]]|\\[,;:! ]|\\q?quad|\\text\{\s*(?:and|or)?\s*\})*"
)


#: Longest gap (spaces collapsed) between two boxed answers that may be only separators.
_MAX_BOX_GAP = 200


def _separator_gap(gap: str) -> bool:
    gap = " ".join(gap.split())  # linear; leaves _BOX_GAP no long run of spaces to backtrack on
    return len(gap) <= _MAX_BOX_GAP and _BOX_GAP.fullmatch(gap) is not None


def _runs(
    text: str, boxes: list[tuple[int, int, int, int]]
) -> list[tuple[tuple[str, ...], int, int]]:
    """The *runs* of the boxes of ``text`` (:func:`_scan_boxes`): boxes with only separators
    between them (:data:`_BOX_GAP`) make one run, any other text starts a new one. Each run is
    ``(its distinct contents in order, start of its first box, end of its last)``."""
    runs: list[tuple[dict[str, None], int, int]] = []
    for k, (start, a, b, end) in enumerate(boxes):
        if not k or not _separator_gap(text[boxes[k - 1][3] : start]):
            runs.append(({}, start, end))
        contents, first, _ = runs[-1]
        contents[text[a:b].strip()] = None
        runs[-1] = (contents, first, end)
    return [(tuple(contents), start, end) for contents, start, end in runs]


# Hedges in words: two different numbers joined by "or", in any spelling, or by a hedge word.
#: "or" in the languages a model may answer in, and as words: read after lookalike letters are
#: mapped to the Latin ones (:data:`_LOOKALIKES`: a Cyrillic "оr" is "or").
_OR_WORDS = (
    "or ou oder o ó oppure eller lub albo veya или либо або 或者 或是 还是 或 または 또는 atau أو"
    " یا או ∨ \\lor \\vee || else".split()
) + ["if not"]
#: Letters that look like ``o``, ``r`` and ``u`` (Cyrillic, Greek, Armenian, small capitals).
_LOOKALIKES = str.maketrans(dict(zip("оОοΟօᴏⲟгʀɾᴦυսᴜ", "oOoOooorrrruuu", strict=True)))
#: Characters that do not show (zero-width spaces and joiners, a soft hyphen, direction marks).
_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")
_MARKUP = re.compile(r"\\\$|\\[,;:! ]|\\q?quad|\\[()\[\]]|\$|[*_`]|\\footnote\{|\\emph\{")


def _words(alternatives: str) -> str:
    """A pattern for whole words (no letter right before or after; digits may touch: ``3或4``)."""
    return rf"(?<![^\W\d])(?:{alternatives})(?![^\W\d])"


def _unaccented(text: str) -> str:
    """``text`` in NFKC (fullwidth and mathematical letters are plain ones) without the accents
    of its letters (``ór`` is ``or``; ``≠`` stays)."""
    text = unicodedata.normalize("NFKD", text)
    kept = [
        c
        for k, c in enumerate(text)
        if not (unicodedata.combining(c) and k and text[k - 1].isalpha())
    ]
    return unicodedata.normalize("NFC", "".join(kept))


_OR = _words(
    "|".join(
        re.escape(w)
        for w in sorted({_unaccented(w).translate(_LOOKALIKES) for w in _OR_WORDS}, key=len)[::-1]
    )
)
_HEDGE_WORD = _words("maybe|perhaps|possibly|probably|alternatively|alternately|otherwise")
#: Words that may follow "or" before the number (``or maybe``, ``or it could be``).
_FILLER = _words(
    "maybe|perhaps|possibly|probably|even|else|rather|alternatively|actually|also|just|it|"
    "it['\u2019]s|its|is|was|could|might|may|would|should|can|be|the|answer|value|result|we|get|"
    "i|i['\u2019]d|think|guess|say|equivalently|instead|that|this"
)
#: A number as the hedge rules see it: ``3``, ``-1,234.5``, ``3/4``, ``\\frac{3}{4}``, ``25%``;
#: not part of a word, a power, a decimal or a fraction.
#: Number words (``3 or four`` names two numbers), with their values.
_NUMBER_WORDS = {
    w: k
    for k, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
        " fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
} | {w: 10 * k for k, w in enumerate("thirty forty fifty sixty seventy eighty ninety".split(), 3)}
_HEDGE_NUMBER = (
    r"(?<![A-Za-z0-9_.^/\\])-?(?:\\[dt]?frac\{-?\d+\}\{\d+\}|(?:\d+(?:,\d{3})*(?:\.\d+)?|\.\d+)"
    r"(?:/\d+)?)%?(?![A-Za-z0-9_/]|[.,]\d)"
    rf"|(?<![A-Za-z])(?:{'|'.join(sorted(_NUMBER_WORDS, key=len)[::-1])})(?![A-Za-z])"
)
#: What joins two numbers into a hedge (in text with single spaces: :func:`_plain_words`):
#: punctuation, "or" in any spelling with up to four fillers, or a hedge word, then an optional
#: name and ``=`` (``x = 3 or x = 4``). ``3, or possibly 4``; ``3.\nOr 4``; ``3 (maybe 4)``.
_JOIN = (
    rf"[^\w\\]{{0,12}}?(?:{_OR}(?: {_FILLER}){{0,4}}|{_OR} ?,(?: [^\W\d]+){{1,4}} ?,"
    rf"|{_HEDGE_WORD}(?: {_FILLER}){{0,3}})"
    r"[^\w\\]{0,12}?(?:[A-Za-z]\w{0,20} ?= ?)?"
)
_NUMBER = re.compile(_HEDGE_NUMBER)
#: Any value that a hedge joins to an answer (``\\boxed{A} or maybe B``, ``or \\sqrt{2}``): a
#: compact expression, up to the next space (:func:`_hedge_beside`).
_VALUE = r"(?:\\[A-Za-z]+|[\w.^+\-*/'!|]|\{[^{}]{0,60}\}|\([^()]{0,60}\))+"
_JOINED_VALUE = re.compile(rf"{_JOIN}(?P<v>{_VALUE})", re.IGNORECASE)
_VALUE_JOINED = re.compile(rf"(?<![^ (\[])(?P<v>{_VALUE}){_JOIN}$", re.IGNORECASE)
_JOINED_NUMBER = re.compile(rf"{_JOIN}(?P<n>{_HEDGE_NUMBER})", re.IGNORECASE)
#: A second value in parentheses right after an answer: ``\\boxed{3} (4)``.
_PAREN_NUMBER_BESIDE = re.compile(rf" ?\( ?(?P<n>{_HEDGE_NUMBER}) ?\)", re.IGNORECASE)
_NUMBER_JOINED = re.compile(rf"(?P<n>{_HEDGE_NUMBER}){_JOIN}$", re.IGNORECASE)
#: A sentence that opens with "or" or a hedge word continues the one before (``3.\nOr 4.``);
#: one that ends with it (``3 or.``) continues into the next.
_OPENS_WITH_JOIN = re.compile(rf"[\W_]*(?:{_OR}|{_HEDGE_WORD})", re.IGNORECASE)
_ENDS_WITH_JOIN = re.compile(rf"(?:{_OR}|{_HEDGE_WORD})[\W_]*$", re.IGNORECASE)
#: Where a sentence ends: ``.``, ``!`` or ``?`` before white space, or a line break.
_SENTENCE_BREAK = re.compile(r"[.!?]+(?=\s)|\n")
#: How far around a run of boxes or emphasised values a hedge is looked for, in characters.
_BESIDE = 160


def _plain_words(text: str) -> str:
    """``text`` as the hedge rules read it: NFKC (fullwidth and mathematical letters are plain
    ones), invisible characters dropped, lookalike letters mapped (:data:`_LOOKALIKES`), math
    delimiters, emphasis marks, ``\\text{}`` wrappers and LaTeX spaces gone, white space single."""
    text = _unaccented(text).replace("\u2212", "-")
    text = _INVISIBLE.sub("", text).translate(_LOOKALIKES)
    text = _MARKUP.sub(" ", _WRAPPERS.sub(r" \1 ", text))
    return " ".join(text.split())


def _number_forms(text: str) -> frozenset[Fraction]:
    """The values a number written so may stand for (``25%``: 25 and 1/4; ``four``: 4), or none."""
    if text.strip().lower() in _NUMBER_WORDS:
        return frozenset({Fraction(_NUMBER_WORDS[text.strip().lower()])})
    value = _plain_value(_tidy(text).replace(",", "")) if text.strip() else None
    if value is None or value.number is None:
        return frozenset()
    return frozenset({value.number, value.number / 100} if value.percent else {value.number})


def _different(a: str, b: str) -> bool:
    """Two answers that are not the same number (as written, where either is no number)."""
    forms_a, forms_b = _number_forms(a), _number_forms(b)
    if forms_a and forms_b:
        return forms_a.isdisjoint(forms_b)
    return re.sub(r"\s+", "", _tidy(a)) != re.sub(r"\s+", "", _tidy(b))


def _or_hedged(sentence: str) -> bool:
    """Two different numbers in ``sentence`` joined by "or" (any spelling) or a hedge word
    (:data:`_JOIN`): ``3 or maybe 4``, ``3, or possibly 4``, ``3 ou 4``, ``3.\\nOr 4``; not
    ``x = 3 or x = 3``, and not "or" inside a word (``for``, ``therefore``)."""
    text = _plain_words(sentence)
    numbers = [number.group() for number in _NUMBER.finditer(text)]
    for number in _NUMBER.finditer(text):
        joined = _JOINED_NUMBER.match(text, number.end())
        if joined and _different(number.group(), joined["n"]):
            return True
    if _HEDGE_WORD_ANYWHERE.search(text) and len(numbers) <= _MAX_MARKERS:
        # "Maybe 4, but the answer is 3.", "4 perhaps, but 3.": a hedge word anywhere in it
        return any(_different(a, b) for a, b in combinations(dict.fromkeys(numbers), 2))
    return False


#: A hedge word anywhere in a sentence that names two different numbers, or after an answer.
_HEDGE_WORD_ANYWHERE = re.compile(_HEDGE_WORD, re.IGNORECASE)
#: What hedges in a sentence after the answer (``Or maybe $4$.``, ``But it might be 4.``, ``4 is
#: also possible.``).
_LATE_HEDGE = re.compile(
    rf"{_OR}|{_HEDGE_WORD}|"
    + _words("might|could|may|possible|possibly|also|alternatively|instead|or else|either"),
    re.IGNORECASE,
)
#: "possible" in a bound, which hedges nothing (``the smallest possible value``, ``as small as
#: possible``, ``if possible``).
_NO_HEDGE = re.compile(
    r"\b(?:smallest|largest|greatest|least|biggest|highest|lowest|maximum|minimum|max|min|all"
    r"|every|each|any|only|as|if|where|when|whenever)\s+possible\b",
    re.IGNORECASE,
)
#: A markdown table row (``| 4 | 3 |``), not its rule line (``|---|---|``).
_TABLE_ROW = re.compile(r"^[ \t]*\|.*\|[ \t]*$", re.MULTILINE)


def _late_hedge(text: str, boxes: list[tuple[int, int, int, int]]) -> str | None:
    """A sentence after the answer (the last box, else the last answer marker's sentence) that
    names another number and hedges: ``\\boxed{3}`` then ``But it might be 4.``; ``The final
    answer is $3$. Or maybe $4$.``; ``The answer is 3. 4 is also possible.`` Linear. The answer
    and that sentence as written (a hedge, read again alone: step 0), else ``None``."""
    if boxes:
        answer, end = ", ".join(text[a:b] for _, a, b, _ in boxes[-8:]), boxes[-1][3]
        source = ", ".join(f"\\boxed{{{text[a:b]}}}" for _, a, b, _ in boxes[-8:])
    else:
        markers = list(_ANSWER_IS.finditer(text))
        if not markers:
            return None
        found = _PIECE_END.search(text, markers[-1].end())
        end = found.start() if found else len(text)
        answer, source = text[markers[-1].end() : end], text[markers[-1].start() : end]
    answer, seen = final_span(answer), set[str]()
    for sentence in _SENTENCE_BREAK.split(text[end:]):
        words = _plain_words(sentence)
        if not _LATE_HEDGE.search(_NO_HEDGE.sub(" ", words)):
            continue
        for number in _NUMBER.finditer(words):
            before, after = words[: number.start()].rstrip(), words[number.end() :].lstrip()
            if before[-1:] in _OPERATORS or after[:1] in _OPERATORS:
                continue  # a check's arithmetic ("We could also check that 1+1=2."), no value
            if before[-1:] == "{":  # a command's argument: the value is its expression
                first = words.rfind(" ", 0, number.start()) + 1
                stop = words.find(" ", number.end())
                expression = words[first : stop if stop >= 0 else len(words)]
                if _same_value(answer, expression.rstrip(".,;:!?")):
                    continue  # "or \\sqrt{2}" after \\boxed{\\sqrt{2}}
            if _different(number.group(), answer):
                return source + "\n" + sentence.strip()
        for command in _VALUE_COMMAND.finditer(words):  # "But it might be \\pi."
            first = words.rfind(" ", 0, command.start()) + 1
            stop = words.find(" ", command.end())
            expression = words[first : stop if stop >= 0 else len(words)].rstrip(".,;:!?")
            if expression in seen or len(seen) >= _MAX_MARKERS:
                continue  # each expression read once, at most _MAX_MARKERS of them
            seen.add(expression)
            if not _same_value(answer, expression):
                return source + "\n" + sentence.strip()
    return None


#: A command that writes a value (``\\pi``, ``\\sqrt{2}``, ``\\frac{1}{2}``): in a sentence after
#: the answer that hedges, the expression it is in is a value offered (:func:`_late_hedge`).
_VALUE_COMMAND = re.compile(
    r"\\(?:pi|sqrt|[dt]?frac|infty|ln|log|exp|sin|cos|tan|binom)(?![A-Za-z])"
)


#: Characters of arithmetic beside a number (which then is no value offered in a hedge).
_OPERATORS = frozenset("+-*/=^<>×·÷")


#: Math touching a box from outside that changes it: a sign or operator before it
#: (``$-\\boxed{3}$``, ``\\frac{1}{\\boxed{3}}``); after it, up to the end of its sentence or
#: line, anything but sentence punctuation, white space, a closing math delimiter, words (a unit,
#: ``is the answer``) or another box: an operator, digit or point (``$\\boxed{3} + 1$``,
#: ``\\boxed{3}.5``), a command (``\\boxed{3}\\pi``, ``\\frac``), a letter glued to it
#: (``\\boxed{3}x``; a unit, ``\\boxed{12}cm``, is read), a change word (``\\boxed{3} squared``,
#: ``\\boxed{3}\\text{ thousand}``, ``\\boxed{3}千``: :data:`_CHANGE_WORDS`), ``and`` and a
#: number (``\\boxed{3} and 1/2``), a power or factorial after its closing brackets
#: (``(\\boxed{3})^2``, ``\\boxed{3}!``; ``$\\boxed{3}$!`` ends a sentence).
_BEFORE_BOX = re.compile(r"(?:[-+/^_{]|(?<!\*)\*|\\(?:[dt]?frac|cdot|times|sqrt|div)\{?)[ \t$]*\Z")
_AFTER_BOX = re.compile(
    r"(?:[ \t]*(?:\\right|\\[bB]igg?r?)?[)\]])*[ \t]*[\^!]"
    r"|(?:[ \t$]|\\[)\]]|\\[,;: ]|\\q?quad(?![A-Za-z]))*(?:"
    r"[\d^_*/=>+≈×·÷⋅]|<(?!/)|\.\d|-(?![ \t]*(?:-|—|[A-Za-z]{2,}))"
    r"|\\(?!(?:text|mathrm|mbox|textbf|mathbf|textnormal|textrm|boxed|fbox|framebox|colorbox"
    r"|fcolorbox|quad|qquad|hfill|hspace|vspace|newline|linebreak|footnote|emph|textit|label|tag"
    r"|nonumber|notag|end|par|right|pmod|bmod|mod)"
    r"(?![A-Za-z]))"
    r"[A-Za-z]+"
    r"|(?:\\(?:text|mathrm|mbox)\{[ \t]*)?"
    rf"{_CHANGE_WORDS}"
    r"|(?i:and|plus|times|over|divided by)[ \t]+(?:[$\\]*[\d.]|\\[dt]?frac|a (?:half|third|quarter))"
    r")"
    r"|(?<=[}\w])(?!(?:cm|mm|km|m|kg|mg|g|s|ms|h|hr|hrs|min|ml|mL|L|ft|lb|lbs|oz|cents?|mph|kph"
    r"|st|nd|rd|th)(?![A-Za-z]))[A-Za-z]"
)
#: A relation or a negation just before a box (``x > \\boxed{3}``, ``x \\ge``, ``≠``, ``\\approx``,
#: ``not \\boxed{3}``, ``at least``; an arrow, ``\\implies \\boxed{3}``, a congruence, ``\\equiv
#: \\boxed{9} \\pmod{11}``, and a tag, ``<answer>\\boxed{3}``, are none); a digit or point glued to
#: it (``1\\boxed{3}``, ``0.\\boxed{3}``).
_RELATION_BEFORE_BOX = re.compile(
    r"(?:[<>≤≥≠≈∼≃∝¬]|!=|\\(?:neq?|[lg]eq?q?(?:slant)?|[lg]t|approx|sim|simeq|propto|ll|gg|pm|mp"
    r"|neg|lnot|not)(?![A-Za-z]))[ \t]*$"
)
_NEGATION_BEFORE_BOX = re.compile(
    r"(?:\b(?:not|never|except|other than|no longer|different from|(?:greater|less|more|fewer"
    r"|larger|smaller) than|at (?:most|least))|n't|не|nicht|pas|不是|不)"
    r"(?:\s+(?:be|is|equal|equals|to|exactly|just|the|a|number|value|answer))*\s*$",
    re.IGNORECASE,
)
_GLUED_BEFORE_BOX = re.compile(r"\d\.?\Z|(?:^|[\s(])\.\Z")


def _box_touched(text: str, boxes: list[tuple[int, int, int, int]]) -> bool:
    """A box that math outside it changes (:data:`_BEFORE_BOX`, :data:`_AFTER_BOX`): read but
    equal to nothing."""
    for start, _, _, end in boxes[-_MAX_MARKERS:]:
        before = text[max(0, start - 12) : start]
        if _BEFORE_BOX.search(before) and not re.search(
            r"\\(?:text|mathrm|textbf|mathbf)\{[ \t$]*$", before
        ):
            return True
        if _GLUED_BEFORE_BOX.search(text[max(0, start - 2) : start]):
            return True
        words = re.sub(r"<[^<>]{0,40}>", " ", _plain_words(text[max(0, start - 60) : start]))
        if _RELATION_BEFORE_BOX.search(words) or _NEGATION_BEFORE_BOX.search(words):
            return True
        if _AFTER_BOX.match(text, end):
            return True
    return False


def _table_hedged(text: str) -> bool:
    """Two different numbers in the cells of a markdown table (``| 4 | 3 |``) where one answer
    is asked: a hedge."""
    cells = [
        cell.strip()
        for row in _TABLE_ROW.findall(text)
        if not re.fullmatch(r"[\s|:\-]*", row)
        for cell in row.strip().strip("|").split("|")
    ]
    numbers = [c for c in cells if _number_forms(_plain_words(c))]
    return len({_number_forms(_plain_words(c)) for c in numbers}) > 1


def _opens_with_join(text: str, at: int) -> bool:
    return _OPENS_WITH_JOIN.match(_plain_words(text[at : at + 40])) is not None


def _hedge_crosses(text: str, start: int, end: int) -> bool:
    """A sentence break ``text[start:end]`` that a hedge crosses: the sentence after it opens with
    "or" or a hedge word, or the one before ends with one (``3 or:\\n4``)."""
    before = _plain_words(text[max(0, start - 40) : start])
    return _opens_with_join(text, end) or _ENDS_WITH_JOIN.search(before) is not None


def _sentence_at(text: str, at: int) -> str:
    """The sentence of ``text`` that holds index ``at`` (:data:`_SENTENCE_BREAK`), joined with the
    sentences next to it across each break that a hedge crosses (:func:`_hedge_crosses`:
    ``The answer is 3.\\nOr 4.``, ``3 or\\n4``)."""
    breaks = list(_SENTENCE_BREAK.finditer(text))
    first = last = bisect.bisect_right([m.end() for m in breaks], at)
    while first > 0 and _hedge_crosses(text, breaks[first - 1].start(), breaks[first - 1].end()):
        first -= 1
    while last < len(breaks) and _hedge_crosses(text, breaks[last].start(), breaks[last].end()):
        last += 1
    return text[
        breaks[first - 1].end() if first else 0 : breaks[last].end() if last < len(breaks) else None
    ]


def _sentence_hedged(span: str) -> bool:
    """A final span read as a sentence (step 3) whose sentence with the last digit hedges
    (:func:`_or_hedged`): ``So the answer is 3 or maybe 4.``"""
    at = max(span.rfind(digit) for digit in "0123456789")
    return at >= 0 and _or_hedged(_sentence_at(span, at))


def _hedge_beside(
    text: str, start: int, end: int, values: tuple[str, ...], lo: int = 0, hi: int | None = None
) -> str | None:
    """A number that a hedge (:data:`_JOIN`) joins to the run of answers ``text[start:end]``
    (boxes or emphasised values, whose contents are ``values``) from outside it, within
    ``text[lo:hi]``, and that is none of them: ``\\boxed{3} or maybe 4``, ``3 or \\boxed{4}``,
    ``**3** or perhaps **4**``; else ``None``."""
    hi = len(text) if hi is None else hi
    following = _plain_words(text[end : min(end + _BESIDE, hi)])
    after = _JOINED_NUMBER.match(following) or _PAREN_NUMBER_BESIDE.match(following)
    before = _NUMBER_JOINED.search(_plain_words(text[max(lo, start - _BESIDE) : start]))
    for match in (after, before):
        if match and all(_different(match["n"], v) for v in values):
            return match["n"]
    preceding = _plain_words(text[max(lo, start - _BESIDE) : start])
    for joined in (_JOINED_VALUE.match(following), _VALUE_JOINED.search(preceding)):
        if joined and not any(_same_value(v, joined["v"]) for v in values):
            return joined["v"]  # any value: \boxed{A} or maybe B, \pi or maybe \boxed{4}
    return None


def _same_value(a: str, b: str) -> bool:
    """``b`` reads equal to ``a`` (steps 2 and 3), or cannot be read alone (words: left out)."""
    if not _different(a, b):
        return True
    read_a, read_b = _read_span(a, _tidy(a)), _read_span(b, _tidy(b))
    return read_b is None or (read_a is not None and _check_now(read_a, read_b, True))


def _hedge_beside_runs(text: str, runs: list[tuple[tuple[str, ...], int, int]]) -> str | None:
    """The first number a hedge joins to a run of boxes (:func:`_hedge_beside`), each looked for
    between the runs next to it only: linear in the text, however many runs."""
    for k, (contents, start, end) in enumerate(runs):
        lo = runs[k - 1][2] if k else 0
        hi = runs[k + 1][1] if k + 1 < len(runs) else len(text)
        number = _hedge_beside(text, start, end, contents, lo, hi)
        if number is not None:
            return number
    return None


#: Every answer word (``The answer is 4.``, ``Answer: 4``, ``**Answer:** 4``, ``<answer>4``,
#: ``<final_answer>4``, ``the answer should be 4``, ``Antwort: 4``, ``Réponse : 4``, ``答案：4``),
#: and what it says up to its sentence's end; not a closing tag (``</answer>``).
_ANSWER_IS = re.compile(
    r"(?:(?<![/A-Za-z])(?<!/final_)(?:answer|ans|antwort|antwoord|r[ée]ponse|respuesta|resposta"
    r"|risposta|odpowied[źz]|cevap|jawaban|đáp án|ответ)"
    r"(?:[ \t]+(?:final|finale|finał|finale?s?)(?![A-Za-z]))?"
    r"(?:[ \t]+(?:is|should be|would be|will be|must be|ist|lautet|est|es|é|è)(?![A-Za-z])"
    r"[ \t]*[:：]?|[ \t]*[:：=]|>)|答案[ \t]*(?:是|为|為)?[ \t]*[:：]?|(?:答え?|解答|정답|답)[ \t]*[:：]"
    # a heading alone on its line (### Final Answer), its value on the next
    r"|(?:(?<=\n)|(?<![\s\S]))[ \t#*]*(?:final[ \t]+)?answer[ \t*:]*(?=[ \t]*\n))[ \t*]*",
    re.IGNORECASE,
)
_PIECE_END = re.compile(r"[.!?;。](?=\s|$)|\n")
#: Most answer markers compared by :func:`_markers_disagree` (more: the last ones).
_MAX_MARKERS = 100
#: An emphasised span of one line in any spelling: ``**4**``, ``__4__``, ``*4*``, ``\\textbf{4}``,
#: ``\\mathbf{4}``, ``\\emph{4}``, ``\\textit{4}``, ``\\underline{4}``, ``<b>4</b>``,
#: ``<strong>``, ``<em>``, ``<i>``, ``<u>`` (its content: one of the groups ``md``, ``tex``, ``html``).
_EMPHASIS_ANY = re.compile(
    r"(?<![\w*])(\*{1,3}|_{1,3})(?![\s*_])(?P<md>[^*_\n]{1,120}?)(?<![\s*_])\1(?![\w*])"
    r"|\\(?:textbf|mathbf|boldsymbol|bm|emph|textit|mathit|underline|uline)\{(?P<tex>[^{}\n]{1,120})\}"
    r"|<(?P<tag>b|strong|em|i|u|mark)>(?P<html>[^<\n]{1,120})</(?P=tag)>",
    re.IGNORECASE,
)


def _marker_spans(text: str, boxes: list[tuple[int, int, int, int]]) -> list[tuple[str, str]]:
    """``(span, source)`` of every answer marker of ``text``, in one pass each: its boxes (their
    contents, as one answer), each ``####`` line, what follows its last ``final answer is``
    (:func:`_final_answer_is`), each answer word's sentence without a box in it
    (:data:`_ANSWER_IS`), the emphasised answer where it is the final span (step 1) and every
    emphasised value (:data:`_EMPHASIS_ANY`) after the last box or alone on its line. ``source``
    is the marker as written, to be read again alone (step 0)."""
    found: list[tuple[str, str]] = []
    if boxes:
        contents = list(dict.fromkeys(text[a:b].strip() for _, a, b, _ in boxes[-_MAX_MARKERS:]))
        found.append((", ".join(contents), ", ".join(f"\\boxed{{{c}}}" for c in contents)))
    at = text.find("####")
    while at >= 0 and len(found) < _MAX_MARKERS:
        line_end = text.find("\n", at)
        line = text[at + 4 : line_end if line_end >= 0 else None][:120]
        found.append((line, "#### " + line))
        at = text.find("####", at + 4)
    final = _last_final_answer_is(text)
    if final is not None:
        start, end, math = final
        stop = math.end() if math else _after_final_answer_is(text, end)
        if stop - start <= MAX_ANSWER_CHARS:
            found.append((_final_answer_is(text[start:stop]) or "", text[start:stop]))
    markers = list(_ANSWER_IS.finditer(text))[-_MAX_MARKERS:]
    for k, marker in enumerate(markers):
        stop = markers[k + 1].start() if k + 1 < len(markers) else len(text)
        begin = marker.end()
        if (
            below := re.match(r"[ \t]*\n\s*", text[begin : begin + 40])
        ) and stop > begin + below.end():
            begin += below.end()  # Answer:\n4: its value on the next line
        stop = min(stop, begin + 120)
        end = _PIECE_END.search(text, begin, stop)
        piece = text[begin : end.start() if end else stop]
        piece = re.sub(r"</[A-Za-z_]{1,20}>|\\text\{\s*$", "", piece).strip(" \t*")
        while piece.endswith("}") and piece.count("}") > piece.count("{"):
            piece = piece[:-1].rstrip(" \t*")  # \\textbf{Answer: 4}
        if not _BOX_COMMAND.search(piece):
            found.append((piece, text[marker.start() : marker.end()] + piece))
    last_box = boxes[-1][3] if boxes else len(text)
    emphases = [m for m in _EMPHASIS_ANY.finditer(text, last_box) if m.start() >= last_box]
    # before the last box (or without one): only an emphasised value alone on its line
    for m in _EMPHASIS_ANY.finditer(text, 0, boxes[-1][0] if boxes else len(text)):
        start = text.rfind("\n", max(0, m.start() - 20), m.start())  # its line, 20 around
        start = start + 1 if start >= 0 else max(0, m.start() - 21)
        end = text.find("\n", m.end(), m.end() + 20)
        line = text[start : end if end >= 0 else m.end() + 20]
        if not re.sub(r"[\s$.,;:!]|\\[()\[\]]", "", line.replace(m.group(), "", 1)):
            emphases.append(m)
    for m in emphases[-_MAX_MARKERS:]:
        found.append((m["md"] or m["tex"] or m["html"], "\n" + m.group() + "\n"))
    if not boxes and "####" not in text and final is None and len(text) <= MAX_ANSWER_CHARS:
        run = _emphasis_run(text)  # the emphasised answer of step 1
        if run is not None:
            found.append((", ".join(run[0]), text[run[1] : run[2]]))
    return found


def _marker_readings(text: str, boxes: list[tuple[int, int, int, int]]) -> list[Any]:
    """Each distinct answer marker of ``text`` (:func:`_marker_spans`) read by steps 2 and 3:
    ``(reading, source)``, a reading ``None`` where the marker is over the structural bounds;
    markers that cannot be read alone (words) are left out."""
    spans: dict[str, tuple[str, str]] = {}
    for span, source in _marker_spans(text, boxes):
        span = final_span(span) if span.strip() and len(span) <= MAX_ANSWER_CHARS else span
        if span:
            spans.setdefault(re.sub(r"\s+", "", span), (span, source))
    readings = []
    kept = list(spans.values())
    for span, source in kept[:1] + kept[1:][1 - _MAX_MARKERS :]:  # the boxes, the last others
        if _structure_too_large(span):
            readings.append((None, source))
        elif (reading := _read_span(span, span)) is not None:
            readings.append((reading, source))
        elif span.strip().lower() in _NUMBER_WORDS:  # Final answer: four
            number = Fraction(_NUMBER_WORDS[span.strip().lower()])
            word = ParsedAnswer(text=span, kind="scalar", parts=(Value(number=number),))
            readings.append((word, source))
    return readings


def _markers_disagree(text: str, boxes: list[tuple[int, int, int, int]]) -> tuple[str, str] | None:
    """Two answer markers of ``text`` that say different things (:func:`_marker_readings`:
    ``\\boxed{3}`` and ``#### 4``; ``**3**`` and ``The answer is 4.``; ``\\boxed{3}`` and
    ``Answer: x = 4``), whatever their order, or a second value in parentheses after a ``####``
    value (``#### 3 (4)``): the sources of the two (a hedge), else ``None``. One over the
    structural bounds counts as different."""
    at, count = text.find("####"), 0
    while at >= 0 and count < _MAX_MARKERS:
        count += 1
        line_end = text.find("\n", at)
        line = text[at + 4 : line_end if line_end >= 0 else None][:120]
        paren = _PAREN_NUMBER_BESIDE.search(line)
        if paren and _different(paren["n"], line[: paren.start()]):
            return "#### " + line, ""  # "#### 3 (4)": a second value
        at = text.find("####", at + 4)
    readings = _marker_readings(text, boxes)
    if len(readings) < 2:
        return None
    first, source = readings[0]
    for other, other_source in readings[1:]:
        if first is None or other is None or not _check_now(first, other, True):
            return source, other_source
    return None


def _hedged(text: str, answer: bool = True) -> bool:
    """Whether ``text`` hedges, read but equal to nothing (module docstring, step 1): boxed
    answers that differ from run to run (``\\boxed{1} no, wait, \\boxed{2}``; the same answer
    restated after other text, ``\\boxed{-2} and \\boxed{1}`` in a draft and again at the end, is
    no hedge); a box never closed (``\\boxed{4``); a number joined by a hedge to the boxes or to
    the emphasised answer (:func:`_hedge_beside`); two answer markers that differ
    (:func:`_markers_disagree`); a hedge in a sentence after the
    answer (:func:`_late_hedge`), two values in a table (:func:`_table_hedged`), a box that math
    outside it changes (:func:`_box_touched`). A final span read as a sentence is checked where
    it is read (:func:`_sentence_hedged`). A reference (not ``answer``) is trusted text: only the first rule,
    of runs, applies to it (Math-Verify too reads a gold with two boxes parted by words as no list
    of both), so that a MATH solution's ``$x=1/5$, or $\\boxed{20}$ percent`` is 20."""
    text = text.strip().replace("\u2212", "-")
    boxes, unclosed = _scan_boxes(text)
    runs = _runs(text, boxes)
    if len({frozenset(contents) for contents, _, _ in runs}) > 1:
        return True
    if not answer:
        return False
    if unclosed >= 0:
        return True
    if _hedge_beside_runs(text, runs) is not None:
        return True
    if _markers_disagree(text, boxes) is not None:
        return True
    if _late_hedge(text, boxes) is not None or _table_hedged(text) or _box_touched(text, boxes):
        return True
    if boxes or "####" in text or _last_final_answer_is(text) is not None:
        return False
    run = _emphasis_run(text)
    return run is not None and _hedge_beside(text, run[1], run[2], run[0]) is not None


def _inline_math_over_lines(text: str) -> bool:
    """Inline math (``$...$``, ``\\(...\\)``) across a line break: not math (as in LaTeX)."""
    text = re.sub(r"\$\$.*?\$\$", " ", text.replace("\\$", " "), flags=re.S)
    inline = re.findall(r"\$(?!\d)([^$]*)\$", text)  # "$18" is a price, not math
    inline += re.findall(r"\\\((.*?)\\\)", text, flags=re.S)
    return any("\n" in body for body in inline)


#: A negation just before the number that ends a sentence ("not 42", "isn't 42", "anything but
#: 42", "other than 42", "except 42", "never 42", "\neq 42").
_NEGATED = re.compile(
    r"(?:\bnot|n't|\bnever|\bexcept(?:\s+for)?|\bother\s+than|\bno\s+longer"
    r"|\b(?:anything|everything|all|any\s+(?:number|value))\s+but"
    r"|(?<!(?<![A-Za-z])[A-Za-z])(?<!(?<![A-Za-z])[A-Za-z]\s)(?:\\neq|\\ne\b|≠|!=))"
    r"(?:\s+(?:be|is|equal|equals|to|exactly|just|quite|simply|the|a|number|value|answer)\b)*"
    r"\s*[-+]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)\s*%?$",
    re.IGNORECASE,
)
#: ``5, not 4`` at the end of a span: a number, then another negated (the first counts).
_NUMBER_NOT_LAST = re.compile(r"\d[ \t]*,[ \t]*(?:and |but )?not[ \t]+\d+[ \t.!]*$", re.I)
_FINAL_JUXTAPOSED = re.compile(rf"(?<![\w.]){_NUM}(?:\s+{_NUM})+$")


def _read_span(
    text: str, span: str, boxed: bool = False, answer: bool = False
) -> ParsedAnswer | None:
    """Steps 2 and 3 on ``span``, or ``None`` where some part cannot be read alone; ``boxed``:
    the span is the content of boxes, where a false equation of numbers equals nothing;
    ``answer``: a part with a command the reading does not model equals nothing
    (:func:`_unmodelled`)."""
    span = re.sub(r"^\s*[A-Za-z]\s*\\in(?![A-Za-z])\s*", "", span)  # x \\in [-2, 7]
    kind, parts, ordered = _split(span) if span else ("scalar", [""], True)
    if len(parts) > MAX_PARTS:
        return None
    values = [_read_part(p, boxed) for p in parts]
    if any(v is None for v in values):
        return None
    if answer:  # 3 \equiv 4, 3 \cap 4, \begin{cases} 3 \\ 4 \end{cases}: equal to nothing
        values = [
            Value() if _unmodelled(p, v.number is not None or _is_number(v.expr)) else v
            for p, v in zip(parts, values, strict=True)
            if v is not None
        ]
    brackets = span[0] + span[-1] if kind == "interval" else ""
    if kind == "tuple" and len(parts) == 2:  # a pair's brackets count: (0, 1) is no [0, 1]
        brackets = "()" if span.rstrip().endswith(")") else "[]"
    parts: tuple[Value, ...] = tuple(v for v in values if v is not None)
    if kind == "scalar" and isinstance(parts[0].expr, _finite_set()) and not parts[0].equation:
        # "\pm 2021": the set of its values
        members = [_expr_value(m) for m in parts[0].expr.args]
        if 1 < len(members) <= MAX_PARTS:
            return ParsedAnswer(text=text, kind="set", parts=tuple(members), ordered=False)
    comma = None
    if kind == "list" and _DECIMAL_COMMA.fullmatch(span.strip()):
        comma = Fraction(span.strip().replace(",", "."))
    return ParsedAnswer(
        text=text, kind=kind, parts=parts, ordered=ordered, brackets=brackets, decimal_comma=comma
    )


def _finite_set() -> type:
    import sympy

    return sympy.FiniteSet


_SIMPLE_NUMBER = re.compile(r"-?(?:\d{1,15}(?:\.\d{1,15})?|\.\d{1,15})")
_TUPLE_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:\s*/\s*\d+)?"
#: An end of an interval that math-verify may miss when written without spaces (``[-2,7)``).
_INTERVAL_END = rf"{_TUPLE_NUMBER}|[-+]?\\infty"
#: A tuple or list of plain numbers ending a span, however spaced: ``(0,1)``, ``[0, 1]``.
#: One plain number in parentheses (``(2)``, ``(-5)``): that number.
_PAREN_NUMBER = re.compile(rf"\(\s*{_TUPLE_NUMBER}\s*\)")
_FINAL_TUPLE = re.compile(
    rf"(?<![\w)\]}}^_])(?:\(\s*{_TUPLE_NUMBER}(?:\s*,\s*{_TUPLE_NUMBER})+\s*\)"
    rf"|\[\s*{_TUPLE_NUMBER}(?:\s*,\s*{_TUPLE_NUMBER})+\s*\])$"
)


#: A degree sign ending a boxed number (``90\\degree``, ``90^\\circ``).
_DEGREE_END = re.compile(r"\s*(?:\\degree|\^\s*\{?\s*\\circ\s*\}?)\s*$")


def _readable(text: str) -> bool:
    """Whether ``text`` holds an answer: the rule that tells a valid answer from an invalid turn.

    ``math-verify`` finds a mathematical expression in it (the rule since Math-v0 was registered:
    ``c`` and ``+6`` are not read, ``2x`` is), or its final span is one this module reads and
    ``math-verify`` misses: a final emphasised number (``*12*``), a tuple of plain numbers written
    without spaces (``(0,1)``, ``The point is (2,3).``). Recorded episodes replay the same
    (``python -m tests.baseline_math_replay``).
    """
    import sympy

    prepared = text.strip().replace("\u2212", "-")
    if _SIMPLE_NUMBER.fullmatch(prepared):  # math-verify reads these; skip its parse (speed)
        return True
    span = final_span(prepared)
    if _BOX_COMMAND.search(prepared) and (
        _plain_value(_DEGREE_END.sub("", span)) is not None or _REPEATING.fullmatch(span)
    ):
        return True  # \boxed{3.}: a boxed plain number
    prepared = prepared.replace("\\$", " ")  # an escaped dollar is a currency sign, not math
    if _final_emphasis(prepared) or _FINAL_TUPLE.search(span) or _PAREN_NUMBER.fullmatch(span):
        return True
    interval = _interval_parts(span)
    if interval and all(re.fullmatch(_INTERVAL_END, end) for end in interval[1]):
        return True

    unescaped = prepared.replace("\\$", "")
    if "\\" in prepared and not ("$" in unescaped or "\\(" in prepared or "\\[" in prepared):
        prepared = f"${prepared}$"
    return bool(prepared) and any(
        isinstance(v, (sympy.Basic, sympy.MatrixBase)) for v in _parse(prepared)
    )


# ----------------------------------------------------------------------------- comparison


def _finite_decimal(q: Fraction) -> bool:
    d = q.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    return d == 1


def _close(a: Fraction, b: Fraction, tol: Fraction) -> bool:
    return abs(a - b) <= tol * max(abs(a), abs(b))


def _as_fraction(expr: Any) -> Fraction | None:
    """The value of a numeric SymPy expression to :data:`EXACT_DIGITS` digits, or ``None``."""
    import sympy

    if expr.free_symbols:
        return None
    try:
        value = sympy.N(expr, EXACT_DIGITS)
        if not value.is_real or not value.is_finite:
            return None
        return Fraction(str(sympy.Float(value, EXACT_DIGITS)))
    except Exception:  # noqa: BLE001 - a value SymPy cannot evaluate (And, sets...) is no number
        return None


def _numbers_equal(a: Value, b: Value) -> bool:
    if a.number is None and a.expr is None or b.number is None and b.expr is None:
        return False
    x = a.number if a.number is not None else _as_fraction(a.expr)
    y = b.number if b.number is not None else _as_fraction(b.expr)
    if x is None or y is None:
        return False
    exact_x, exact_y = a.number is not None, b.number is not None
    if exact_x and exact_y:
        if x == y:
            return True
        # a decimal approximating a fraction with no finite decimal form (0.333333 for 1/3)
        if a.decimal and not b.decimal and not _finite_decimal(y):
            return _close(x, y, REL_TOL)
        if b.decimal and not a.decimal and not _finite_decimal(x):
            return _close(x, y, REL_TOL)
        return False
    # at least one irrational (or SymPy-evaluated) value
    if a.decimal or b.decimal:
        return _close(x, y, REL_TOL)
    return _close(x, y, Fraction(1, 10 ** (EXACT_DIGITS - 5)))


def _values_equal(a: Value, b: Value) -> bool:
    import sympy

    if a.too_large or b.too_large:
        return False
    if a.numeral or b.numeral:  # 1011_2 (a: the reference's side)
        return _numerals_equal(a, b)
    if isinstance(a.expr, sympy.Tuple) or isinstance(b.expr, sympy.Tuple):  # tuples in a list
        return (
            isinstance(a.expr, sympy.Tuple)
            and isinstance(b.expr, sympy.Tuple)
            and len(a.expr) == len(b.expr)
            and all(
                _values_equal(_expr_value(x), _expr_value(y))
                for x, y in zip(a.expr, b.expr, strict=True)
            )
        )
    if a.relation or b.relation:
        return a.equation is not None and b.equation is not None and _equations_equal(a, b)
    for x in _percent_forms(a):
        for y in _percent_forms(b):
            if _numbers_equal(x, y):
                return True
            symbolic = any(
                v.expr is not None and (v.expr.free_symbols or _as_fraction(v.expr) is None)
                for v in (x, y)
            )
            if symbolic and x.expr is not None and y.expr is not None:
                try:  # expressions with variables, complex values; bounded; timeouts off
                    if require_math_verify().verify([x.expr], [y.expr], timeout_seconds=None):
                        return True
                except Exception:  # noqa: BLE001, S112 - a failed comparison is "not equal"
                    continue
    return False


def _equations_equal(a: Value, b: Value) -> bool:
    """Two equations are the same when one's ``lhs - rhs`` is a nonzero constant times the
    other's (``y = 2x + 1`` and ``2x - y + 1 = 0``; ``x^2 = 1`` and ``x^2 - 1 = 0``); an equation
    that always holds (``0 = 0``) equals only another such."""
    import sympy

    (l1, r1), (l2, r2) = a.equation, b.equation  # type: ignore[misc]
    d1, d2 = sympy.simplify(l1 - r1), sympy.simplify(l2 - r2)
    if d1 == 0 or d2 == 0:
        return d1 == 0 and d2 == 0
    ratio = sympy.cancel(d1 / d2)
    if ratio.free_symbols:
        ratio = sympy.simplify(ratio)
    return not ratio.free_symbols and ratio.is_finite is True and ratio.is_zero is False


def _same_writing(gold: ParsedAnswer, pred: ParsedAnswer) -> bool:
    """Both one value SymPy read (not a number) and the same final span, spaces aside."""
    if gold.kind != "scalar" or pred.kind != "scalar" or gold.parts[0].expr is None:
        return False
    if pred.parts[0].expr is None or _hedged(pred.text):
        return False
    spans = [re.sub(r"\s+", "", final_span(x.text)) for x in (gold, pred)]
    return bool(spans[0]) and spans[0] == spans[1]


def _copied(gold: ParsedAnswer, pred: ParsedAnswer) -> bool:
    """An answer equal to nothing for a command the reading does not model (:func:`_unmodelled`)
    but written as the reference is, spaces aside (``x \\equiv 3 \\pmod{7}``): a copy of
    trusted text, paid."""
    span = final_span(pred.text)
    if pred.kind != "scalar" or pred.parts[0] != Value() or not _unmodelled(span, False):
        return False
    if _hedged(pred.text):
        return False
    return re.sub(r"\s+", "", span) == re.sub(r"\s+", "", final_span(gold.text))


def _percent_forms(v: Value) -> list[Value]:
    if not v.percent or v.number is None:
        return [v]
    return [v, Value(number=v.number / 100, decimal=v.decimal)]


def _match_unordered(a: tuple[Value, ...], b: tuple[Value, ...]) -> bool:
    """A perfect matching of equal parts (augmenting paths; at most MAX_PARTS each side)."""
    owner: dict[int, int] = {}

    def assign(i: int, seen: set[int]) -> bool:
        for j in range(len(b)):
            if j not in seen and _values_equal(a[i], b[j]):
                seen.add(j)
                if j not in owner or assign(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    return all(assign(i, set()) for i in range(len(a)))


# ----------------------------------------------------------------------------- the deadline

_POOL: WorkerPool | None = None
_POOL_LOCK = threading.Lock()
#: Address space of a checking worker, MiB: an expression that would need more fails (wrong).
_WORKER_MEMORY_MB = 2048


def _pool() -> WorkerPool:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = WorkerPool("agentgym.answers:_warm_up", max_memory_mb=_WORKER_MEMORY_MB)
        return _POOL


def _warm_up() -> None:
    """A worker's start: the imports and math-verify's first parses (about a second), so that
    no call's deadline pays for them."""
    for reference, answer in [("1/2", "\\frac{1}{2}"), ("x + 1", "$1 + x$"), ("y = 2x", "y-2x=0")]:
        _check_now(reference, answer, False)
    _parse_text.cache_clear()


def _bounded(timeout_s: float, default: Any, fn: Any, *args: Any) -> Any:
    """``fn(*args)`` in a checking worker under ``timeout_s`` seconds; ``default`` when the
    deadline passes or the worker dies (the answer's fault: it is wrong)."""
    try:
        return _pool().call(timeout_s, fn, *args)
    except (DeadlineExceeded, WorkerCrashed):
        return default


def _timed_out(text: str) -> ParsedAnswer:
    return ParsedAnswer(text=text, kind="scalar", parts=(Value(too_large=True),), timed_out=True)


def _portable(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` in the worker, with every part that cannot be sent back to the caller (a
    SymPy set that does not unpickle) read as too large: never an exception in the caller."""
    result = fn(*args)
    parsed = result[0] if isinstance(result, tuple) else result
    if not isinstance(parsed, ParsedAnswer):
        return result
    try:
        pickle.loads(pickle.dumps(parsed))  # noqa: S301 - our own value, in this process
    except Exception:  # noqa: BLE001 - whatever fails to travel is not compared again
        parts = []
        for part in parsed.parts:
            try:
                pickle.loads(pickle.dumps(part))  # noqa: S301
                parts.append(part)
            except Exception:  # noqa: BLE001
                parts.append(Value(too_large=True))
        parsed = replace(parsed, parts=tuple(parts))
    return (parsed, *result[1:]) if isinstance(result, tuple) else parsed


def _sendable(value: object) -> str | ParsedAnswer | None:
    return value if isinstance(value, (str, ParsedAnswer)) else None


def parse_answer(text: object, *, timeout_s: float = CHECK_TIMEOUT_S) -> ParsedAnswer | None:
    """Read the mathematical answer in ``text`` (module docstring).

    Args:
        text: the answer, e.g. the inside of ``<answer>...</answer>``; any object (non-strings and
            text over :data:`MAX_REPLY_CHARS` code points give ``None``; of a text over
            :data:`MAX_ANSWER_CHARS`, only its final region is read).
        timeout_s: wall-clock seconds the reading may take (default :data:`CHECK_TIMEOUT_S`);
            past them the answer is read as too large to compare (``timed_out``).

    Returns:
        A :class:`ParsedAnswer`, or ``None`` where no value can be read (words only, empty text,
        unbalanced LaTeX). Never raises on any text.

    Raises:
        ImportError: ``math-verify`` is not installed.
        ValueError: ``timeout_s`` is not a positive number.
        agentgym.deadline.WorkerStartError: no checking worker process could start.
    """
    require_math_verify()
    if not isinstance(text, str) or len(text) > MAX_REPLY_CHARS:
        return None
    return _bounded(timeout_s, _timed_out(text), _portable, _parse_answer_now, text)


def parse_reference(text: object, *, timeout_s: float = CHECK_TIMEOUT_S) -> ParsedAnswer | None:
    """Read a reference answer: as :func:`parse_answer`, with one hedge rule only, that of
    different runs of boxes (a reference is trusted text: a MATH solution's ``$x=1/5$, or
    $\\boxed{20}$ percent.`` is 20, where an answer written so hedges; module docstring, step 1),
    and where that reads nothing, the text inside math delimiters if it has no words (``x^2+1`` as
    ``$x^2+1$``). :func:`check_answer` reads references so; the math environments check their
    problems' answers with it.

    Args:
        text: the reference answer (any object: non-strings give ``None``).
        timeout_s: as :func:`parse_answer`.

    Returns:
        As :func:`parse_answer`.

    Raises:
        ImportError, ValueError, agentgym.deadline.WorkerStartError: as :func:`parse_answer`.
    """
    require_math_verify()
    if not isinstance(text, str) or len(text) > MAX_REPLY_CHARS:
        return None
    return _bounded(timeout_s, _timed_out(text), _portable, _parse_reference_now, text)


def _parse_reference_now(text: str) -> ParsedAnswer | None:
    gold = _parse_answer_now(text, hedges=False)
    if gold is None and "$" not in text and _clean(text):
        # A reference written as bare math ("x^2+1", never words: "blue" is no product of
        # letters): read inside math delimiters. (An answer is not: what counts as a valid answer
        # is unchanged, so recorded episodes replay the same.)
        gold = _parse_answer_now(f"${text}$", hedges=False)
    return gold


def check_answer(
    reference: str | ParsedAnswer | None,
    answer: str | ParsedAnswer | None,
    *,
    unordered: bool = False,
    timeout_s: float = CHECK_TIMEOUT_S,
) -> bool:
    """Whether ``answer`` equals ``reference`` mathematically (module docstring).

    Args:
        reference: the reference answer (text, read by :func:`parse_reference`, or already read).
        answer: the model's answer (text, or already read by :func:`parse_answer`).
        unordered: the task says the order of a list's parts is free (tuples stay ordered).
        timeout_s: wall-clock seconds for reading both and comparing them (default
            :data:`CHECK_TIMEOUT_S`); past them the answer is wrong.

    Returns:
        ``True`` when every part matches; ``False`` when they differ, when either cannot be read,
        when either is too large to compare, or when the check ran past ``timeout_s``. Never
        raises on any text.

    Raises:
        ImportError: ``math-verify`` is not installed.
        ValueError: ``timeout_s`` is not a positive number.
        agentgym.deadline.WorkerStartError: no checking worker process could start.

    Example:
        >>> check_answer("1234", "1,234"), check_answer("-7", "7")
        (True, False)
        >>> check_answer("x = 1 or x = 2", "x = 2 or x = 1"), check_answer("3, 4", "3.4")
        (True, False)
    """
    require_math_verify()
    if any(isinstance(x, ParsedAnswer) and x.too_large for x in (reference, answer)):
        return False
    return bool(
        _bounded(timeout_s, False, _check_now, _sendable(reference), _sendable(answer), unordered)
    )


def grade_answer(
    reference: str | ParsedAnswer,
    answer: str,
    *,
    unordered: bool = False,
    timeout_s: float = CHECK_TIMEOUT_S,
) -> tuple[ParsedAnswer | None, bool]:
    """Read ``answer`` and check it against ``reference`` in one call under one deadline (what the
    math environments do each step).

    Args:
        reference, unordered, timeout_s: as :func:`check_answer`.
        answer: the model's answer text.

    Returns:
        ``(parse_answer(answer), check_answer(reference, answer))``; past ``timeout_s``, a
        ``timed_out`` reading and ``False``.

    Raises:
        ImportError, ValueError, agentgym.deadline.WorkerStartError: as :func:`check_answer`.
    """
    require_math_verify()
    if not isinstance(answer, str) or len(answer) > MAX_REPLY_CHARS:
        return None, False
    timed_out = (_timed_out(answer), False)
    graded: tuple[ParsedAnswer | None, bool] = _bounded(
        timeout_s, timed_out, _portable, _grade_now, _sendable(reference), answer, unordered
    )
    return graded


def _grade_now(
    reference: str | ParsedAnswer | None, answer: str, unordered: bool
) -> tuple[ParsedAnswer | None, bool]:
    pred = _parse_answer_now(answer)
    if pred is None:
        return None, False
    return pred, _check_now(reference, pred, unordered)


def _check_now(
    reference: str | ParsedAnswer | None, answer: str | ParsedAnswer | None, unordered: bool
) -> bool:
    """:func:`check_answer` in this process, without a deadline (the worker's side)."""
    try:
        return _check(reference, answer, unordered)
    except Exception:  # noqa: BLE001 - a guard: SymPy edge cases are "not equal", never a raise
        return False


def _check(
    reference: str | ParsedAnswer | None, answer: str | ParsedAnswer | None, unordered: bool
) -> bool:
    gold = reference if isinstance(reference, ParsedAnswer) else None
    if isinstance(reference, str):
        gold = _parse_reference_now(reference)
    pred = answer if isinstance(answer, ParsedAnswer) else _parse_answer_now(answer)
    if gold is None or pred is None or gold.too_large or pred.too_large:
        return False
    if _same_writing(gold, pred) or _copied(gold, pred):  # "12:00" and "12:00": the same
        return True
    if pred.kind in ("tuple", "interval"):  # a reference 0 < x < 1 takes the answer (0, 1)
        span = final_span(gold.text)
        ranged = _chain_as_brackets(span)
        written = re.sub(r"^\s*[A-Za-z]\s*\\in(?![A-Za-z])\s*", "", final_span(pred.text))
        if ranged != span and (written[:1], written[-1:]) == (ranged[0], ranged[-1]):
            gold = _read_span(gold.text, ranged) or gold
    # "1000,99": a decimal comma against a reference of one number, else two parts
    if gold.kind == "scalar" and pred.decimal_comma is not None:
        pred = replace(pred, kind="scalar", parts=(Value(number=pred.decimal_comma, decimal=True),))
    if pred.kind == "scalar" and gold.decimal_comma is not None:
        gold = replace(gold, kind="scalar", parts=(Value(number=gold.decimal_comma, decimal=True),))
    if len(gold.parts) != len(pred.parts):
        return False
    if gold.kind == "tuple" and gold.brackets:  # (0, 1) is no [0, 1], nor 0, 1
        if pred.kind == "list" or pred.brackets not in ("", gold.brackets):
            return False
    braces = [p.kind == "set" and final_span(p.text).lstrip().startswith("{") for p in (gold, pred)]
    if {gold.kind, pred.kind} == {"set", "tuple"} and not any(braces):
        # \{2, 7\} is no pair (2, 7), \pm 1 no [-1, 1], x \in (1, 2) no \{1, 2\}; TeX's bare
        # braces {1, 3} are a group, which prints 1, 3: a list
        return False
    if "interval" in (gold.kind, pred.kind):
        return (
            gold.kind == pred.kind
            and gold.brackets == pred.brackets
            and all(_values_equal(x, y) for x, y in zip(gold.parts, pred.parts, strict=True))
        )
    if gold.kind == "scalar" or pred.kind == "scalar":
        return gold.kind == pred.kind and _values_equal(gold.parts[0], pred.parts[0])
    ordered = "tuple" in (gold.kind, pred.kind) or (
        gold.kind == "list" and gold.ordered and not unordered
    )
    if ordered:
        return all(_values_equal(x, y) for x, y in zip(gold.parts, pred.parts, strict=True))
    return _match_unordered(gold.parts, pred.parts)
