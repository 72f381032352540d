"""The images of a chat request: counted before any is read."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from app.chat.images import check_image_count, load_images
from app.chat.messages import ChatMessage
from app.engine.request import RequestError


def _message(n: int) -> ChatMessage:
    # Not images at all: counting must refuse them before one is decoded.
    parts = [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}] * n
    return ChatMessage(role="user", content=[{"type": "text", "text": "x"}, *parts])


def test_a_prompt_of_more_images_than_the_limit_is_refused_before_any_is_read():
    settings = SimpleNamespace(image_max_count=3)
    with pytest.raises(RequestError) as e:
        load_images([_message(2), _message(2)], settings, None, "t", param="content")
    assert e.value.param == "content" and e.value.status == 400
    assert e.value.message == (
        "the request holds 4 images; this server takes at most 3 in one request "
        "(--image-max-count), earlier turns' included"
    )
    check_image_count(3, settings, "messages")
    with pytest.raises(RequestError, match="not an image|corrupt"):  # 3 are read (and fail)
        load_images([_message(3)], settings, None, "t")
