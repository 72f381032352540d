"""Documents in the database: collections, documents and chunks, their models, records and
stores, and each collection's version."""
