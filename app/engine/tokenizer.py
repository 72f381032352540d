"""`Tokenizer`: what services need of the model's vocabulary, and nothing that computes;
`ImageTokenizer`: what they need of the vision projector.

`Engine.tokenizer` hands the loaded model out under this type, so that prompt building
(app/chat/templates/prompter.py) and document token counts (app/docs/) cannot reach the KV or the
llama context. Any thread may call it: the vocabulary never changes (see
app/engine/llama/model.py). `Engine.images` hands the projector out the same way: its marker and
the tokenizing of a prompt with images, not the encoding (that runs on the engine thread).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from mm.mtmd_bridge import ImageChunk, ImageInput
    from mm.token_sequence import TokenSequence


class Tokenizer(Protocol):
    @property
    def bos(self) -> int: ...  # -1: the model has none

    @property
    def eos(self) -> int: ...

    @property
    def n_vocab(self) -> int: ...

    @property
    def closed(self) -> bool: ...  # the model was freed: nothing may be read any more

    def tokenize(
        self, text: str, add_special: bool = True, parse_special: bool = True
    ) -> list[int]: ...

    def detokenize(self, tokens: list[int], special: bool = False) -> str: ...

    def token_text(self, token: int) -> str: ...

    def token_to_piece(self, token: int, special: bool = False) -> bytes: ...

    def is_eog(self, token: int) -> bool: ...

    def chat_template(self) -> str | None: ...


class ImageTokenizer(Protocol):
    @property
    def marker(self) -> str: ...  # the text that stands for an image in a prompt

    def tokenize(
        self, text: str, images: list[ImageInput], add_special: bool
    ) -> tuple[TokenSequence, dict[str, ImageChunk]]: ...


_EOG: weakref.WeakKeyDictionary[Any, tuple[int, ...]] = weakref.WeakKeyDictionary()


def eog_tokens(vocab: Tokenizer) -> tuple[int, ...]:
    """The vocabulary's end-of-generation tokens (llama-server's ignore_eos bans them all),
    found once per model."""
    found = _EOG.get(vocab)
    if found is None:
        found = _EOG[vocab] = tuple(t for t in range(vocab.n_vocab) if vocab.is_eog(t))
    return found
