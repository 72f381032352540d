"""Documents for retrieval-augmented answers: load, chunk, embed, index, retrieve, lay out.

A library: no HTTP and no database here (`app/` exposes it). Its results are plain data
(loaded documents, chunks, hits, layouts), never FAISS or torch objects.
"""
