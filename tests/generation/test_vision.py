"""The seed's rules for images sent to the answering model: which model sees, at most 3 retrieved
images, each a PNG/JPEG/WebP/GIF of at most 5 MB, image hits first, each image once."""

from __future__ import annotations

import base64
import hashlib
import io
import os

import pytest
from PIL import Image

from ragline import defaults
from ragline.contracts.passages import ChunkType
from ragline.contracts.request import ImageInput, PipelineRequest
from ragline.generation.vision import (
    context_image_parts,
    context_image_refs,
    image_descriptions,
    supports_vision,
    user_image_parts,
)
from ragline.ingestion.images import ImageStore, inspect_image
from ragline.models.vision import vision_data_url
from ragline.settings import Settings
from tests.nodes.results import hit


def png(color: tuple[int, int, int], size: tuple[int, int] = (64, 48)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, "PNG")
    return out.getvalue()


def noise_png(side: int) -> bytes:
    """Random pixels do not compress: a PNG of about 3 bytes a pixel."""
    out = io.BytesIO()
    Image.frombytes("RGB", (side, side), os.urandom(side * side * 3)).save(out, "PNG", compress_level=0)
    return out.getvalue()


def stored(store: ImageStore, data: bytes) -> str:
    image = inspect_image(data, "test image")
    store.save(image)
    return image.url


def image_hit(chunk_id: str, url: str, kind: ChunkType = ChunkType.IMAGE_OCR):
    return hit(chunk_id, f"text of {chunk_id}", chunk_type=kind, metadata={"images": [{"url": url, "caption": "", "ocr_text": ""}]})


def sent_images(parts: list[dict]) -> list[str]:
    return [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]


def test_litellm_the_setting_and_the_request_decide_which_model_sees():
    settings = Settings(vision_models=["openai/my-vlm"])
    assert supports_vision("openai/gpt-4o-mini", settings)  # litellm's model map
    assert supports_vision("openai/my-vlm", settings)  # the deployment says so
    assert not supports_vision("openai/scripted", settings)
    assert supports_vision("openai/scripted", settings, PipelineRequest(query="q", chat_model_supports_vision=True))
    assert not supports_vision("ragline/qwen2.5-coder-0.5b-instruct", settings)


def test_at_most_three_retrieved_images_are_sent_image_hits_first_each_once(tmp_path):
    store = ImageStore(tmp_path)
    urls = [stored(store, png((i * 50, 10, 10))) for i in range(5)]
    results = [
        hit("text-1", "a passage with a picture", metadata={"images": [{"url": urls[0]}]}),
        image_hit("img-1", urls[1]),
        image_hit("img-1b", urls[1], ChunkType.IMAGE_CAPTION),  # the same image again: sent once
        image_hit("img-2", urls[2]),
        image_hit("img-3", urls[3]),
        image_hit("img-4", urls[4]),
    ]
    refs = context_image_refs(results)
    assert [(r.chunk_id, r.url) for r in refs] == [("img-1", urls[1]), ("img-2", urls[2]), ("img-3", urls[3]), ("img-4", urls[4]),
                                                   ("text-1", urls[0])]
    parts = context_image_parts(refs, store)
    labels = [p["text"] for p in parts if p["type"] == "text"]
    assert labels == [f"Image 1, from img-1 ({urls[1]}):", f"Image 2, from img-2 ({urls[2]}):", f"Image 3, from img-3 ({urls[3]}):"]
    expected = [f"data:image/png;base64,{base64.b64encode((tmp_path / u.rsplit('/', 1)[1]).read_bytes()).decode()}" for u in urls[1:4]]
    assert sent_images(parts) == expected


def test_an_image_over_5_mb_is_re_encoded_below_it():
    big = noise_png(1400)
    assert len(big) > defaults.CONTEXT_IMAGE_MAX_BYTES
    url = vision_data_url(big)
    assert url is not None and url.startswith("data:image/jpeg;base64,")
    assert len(base64.b64decode(url.split(",", 1)[1])) <= defaults.CONTEXT_IMAGE_MAX_BYTES


def test_an_image_within_5_mb_is_sent_as_it_is():
    small = png((1, 2, 3))
    assert vision_data_url(small) == f"data:image/png;base64,{base64.b64encode(small).decode()}"


def test_only_png_jpeg_webp_and_gif_are_sent(tmp_path):
    bmp = io.BytesIO()
    Image.new("RGB", (40, 40), "red").save(bmp, "BMP")
    name = hashlib.sha256(bmp.getvalue()).hexdigest() + ".png"  # a BMP behind a PNG name
    (tmp_path / name).write_bytes(bmp.getvalue())
    store = ImageStore(tmp_path)
    good = stored(store, png((0, 0, 200)))
    parts = context_image_parts(context_image_refs([image_hit("bmp", f"local://images/{name}"), image_hit("ok", good)]), store)
    assert len(sent_images(parts)) == 1 and "from ok" in parts[0]["text"]
    attached = [ImageInput(url="data:image/bmp;base64," + base64.b64encode(bmp.getvalue()).decode()),
                ImageInput(url="data:image/png;base64," + base64.b64encode(png((9, 9, 9))).decode()),
                ImageInput(url="https://example.com/photo.jpg")]
    assert [url[:22] for url in sent_images(user_image_parts(attached))] == ["data:image/png;base64,", "https://example.com/ph"]


def test_a_model_without_vision_reads_the_description_instead():
    images = [ImageInput(url="data:image/png;base64,AAAA", caption="from the client")]
    assert image_descriptions(images, "a wind gauge at 12 m/s") == "The user attached image. Description: a wind gauge at 12 m/s"
    assert image_descriptions(images, "").endswith("from the client")
    assert image_descriptions([], "ignored") == ""


@pytest.mark.parametrize("url", ["local://images/" + "0" * 64 + ".png", "file:///etc/passwd"])
def test_an_attached_image_must_be_a_data_or_http_url(url):
    with pytest.raises(ValueError):
        ImageInput(url=url)
