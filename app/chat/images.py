"""The images of a chat request: read (data URL or uploaded media), decoded and checked with
Pillow, then tokenized with the prompt through the model's projector.

Runs in a worker thread (decoding is CPU work). Every bad image is a RequestError (400) that
names the message it came from; nothing is queued then.
"""

from __future__ import annotations

from typing import Any

from app.chat.messages import ChatMessage, ImagePart
from app.chat.templates.prompter import Prompter
from app.engine.request import RequestError
from app.engine.tokenizer import ImageTokenizer
from app.media.media_store import MediaStore, image_limits
from mm.image import ImageError, decode_image, image_bytes_from_url
from mm.mtmd_bridge import ImageChunk, ImageInput
from mm.token_sequence import TokenSequence


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
    tenant_id: str | None = None,
    param: str = "messages",
) -> list[ImageInput]:
    """tenant_id: uploaded media must be visible to this tenant (None: any). The images are
    counted before any is read (`param`: the field a 400 for too many names)."""
    check_image_count(sum(len(m.images()) for m in messages), settings, param)
    limits = image_limits(settings)
    out: list[ImageInput] = []
    for i, message in enumerate(messages):
        for part in message.images():
            try:
                if isinstance(part, ImagePart):
                    data = image_bytes_from_url(part.image_url.url, limits)
                else:
                    data = _uploaded(media, part.image_file.file_id, tenant_id)
                image = decode_image(data, limits)
            except ImageError as e:
                raise RequestError(f"messages[{i}]: {e}", param=f"messages.{i}.content") from e
            out.append(ImageInput(image.width, image.height, image.rgb, image.id))
    return out


def _uploaded(media: MediaStore | None, media_id: str, tenant_id: str | None) -> bytes:
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
    tenant_id: str | None = None,
    tools: list[dict[str, Any]] | None = None,
    param: str = "messages",
) -> tuple[TokenSequence, dict[str, ImageChunk]]:
    """The prompt of a chat with images: media chunks where the images are; `tools` for a
    template that renders them; `param`: the field errors about the images name."""
    images = load_images(messages, settings, media, tenant_id, param)
    text = prompter.render([m.for_template(vision.marker) for m in messages], tools=tools)
    if text.count(vision.marker) != len(images):
        raise RequestError(
            f"message text must not contain the media marker {vision.marker}", param="messages"
        )
    return vision.tokenize(text, images, add_special=prompter.needs_bos(text))
