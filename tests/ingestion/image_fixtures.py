"""Image fixtures made in the test: a screenshot with rendered text, a bar chart, a PDF that embeds
the chart under a paragraph of text, a DOCX with a picture, and decompression bombs."""

from __future__ import annotations

import io
import struct
import zlib

from PIL import Image, ImageDraw, ImageFont


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def screenshot_png(lines: list[str], size: tuple[int, int] = (900, 260)) -> bytes:
    """Black text on white, like a settings screen: what OCR reads best and users upload most."""
    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    for i, line in enumerate(lines):
        draw.text((24, 30 + i * 60), line, fill="black", font=_font(30))
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def chart_image(title: str = "Monthly rainfall") -> Image.Image:
    """A bar chart with a title: an image whose text is a label, not an answer."""
    image = Image.new("RGB", (640, 400), "white")
    draw = ImageDraw.Draw(image)
    draw.text((30, 20), title, fill="black", font=_font(30))
    for i, height in enumerate((120, 200, 90, 260, 170)):
        draw.rectangle((60 + i * 110, 370 - height, 130 + i * 110, 370), fill=(40, 90, 200))
    return image


def png_of(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def pdf_with_image(text: str, image: Image.Image) -> bytes:
    """A one-page PDF: a line of Helvetica text, then the image drawn below it (a Flate RGB XObject)."""
    from pypdf import PdfWriter
    from pypdf.generic import ArrayObject, DecodedStreamObject, DictionaryObject, NameObject, NumberObject

    writer = PdfWriter()
    page = writer.add_blank_page(612, 792)
    font = DictionaryObject({NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
                             NameObject("/BaseFont"): NameObject("/Helvetica")})
    rgb = image.convert("RGB")
    picture = DecodedStreamObject()
    picture.set_data(rgb.tobytes())
    picture.update({NameObject("/Type"): NameObject("/XObject"), NameObject("/Subtype"): NameObject("/Image"),
                    NameObject("/Width"): NumberObject(rgb.width), NameObject("/Height"): NumberObject(rgb.height),
                    NameObject("/ColorSpace"): NameObject("/DeviceRGB"), NameObject("/BitsPerComponent"): NumberObject(8)})
    picture = picture.flate_encode()
    content = DecodedStreamObject()
    escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    content.set_data(f"BT /F1 14 Tf 72 740 Td ({escaped}) Tj ET q 320 0 0 200 72 480 cm /Im0 Do Q".encode())
    page[NameObject("/Resources")] = DictionaryObject({
        NameObject("/Font"): DictionaryObject({NameObject("/F1"): writer._add_object(font)}),
        NameObject("/XObject"): DictionaryObject({NameObject("/Im0"): writer._add_object(picture)}),
        NameObject("/ProcSet"): ArrayObject([NameObject("/PDF"), NameObject("/Text"), NameObject("/ImageC")]),
    })
    page[NameObject("/Contents")] = writer._add_object(content)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def docx_with_image(paragraph: str, picture_png: bytes) -> bytes:
    import docx

    document = docx.Document()
    document.add_paragraph(paragraph)
    document.add_picture(io.BytesIO(picture_png))
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def large_png(width: int, height: int) -> bytes:
    """A real, valid PNG of many pixels that compresses to a few KB (one colour)."""
    out = io.BytesIO()
    Image.new("1", (width, height), 1).save(out, "PNG", optimize=True)
    return out.getvalue()


def bomb_png(width: int = 100_000, height: int = 100_000) -> bytes:
    """A PNG whose header claims `width` x `height` pixels over a tiny body: decoding it would take gigabytes."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b"")
