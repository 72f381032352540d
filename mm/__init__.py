"""Media-aware token sequences (NULL placeholders + media chunks, as llama-server's
server_tokens), image decoding and identity (Pillow, pixel hashes), and the mtmd bridge. The lowest
layer: imports nothing from app/ or rag/."""
