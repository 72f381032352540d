"""kvchat's own API: sessions and their turns, media, collections, documents, search and ask."""
