"""`ImageWork`: where a chat's images are fetched, decoded and tokenized.

Remote image URLs (--allow-remote-images) are fetched first, all of a request's at once, on the
event loop (app/outbound/: public addresses only, --fetch-timeout for all of one image, at most
--image-max-bytes): a slow image server holds no thread. Decoding and the image prompt then run
in the images pool's threads (app/thread_pools.py), never in the ones key lookups and database
calls use. A fetch that fails is the request's 400, naming where the image was, with what the
client needs to know and no more (not the remote status, nor what the host resolved to).
"""

from __future__ import annotations

import asyncio
from typing import Any

from app.chat.images import Fetched, image_prompt, remote_urls
from app.chat.messages import ChatMessage
from app.chat.sessions.session_history import store_images, visible_uploads
from app.chat.templates.prompter import Prompter
from app.engine.request import RequestError
from app.engine.tokenizer import ImageTokenizer
from app.media.media_store import MediaStore
from app.outbound.outbound_http import FetchError, Outbound
from app.thread_pools import WorkerPool
from mm.image import is_remote
from mm.mtmd_bridge import ImageChunk
from mm.token_sequence import TokenSequence

# (URL, where it is: the message prefix of its error, its param)
Wanted = tuple[str, str, str]


class ImageWork:
    def __init__(
        self, settings: Any, media: MediaStore | None, pool: WorkerPool, outbound: Outbound | None
    ) -> None:
        self.settings = settings
        self.media = media  # uploaded and stored images
        self.pool = pool  # decoding and image prompts
        # Remote image URLs are fetched through it; None: they are refused (as mm/image.py says).
        self.outbound = outbound if settings.allow_remote_images else None

    async def prompt(
        self,
        prompter: Prompter,
        vision: ImageTokenizer,
        messages: list[ChatMessage],
        tenant: str,
        tools: list[dict[str, Any]] | None = None,
        param: str = "messages",
    ) -> tuple[TokenSequence, dict[str, ImageChunk]]:
        """The prompt of a chat with images (tenant: whose uploads it may name; `param`: the
        field errors about its images name)."""
        urls = remote_urls(messages)
        fetched = await self.fetch(
            [(u, f"messages[{i}]: ", f"messages.{i}.content") for i, u in urls]
        )
        media, settings = self.media, self.settings
        return await self.pool.run(
            image_prompt, prompter, vision, messages, settings, media, tenant, tools, fetched, param
        )

    async def store(
        self, parts: list[dict[str, Any]], media: MediaStore, tenant: str, param: str
    ) -> list[dict[str, Any]]:
        """A new message's parts with its inline and remote images stored (by id); the uploads
        it names must be the tenant's."""
        await asyncio.to_thread(visible_uploads, parts, media, tenant)
        urls = [p["image_url"]["url"] for p in parts if p.get("type") == "image_url"]
        fetched = await self.fetch([(url, "", param) for url in urls if is_remote(url)])
        return await self.pool.run(store_images, parts, media, self.settings, tenant, fetched)

    async def fetch(self, wanted: list[Wanted]) -> Fetched:
        """The remote images' bytes, all fetched at once (the first failure ends the others);
        none unless remote images are allowed."""
        if self.outbound is None or not wanted:
            return {}
        first: dict[str, tuple[str, str]] = {}  # each URL once, named where it first is
        for url, prefix, param in wanted:
            first.setdefault(url, (prefix, param))
        tasks = [asyncio.create_task(self._one(url, *where)) for url, where in first.items()]
        try:
            found = await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
        return dict(zip(first, found, strict=True))

    async def _one(self, url: str, prefix: str, param: str) -> bytes:
        assert self.outbound is not None
        limit, deadline = self.settings.image_max_bytes, self.settings.fetch_timeout
        try:
            return await self.outbound.fetch(url, limit, deadline)
        except FetchError as e:
            raise RequestError(
                f"{prefix}fetching the image failed: {e.message}", param=param
            ) from None
