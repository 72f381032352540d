"""Requests that would cost a server more than their size: grammars and schemas whose bounds are
written out in full, rules that fan out, many images or prompts in one request, a DOCX that
unpacks to gigabytes, a PDF of thousands of pages, images of pages whose few bytes decode to
gigapixels (a PNG's header, a PDF's image of zeros), answers of millions of tokens, long logit
bias lists. Shared by the attack tests (tests/app/api/attacks/test_resource_limits.py) and
`python -m bench.resource_limits`, which measures what each costs the server.

Each builder returns a `Hostile`: the route, and a JSON body or a multipart file.
"""

from __future__ import annotations

import base64
import io
import struct
import zipfile
import zlib
from dataclasses import dataclass, field
from typing import Any

from docx import Document
from fpdf import FPDF
from PIL import Image

HI = [{"role": "user", "content": "Say hi."}]
DOCUMENTS = "/v1/collections/{collection}/documents"  # the collection is the caller's


@dataclass(slots=True)
class Hostile:
    path: str
    json: dict[str, Any] | None = None
    param: str | None = None  # the field the refusal names
    file: tuple[str, bytes, str] | None = None  # multipart `file`: name, bytes, content type
    extra: dict[str, Any] = field(default_factory=dict)


def chat(**fields: Any) -> dict[str, Any]:
    return {"messages": HI, "max_tokens": 4, "temperature": 0, **fields}


def schema_format(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}


def huge_max_length(n: int = 3_000_000_000) -> Hostile:
    """A string schema whose maxLength the converter writes out as n nested groups."""
    schema = {"type": "string", "maxLength": n}
    return Hostile(
        "/v1/chat/completions", chat(response_format=schema_format(schema)), "response_format"
    )


def huge_min_items_tool(n: int = 1_000_000) -> Hostile:
    """A forced tool call whose arguments' array has n items at least."""
    params = {
        "type": "object",
        "properties": {"xs": {"type": "array", "items": {"type": "integer"}, "minItems": n}},
        "required": ["xs"],
    }
    tool = {"type": "function", "function": {"name": "f", "parameters": params}}
    body = chat(tools=[tool], tool_choice="required")
    return Hostile("/v1/chat/completions", body, "tools[0].function.parameters")


def huge_pattern(n: int = 1_000_000) -> Hostile:
    """llama-server's json_schema field: a pattern of one character n times."""
    body = {
        "prompt": "x",
        "n_predict": 4,
        "json_schema": {"type": "string", "pattern": f"^a{{{n}}}$"},
    }
    return Hostile("/completion", body, "json_schema")


def deep_grammar(depth: int = 49_000) -> Hostile:
    """A raw GBNF grammar of groups nested `depth` deep: llama.cpp's parser recurses per level."""
    grammar = "root ::= " + "(" * depth + '"a"' + ")" * depth
    return Hostile("/completion", {"prompt": "x", "n_predict": 4, "grammar": grammar}, "grammar")


def fan_out_grammar(levels: int = 24) -> Hostile:
    """Rules of two alternatives that begin with the next rule: 2^levels stacks at the start."""
    rules = [f'r{i} ::= r{i + 1} | r{i + 1} "a"' for i in range(levels)]
    grammar = "\n".join(["root ::= r0", *rules, f'r{levels} ::= "b"']) + "\n"
    return Hostile("/completion", {"prompt": "x", "n_predict": 4, "grammar": grammar}, "grammar")


def left_recursive_grammar() -> Hostile:
    """A rule that begins with itself through rules that match nothing: llama.cpp's check
    misses it, and its stacks then grow until memory runs out."""
    grammar = 'root ::= a root "x" | "y"\na ::= b\nb ::= ""\n'
    return Hostile("/completion", {"prompt": "x", "n_predict": 4, "grammar": grammar}, "grammar")


def png(seed: int, size: int = 64) -> bytes:
    im = Image.new("RGB", (size, size), (seed % 256, (seed * 7) % 256, (seed * 13) % 256))
    out = io.BytesIO()
    im.save(out, "PNG")
    return out.getvalue()


def image_parts(n: int, size: int = 64) -> list[dict[str, Any]]:
    urls = ["data:image/png;base64," + base64.b64encode(png(i, size)).decode() for i in range(n)]
    return [{"type": "image_url", "image_url": {"url": u}} for u in urls]


def many_images(n: int = 17, size: int = 64) -> Hostile:
    """One user message with n images (each decoded to its full pixels)."""
    content = [{"type": "text", "text": "Describe."}, *image_parts(n, size)]
    body = chat(messages=[{"role": "user", "content": content}])
    return Hostile("/v1/chat/completions", body, "messages")


def many_prompts(n: int = 20_000) -> Hostile:
    """/completion with n prompts: a generation each."""
    return Hostile("/completion", {"prompt": ["hi"] * n, "n_predict": 1}, "prompt")


def zip_bomb_docx(unpacked: int = 256 << 20) -> Hostile:
    """A DOCX whose document part unpacks to `unpacked` bytes (deflate packs about a thousand
    to one)."""
    base = io.BytesIO()
    Document().save(base)
    source, out = zipfile.ZipFile(base), io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as target:
        for item in source.infolist():
            if item.filename != "word/document.xml":
                target.writestr(item, source.read(item.filename))
        with target.open("word/document.xml", "w", force_zip64=True) as part:
            block = b" " * (1 << 20)
            for _ in range(unpacked // len(block)):
                part.write(block)
    name, ctype = (
        "bomb.docx",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    )
    return Hostile(DOCUMENTS, file=(name, out.getvalue(), ctype), param="file")


def many_pages_pdf(pages: int = 3000) -> Hostile:
    pdf = FPDF()
    pdf.set_font("helvetica", size=8)
    for i in range(pages):
        pdf.add_page()
        pdf.cell(0, 8, f"page {i}")
    data = bytes(pdf.output())
    return Hostile(DOCUMENTS, file=("pages.pdf", data, "application/pdf"), param="file")


def image_bomb_png(width: int = 100_000, height: int = 100_000) -> Hostile:
    """A PNG of a few hundred bytes whose header claims width x height greyscale pixels."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 1024)
    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat)
    data += chunk(b"IEND", b"")
    return Hostile(DOCUMENTS, file=("bomb.png", data, "image/png"), param="file")


def image_bomb_pdf(side: int = 30_000) -> Hostile:
    """A one-page PDF without text whose page holds a side x side greyscale image of zeros:
    about 1 MB (deflate), side squared bytes decoded (900 MB at 30,000)."""
    packer = zlib.compressobj(9)
    row = b"\x00" * side
    image = b"".join(packer.compress(row) for _ in range(side)) + packer.flush()
    head = b"<</Type/XObject/Subtype/Image/Width %d/Height %d/ColorSpace/DeviceGray" % (side, side)
    head += b"/BitsPerComponent 8/Filter/FlateDecode/Length %d>>stream\n" % len(image)
    objects = [
        b"<</Type/Catalog/Pages 2 0 R>>",
        b"<</Type/Pages/Kids[3 0 R]/Count 1>>",
        b"<</Type/Page/Parent 2 0 R/MediaBox[0 0 595 842]/Resources<</XObject<</Im0 4 0 R>>>>"
        b"/Contents 5 0 R>>",
        head + image + b"\nendstream",
        b"<</Length 32>>stream\nq 595 0 0 842 0 0 cm /Im0 Do Q\nendstream",
    ]
    data, offsets = b"%PDF-1.4\n", []
    for i, body in enumerate(objects, 1):
        offsets.append(len(data))
        data += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(data)
    data += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    data += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    data += b"trailer\n<</Size %d/Root 1 0 R>>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return Hostile(DOCUMENTS, file=("bomb.pdf", data, "application/pdf"), param="file")


def many_frames_tiff(frames: int = 500) -> Hostile:
    """A TIFF of `frames` small pages: each a page for OCR."""
    pages = [Image.new("L", (32, 32), 255) for _ in range(frames)]
    out = io.BytesIO()
    pages[0].save(out, "TIFF", save_all=True, append_images=pages[1:])
    return Hostile(DOCUMENTS, file=("frames.tiff", out.getvalue(), "image/tiff"), param="file")


def big_tokenize(n_bytes: int = 8 << 20) -> Hostile:
    """/tokenize with pieces of a text of `n_bytes` (about a token per four bytes)."""
    text = ("All work and no play makes Jack a dull boy. " * (n_bytes // 44 + 1))[:n_bytes]
    return Hostile("/tokenize", {"content": text, "with_pieces": True})


def long_bias_list(n: int = 1_000_000, n_vocab: int = 49152) -> Hostile:
    """A logit_bias of n entries (llama-server's pairs), tokens repeated."""
    body = {"prompt": "x", "n_predict": 2, "logit_bias": [[i % n_vocab, 0.5] for i in range(n)]}
    return Hostile("/completion", body)


def long_bias_text(n_bytes: int = 4 << 20) -> Hostile:
    """A logit_bias keyed by a text of `n_bytes` (each of its tokens biased)."""
    text = ("lorem ipsum dolor sit amet " * (n_bytes // 27 + 1))[:n_bytes]
    return Hostile("/completion", {"prompt": "x", "n_predict": 2, "logit_bias": [[text, -1.0]]})
