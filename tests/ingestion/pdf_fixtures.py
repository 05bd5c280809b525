"""PDFs made in the test with pypdf's writer: text runs placed on pages as any PDF writer places
them (Helvetica, one `Tj` per run), so the real parser reads them like a generated manual.

`manual_pdf` is a three-page manual: a running header and a "Page n of 3" footer on every page,
a specification table on page 1, and a passage that starts on page 2 and ends on page 3.
"""

from __future__ import annotations

import io

Run = tuple[float, float, str]  # x, y (points from the bottom left), text

TABLE = [("Model", "Battery", "Battery life"), ("Aurora S1", "2x AA lithium", "18 months"),
         ("Aurora S2", "CR2032 coin cell", "12 months"), ("Base station", "USB-C power", "none")]
CROSSING_START = "Pairing takes about forty seconds once the sensor light blinks green,"
CROSSING_END = "and the base station confirms the pairing with two short beeps."


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def pdf_pages(pages: list[list[Run]]) -> bytes:
    """A Letter-size PDF, one list of text runs per page."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    font = writer._add_object(DictionaryObject({NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
                                                NameObject("/BaseFont"): NameObject("/Helvetica")}))
    for runs in pages:
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})
        stream = DecodedStreamObject()
        stream.set_data("\n".join(f"BT /F1 10 Tf {x} {y} Td ({_escape(text)}) Tj ET" for x, y, text in runs).encode("latin-1"))
        page[NameObject("/Contents")] = writer._add_object(stream)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _lines(top: float, texts: list[str], x: float = 72, leading: float = 14) -> list[Run]:
    return [(x, top - i * leading, text) for i, text in enumerate(texts)]


def _table(top: float, rows: list[tuple[str, ...]], columns: tuple[float, ...] = (72, 200, 340)) -> list[Run]:
    return [(x, top - i * 16, cell) for i, row in enumerate(rows) for x, cell in zip(columns, row)]


def _chrome(number: int, total: int) -> list[Run]:
    """The running header and footer of page `number`."""
    return [(72, 750, "Aurora Weather Station Manual"), (270, 40, f"Page {number} of {total}")]


def manual_pdf() -> bytes:
    page1 = [*_chrome(1, 3), *_lines(710, ["Specifications", "The sensors and the batteries they take are listed below."]),
             *_table(660, TABLE), *_lines(570, ["Batteries are not covered by the warranty."])]
    page2 = [*_chrome(2, 3), *_lines(710, ["Pairing", "Hold the pair button on the base station for three seconds.",
                                           "The sensor light starts to blink while the base station listens."]),
             *_lines(100, [CROSSING_START])]
    page3 = [*_chrome(3, 3), *_lines(710, [CROSSING_END, "", "Cleaning",
                                           "Wipe the sensor housing with a dry cloth once a season."])]
    return pdf_pages([page1, page2, page3])
