"""Spreadsheets, documents and presentations for the built-in office tasks, made offline.

Each generator turns the query parameters of a ``builtin-asset://`` URL (see
:mod:`osworld_gym.tasks.assets`) into the bytes of an ``.xlsx``, ``.docx`` or ``.pptx`` file.
A task's input file and its gold file come from the *same* generator: the input URL names the
data (``seed``, ``rows``, ...), the gold URL adds the edits the task asks for (``total=1``,
``sort=B``, ...), so the gold is the input with exactly those edits applied. The bytes are a pure
function of the parameters (zip timestamps and document dates are fixed).

Generators (``name``: parameters):

* ``office_xlsx``: ``data`` (``sales`` or ``orders``), ``seed``, ``rows``; edits ``cancel``
  (rows whose status is "Cancelled", input too), ``removed``, ``total``, ``sumcol``, ``avg``,
  ``sort``/``desc``, ``bold``, ``freeze``, ``filter``, ``copy``, ``summary``, ``title``,
  ``pct``, ``merge``; see :func:`xlsx_asset`.
* ``office_docx``: ``doc`` (``report``, ``notes``, ``letter`` or ``blank``), ``seed``; edits
  ``replace``, ``upper``, ``delete``, ``move``, ``insert``, ``append``; see :func:`docx_asset`.
* ``office_pptx``: ``deck`` (a topic), ``seed``, ``slides``; edits ``delete``, ``dup``,
  ``move``, ``title``, ``body``, ``bold``, ``italic``, ``notes``, ``insert``, ``add``; see
  :func:`pptx_asset`.

>>> from osworld_gym.tasks.assets import generate
>>> a = generate("builtin-asset://office_xlsx?data=sales&seed=1&rows=5")
>>> a == generate("builtin-asset://office_xlsx?data=sales&seed=1&rows=5"), a[:2]
(True, b'PK')
"""

from __future__ import annotations

import io
import random
import re
import zipfile

#: The fixed timestamp written into every generated file (zip entries and document dates).
FIXED_TIME = (2024, 1, 2, 3, 4, 6)
_ISO_TIME = "2024-01-02T03:04:06Z"

PRODUCTS = (
    "Apricot Jam",
    "Blue Cheese",
    "Cocoa Beans",
    "Dark Roast",
    "Earl Grey",
    "Fig Bars",
    "Ginger Ale",
    "Honey Oats",
    "Iced Tea",
    "Jasmine Rice",
    "Kale Chips",
    "Lime Soda",
    "Maple Syrup",
    "Nut Butter",
    "Olive Oil",
    "Pita Bread",
    "Quinoa Mix",
    "Rye Crackers",
    "Sea Salt",
    "Trail Mix",
    "Udon Noodles",
    "Vanilla Pods",
    "Wild Berries",
    "Yam Fries",
)
REGIONS = ("East", "North", "South", "West")
QUARTERS = ("Q1", "Q2", "Q3")


# -- shared helpers ----------------------------------------------------------------------------


def normalise_zip(data: bytes) -> bytes:
    """``data`` (a zip) rewritten with fixed entry times and fixed document dates.

    >>> buf = io.BytesIO()
    >>> with zipfile.ZipFile(buf, "w") as z: z.writestr("a.txt", "x")
    >>> zipfile.ZipFile(io.BytesIO(normalise_zip(buf.getvalue()))).infolist()[0].date_time
    (2024, 1, 2, 3, 4, 6)
    """
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(data)) as src,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst,
    ):
        for info in src.infolist():
            body = src.read(info.filename)
            if info.filename == "docProps/core.xml":
                body = re.sub(
                    rb"(<dcterms:(created|modified)[^>]*>)[^<]*",
                    rb"\g<1>" + _ISO_TIME.encode(),
                    body,
                )
            entry = zipfile.ZipInfo(info.filename, FIXED_TIME)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = 0o644 << 16
            dst.writestr(entry, body)
    return out.getvalue()


def _save(obj) -> bytes:
    buf = io.BytesIO()
    obj.save(buf)
    return normalise_zip(buf.getvalue())


def _int(params: dict[str, str], name: str, default: int) -> int:
    return int(params.get(name, default))


def _rows_list(text: str) -> list[int]:
    return sorted({int(x) for x in text.split(",") if x.strip()}) if text else []


# -- spreadsheets ------------------------------------------------------------------------------


def _sales(rng: random.Random, rows: int) -> list[list]:
    names = rng.sample(PRODUCTS, rows)
    table: list[list] = [["Product", *QUARTERS]]
    for name in names:
        table.append([name, *(rng.randint(100, 999) for _ in QUARTERS)])
    return table


def _orders(rng: random.Random, rows: int, cancelled: list[int]) -> list[list]:
    table: list[list] = [["Order", "Region", "Amount", "Status"]]
    regions = rng.sample(REGIONS, len(REGIONS))  # every region occurs
    regions += [rng.choice(REGIONS) for _ in range(rows - len(regions))]
    for i in range(rows):
        sheet_row = i + 2
        status = "Cancelled" if sheet_row in cancelled else rng.choice(("Paid", "Shipped"))
        table.append([1001 + i, regions[i], rng.randint(20, 500), status])
    return table


def xlsx_asset(params: dict[str, str]) -> bytes:
    """A one-table workbook, with the edits of a task applied when asked for.

    Data (``data``): ``sales`` (Product, Q1, Q2, Q3 with ``rows`` products) or ``orders``
    (Order, Region, Amount, Status; sheet rows listed in ``cancel`` have status "Cancelled").
    ``last`` (the last sheet row of the table) may stand for ``rows``. The table starts at A1
    on a sheet named ``Sheet1``.

    Edits, applied in this order: ``removed=1`` (drop the cancelled rows), ``sumcol=H`` (a column
    headed ``H`` with each row's sum of the number columns), ``avg=H`` (the same with the average),
    ``sort=C`` and ``desc=1`` (sort the data rows by column letter ``C``), ``total=BCD`` (a
    "Total" row with the sums of columns B, C and D), ``copy=C:Name`` (a new sheet ``Name`` holding
    column ``C``),
    ``summary=Name`` (a new sheet ``Name`` with Region/Total per region), ``title=Name`` (rename
    the data sheet), ``bold=A1:D1``, ``freeze=A2``, ``filter=1`` (auto-filter over the table),
    ``pct=C`` (percent format on the data cells of column ``C``), ``merge=A1:D1``.

    >>> import openpyxl
    >>> def book(q): return openpyxl.load_workbook(io.BytesIO(xlsx_asset(q)))
    >>> ws = book({"data": "sales", "seed": "3", "rows": "4", "total": "BCD"}).active
    >>> ws.max_row, ws["A6"].value, ws["B6"].value == sum(ws.cell(r, 2).value for r in range(2, 6))
    (6, 'Total', True)
    >>> book({"data": "sales", "seed": "3", "rows": "4", "copy": "C:Q2 only"}).sheetnames
    ['Sheet1', 'Q2 only']
    """
    import openpyxl
    from openpyxl.styles import Font
    from openpyxl.utils import column_index_from_string, get_column_letter
    from openpyxl.worksheet.worksheet import Worksheet

    rng = random.Random(f"xlsx/{params.get('data', 'sales')}/{params.get('seed', '0')}")
    rows = _int(params, "last", 11) - 1 if "last" in params else _int(params, "rows", 10)
    data = params.get("data", "sales")
    cancelled = _rows_list(params.get("cancel", ""))
    if data == "sales":
        table = _sales(rng, rows)
    elif data == "orders":
        table = _orders(rng, rows, cancelled)
    else:
        raise ValueError(f"unknown data set {data!r} (sales, orders)")

    if params.get("removed") == "1":
        table = [row for i, row in enumerate(table, start=1) if i not in cancelled]
    numeric = [j for j, v in enumerate(table[1]) if isinstance(v, int)] if data == "sales" else []
    for key, fn in (("sumcol", sum), ("avg", lambda xs: sum(xs) / len(xs))):
        if params.get(key):
            table[0].append(params[key])
            for row in table[1:]:
                row.append(fn([row[j] for j in numeric]))
    if params.get("sort"):
        col = column_index_from_string(params["sort"]) - 1
        table[1:] = sorted(table[1:], key=lambda r: r[col], reverse=params.get("desc") == "1")
    body = table[1:]
    if params.get("total"):
        cols = {column_index_from_string(c) - 1 for c in params["total"]}
        table.append(
            [
                "Total",
                *(
                    sum(r[j] for r in table[1:]) if j in cols else None
                    for j in range(1, len(table[0]))
                ),
            ]
        )

    wb = openpyxl.Workbook()
    ws = wb.active  # typed Optional: a loaded book may have no sheet; a new one has one
    if not isinstance(ws, Worksheet):
        raise TypeError(f"a new openpyxl Workbook should start with a worksheet, not {ws!r}")
    ws.title = "Sheet1"
    for row in table:
        ws.append(row)
    if params.get("copy"):
        letter, name = params["copy"].split(":", 1)
        other = wb.create_sheet(name)
        for i, row in enumerate(table, start=1):
            other.cell(row=i, column=1, value=row[column_index_from_string(letter) - 1])
    if params.get("summary"):
        other = wb.create_sheet(params["summary"])
        other.append(["Region", "Total"])
        for region in sorted({r[1] for r in body}):
            other.append([region, sum(r[2] for r in body if r[1] == region)])
    if params.get("title"):
        ws.title = params["title"]
    if params.get("bold"):
        for cells in ws[params["bold"]]:
            for cell in cells:
                cell.font = Font(bold=True)
    if params.get("freeze"):
        ws.freeze_panes = params["freeze"]
    if params.get("filter") == "1":
        ws.auto_filter.ref = f"A1:{get_column_letter(len(table[0]))}{len(table)}"
    if params.get("pct"):
        for r in range(2, len(table) + 1):
            ws[f"{params['pct']}{r}"].number_format = "0.00%"
    if params.get("merge"):
        ws.merge_cells(params["merge"])
    return _save(wb)


# -- documents ---------------------------------------------------------------------------------

_SUBJECTS = (
    "The team",
    "Our office",
    "The new plan",
    "Each branch",
    "The budget",
    "The project",
    "Customer service",
    "The warehouse",
    "Our partner",
    "The board",
)
_VERBS = (
    "improved",
    "reviewed",
    "completed",
    "extended",
    "reduced",
    "planned",
    "tested",
    "changed",
    "supported",
    "measured",
)
_OBJECTS = (
    "the delivery times",
    "its monthly goals",
    "the training program",
    "the cost model",
    "two new routes",
    "the spring campaign",
    "the sales forecast",
    "the new website",
    "the quality checks",
    "the yearly survey",
)
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")


def _sentence(rng: random.Random) -> str:
    return f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}."


def _document(kind: str, rng: random.Random, params: dict[str, str]) -> list[str]:
    if kind == "report":
        company = params.get("company", "Acme")
        out = [f"{company} Quarterly Report"]
        for i in range(_int(params, "paras", 4)):
            sentences = [_sentence(rng) for _ in range(3)]
            if i % 2 == 0:
                sentences.insert(1, f"{company} thanks everyone involved.")
            out.append(" ".join(sentences))
        return out
    if kind == "notes":
        return ["Meeting Notes", *(f"{day}: {_sentence(rng)} {_sentence(rng)}" for day in DAYS)]
    if kind == "letter":
        return [
            f"Dear {params.get('name', 'Ms. Smith')},",
            "Thank you for your order of last week.",
            " ".join(_sentence(rng) for _ in range(3)),
            "Please call us if you have any questions.",
            "Kind regards,",
            "The Support Team",
            "P.S. Our shop is closed on public holidays.",
        ]
    if kind == "blank":
        return []
    raise ValueError(f"unknown document {kind!r} (report, notes, letter, blank)")


def _paragraph_index(paras: list[str], ref: str) -> int:
    """0-based index of paragraph ``ref``: a 1-based number, or the start of its text."""
    if ref.isdigit():
        return int(ref) - 1
    for i, text in enumerate(paras):
        if text.startswith(ref):
            return i
    raise ValueError(f"no paragraph starts with {ref!r}")


def docx_asset(params: dict[str, str]) -> bytes:
    """A document of plain paragraphs, with the edits of a task applied when asked for.

    Documents (``doc``): ``report`` (a title, then ``paras`` paragraphs mentioning
    ``company``), ``notes`` ("Meeting Notes", then one paragraph per weekday, "Monday: ..."),
    ``letter`` (a short letter to ``name``, signed "Kind regards," and ending in a "P.S."),
    ``blank`` (no paragraphs). Sentences are drawn with ``seed``.

    Edits, in this order. A paragraph reference ``P`` is a 1-based number (the title is 1) or
    the start of the paragraph's text. ``replace=old:new`` and ``replace2=...`` (every
    occurrence), ``upper=P`` (in upper case), ``delete=P``, ``move=P:N`` (paragraph ``P``
    becomes paragraph number ``N``; ``end`` for the last), ``insert=N:text`` (a new paragraph
    number ``N``), ``append=text`` (new last paragraphs, ``|`` between them).

    >>> import docx
    >>> def doc(**q): return [p.text for p in docx.Document(io.BytesIO(docx_asset(q))).paragraphs]
    >>> doc(doc="report", seed="2", paras="3", company="Acme", replace="Acme:Zenith")[0]
    'Zenith Quarterly Report'
    >>> [t.split(":")[0] for t in doc(doc="notes", move="Monday:end", delete="Wednesday")]
    ['Meeting Notes', 'Tuesday', 'Thursday', 'Friday', 'Monday']
    """
    import docx

    kind = params.get("doc", "report")
    rng = random.Random(f"docx/{kind}/{params.get('seed', '0')}")
    paras = _document(kind, rng, params)
    for key in ("replace", "replace2"):
        if params.get(key):
            old, new = params[key].split(":", 1)
            paras = [p.replace(old, new) for p in paras]
    if params.get("upper"):
        k = _paragraph_index(paras, params["upper"])
        paras[k] = paras[k].upper()
    if params.get("delete"):
        del paras[_paragraph_index(paras, params["delete"])]
    if params.get("move"):
        ref, to = params["move"].rsplit(":", 1)
        text = paras.pop(_paragraph_index(paras, ref))
        paras.insert(len(paras) if to == "end" else int(to) - 1, text)
    if params.get("insert"):
        n, text = params["insert"].split(":", 1)
        paras.insert(int(n) - 1, text)
    if params.get("append"):
        paras.extend(params["append"].split("|"))

    doc = docx.Document()
    doc.core_properties.author = "osworld-gym"
    for text in paras:
        doc.add_paragraph(text)
    return _save(doc)


# -- presentations -----------------------------------------------------------------------------

DECKS = {
    "garden": (
        "Planning a Garden",
        ["Finding a Site", "Soil and Compost", "Picking Plants", "Watering", "Pests", "Harvest"],
        [
            "sunny corner",
            "good drainage",
            "raised beds",
            "mulch layer",
            "drip lines",
            "crop rotation",
            "companion plants",
            "seed trays",
            "morning light",
        ],
    ),
    "travel": (
        "Trip to the Coast",
        ["Route", "Packing List", "Budget", "Places to Stay", "Food", "Day Trips"],
        [
            "early start",
            "rain jacket",
            "fuel costs",
            "camp site",
            "local market",
            "boat tour",
            "sun cream",
            "train tickets",
            "beach walk",
        ],
    ),
    "office": (
        "Office Move",
        ["Timeline", "New Floor Plan", "Equipment", "Parking", "Networking", "Moving Day"],
        [
            "floor two",
            "desk booking",
            "new printers",
            "bike racks",
            "cable labels",
            "meeting rooms",
            "packing crates",
            "key cards",
            "quiet zone",
        ],
    ),
}

#: LibreOffice writes these explicitly when it saves a pptx; the generator does too, so an
#: untouched slide reads the same before and after a save (title 44 pt centred, body 32 pt).
FONT = "Calibri"
TITLE_PT, BODY_PT = 44, 32


def _style_runs(paragraph, size: int, bold: bool = False, italic: bool = False) -> None:
    from pptx.dml.color import RGBColor
    from pptx.util import Pt

    for run in paragraph.runs:
        run.font.name = FONT
        run.font.size = Pt(size)
        run.font.bold = bold
        if italic:
            run.font.italic = True
        run.font.color.rgb = RGBColor(0, 0, 0)


def _set_bullet(paragraph, char: str | None) -> None:
    """Write the bullet LibreOffice writes out: none on titles, a black "•" in the body."""
    from pptx.oxml.ns import qn

    ppr = paragraph._p.get_or_add_pPr()
    if char is None:
        ppr.append(ppr.makeelement(qn("a:buNone"), {}))
        return
    clr = ppr.makeelement(qn("a:buClr"), {})
    clr.append(clr.makeelement(qn("a:srgbClr"), {"val": "000000"}))
    ppr.append(clr)
    ppr.append(ppr.makeelement(qn("a:buChar"), {"char": char}))


def _deck(params: dict[str, str]) -> list[dict]:
    topic = params.get("deck", "garden")
    if topic not in DECKS:
        raise ValueError(f"unknown deck {topic!r} ({', '.join(DECKS)})")
    heading, titles, points = DECKS[topic]
    rng = random.Random(f"pptx/{topic}/{params.get('seed', '0')}")
    if "blank" in params:
        return []
    slides = [_slide(heading, [])]
    for title in titles[: _int(params, "slides", 5) - 1]:
        slides.append(_slide(title, rng.sample(points, 3)))
    return slides


def _slide(title: str, body: list[str]) -> dict:
    return {"title": title, "body": body, "notes": "", "bold": False, "italic": False}


def _slide_index(slides: list[dict], ref: str) -> int:
    """0-based index of slide ``ref``: a 1-based number, ``end``, or the slide's title."""
    if ref.isdigit():
        return int(ref) - 1
    if ref == "end":
        return len(slides)
    for i, spec in enumerate(slides):
        if spec["title"] == ref:
            return i
    raise ValueError(f"no slide is titled {ref!r}")


def pptx_asset(params: dict[str, str]) -> bytes:
    """A deck of title-and-content slides, with the edits of a task applied when asked for.

    The deck (``deck``: ``garden``, ``travel`` or ``office``) has ``slides`` slides: a title
    slide, then one slide per sub-topic with three seeded bullet points (``seed``); ``blank``
    gives a deck without slides (for edits to fill).

    Edits, in this order. A slide reference ``S`` is a 1-based number or the slide's title (as
    it was before any edit). ``delete=S``; ``dup=S`` (a copy right after it) with
    ``duptitle=text`` (the copy's title); ``move=S:N`` (it becomes slide ``N``, ``end`` for the
    last); ``title=S:text``; ``body=S:a|b|c`` (new bullet points); ``bold=S`` / ``italic=S``
    (bold title / italic bullet points); ``notes=S:text``; ``insert=N:Title|a|b`` (a new slide
    number ``N``); ``add=Title|a|b`` and ``add2=...`` (new last slides).

    >>> import pptx
    >>> deck = pptx.Presentation(io.BytesIO(pptx_asset({"deck": "travel", "slides": "3",
    ...                                                  "title": "Route:Getting There"})))
    >>> [s.shapes.title.text for s in deck.slides]
    ['Trip to the Coast', 'Getting There', 'Packing List']
    """
    from pptx import Presentation
    from pptx.dml.color import RGBColor
    from pptx.enum.text import PP_ALIGN
    from pptx.shapes.autoshape import Shape

    slides = _deck(params)
    original = list(slides)

    def at(ref: str) -> dict:
        return original[_slide_index(original, ref)]

    def new(spec: str) -> dict:
        title, *body = spec.split("|")
        return _slide(title, body)

    if params.get("delete"):
        slides.remove(at(params["delete"]))
    if params.get("dup"):
        spec = at(params["dup"])
        copy = dict(spec, title=params.get("duptitle", spec["title"]))
        slides.insert(slides.index(spec) + 1, copy)
    if params.get("move"):
        ref, to = params["move"].rsplit(":", 1)
        spec = at(ref)
        slides.remove(spec)
        slides.insert(len(slides) if to == "end" else int(to) - 1, spec)
    for key in ("title", "body", "notes"):
        if params.get(key):
            ref, text = params[key].split(":", 1)
            at(ref)[key] = text.split("|") if key == "body" else text
    for key in ("bold", "italic"):
        if params.get(key):
            at(params[key])[key] = True
    if params.get("insert"):
        n, spec = params["insert"].split(":", 1)
        slides.insert(int(n) - 1, new(spec))
    for key in ("add", "add2"):
        if params.get(key):
            slides.append(new(params[key]))

    prs = Presentation()
    prs.slide_master.background.fill.solid()  # LibreOffice writes the white background out
    prs.slide_master.background.fill.fore_color.rgb = RGBColor(0xFF, 0xFF, 0xFF)
    layout = prs.slide_layouts[1]  # Title and Content
    for spec in slides:
        slide = prs.slides.add_slide(layout)
        # the layout has both placeholders; pptx types them as "any shape, or None"
        title, content = slide.shapes.title, slide.placeholders[1]
        if not isinstance(title, Shape) or not isinstance(content, Shape):
            raise TypeError(f"layout {layout.name!r} lacks a title or a content placeholder")
        title.text_frame.text = spec["title"]
        title.text_frame.paragraphs[0].alignment = PP_ALIGN.CENTER
        _style_runs(title.text_frame.paragraphs[0], TITLE_PT, spec["bold"])
        _set_bullet(title.text_frame.paragraphs[0], None)
        body = content.text_frame
        for i, point in enumerate(spec["body"]):
            paragraph = body.paragraphs[0] if i == 0 else body.add_paragraph()
            paragraph.text = point
            _style_runs(paragraph, BODY_PT, italic=spec["italic"])
            _set_bullet(paragraph, "\u2022")
        if spec["notes"]:
            notes = slide.notes_slide.notes_text_frame
            if notes is None:
                raise TypeError("the default notes master has no notes placeholder")
            notes.text = spec["notes"]
    prs.core_properties.author = "osworld-gym"
    return _save(prs)
