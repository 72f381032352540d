"""The images of a chat request: read (data URL or uploaded media), decoded and checked with
Pillow, then tokenized with the prompt through the model's projector.

Runs in a worker thread of the images pool (decoding is CPU work; app/chat/image_work.py). Remote
image URLs come already fetched (`fetched`). Every bad image is a RequestError (400) that names
the message it came from; nothing is queued then.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.chat.messages import ChatMessage, ImagePart
from app.chat.templates.prompter import Prompter
from app.engine.request import RequestError
from app.engine.tokenizer import ImageTokenizer
from app.media.media_store import MediaStore, image_limits
from mm.image import ImageError, ImageLimits, decode_image, image_bytes_from_url, is_remote
from mm.mtmd_bridge import ImageChunk, ImageInput
from mm.token_sequence import TokenSequence

Fetched = Mapping[str, bytes]  # a remote image URL -> its bytes, fetched before decoding


def image_data(url: str, limits: ImageLimits, fetched: Fetched) -> bytes:
    """An `image_url`'s bytes: fetched already if remote (and allowed), else read from it."""
    if is_remote(url) and limits.allow_remote and url in fetched:
        return fetched[url]
    return image_bytes_from_url(url, limits)


def remote_urls(messages: list[ChatMessage]) -> list[tuple[int, str]]:
    """(message index, URL) of each remote image URL in the messages."""
    return [
        (i, part.image_url.url)
        for i, m in enumerate(messages)
        for part in m.images()
        if isinstance(part, ImagePart) and is_remote(part.image_url.url)
    ]


def check_image_count(n: int, settings: Any, param: str) -> None:
    """A 400 for a request whose prompt would hold more than --image-max-count images: each
    is decoded to its full pixels and all are kept until the prompt is tokenized."""
    limit = settings.image_max_count
    if n > limit:
        raise RequestError(
            f"the request holds {n} images; this server takes at most {limit} in one request "
            "(--image-max-count), earlier turns' included",
            param=param,
        )


def load_images(
    messages: list[ChatMessage],
    settings: Any,
    media: MediaStore | None,
    tenant_id: str,
    fetched: Fetched | None = None,
    param: str = "messages",
) -> list[ImageInput]:
    """tenant_id: uploaded media must be this tenant's (another's reads as unknown). The images
    are counted before any is read (`param`: the field a 400 for too many names)."""
    check_image_count(sum(len(m.images()) for m in messages), settings, param)
    limits = image_limits(settings)
    out: list[ImageInput] = []
    for i, message in enumerate(messages):
        for part in message.images():
            try:
                if isinstance(part, ImagePart):
                    data = image_data(part.image_url.url, limits, fetched or {})
                else:
                    data = _uploaded(media, part.image_file.file_id, tenant_id)
                image = decode_image(data, limits)
            except ImageError as e:
                raise RequestError(f"messages[{i}]: {e}", param=f"messages.{i}.content") from e
            out.append(ImageInput(image.width, image.height, image.rgb, image.id))
    return out


def _uploaded(media: MediaStore | None, media_id: str, tenant_id: str) -> bytes:
    if media is None:
        raise ImageError("uploaded media are not available on this server")
    try:
        return media.load(media_id, tenant_id)
    except (KeyError, ValueError):
        raise ImageError(f"no uploaded media with id {media_id!r}") from None


def image_prompt(
    prompter: Prompter,
    vision: ImageTokenizer,
    messages: list[ChatMessage],
    settings: Any,
    media: MediaStore | None,
    tenant_id: str,
    tools: list[dict[str, Any]] | None = None,
    fetched: Fetched | None = None,
    param: str = "messages",
) -> tuple[TokenSequence, dict[str, ImageChunk]]:
    """The prompt of a chat with images: media chunks where the images are; `tools` for a
    template that renders them; `fetched`: its remote images' bytes; `param`: the field errors
    about the images name."""
    images = load_images(messages, settings, media, tenant_id, fetched, param)
    text = prompter.render([m.for_template(vision.marker) for m in messages], tools=tools)
    if text.count(vision.marker) != len(images):
        raise RequestError(
            f"message text must not contain the media marker {vision.marker}", param="messages"
        )
    return vision.tokenize(text, images, add_special=prompter.needs_bos(text))
