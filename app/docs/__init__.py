"""Documents served by the app: the rag/ library wired to the database, the engine and a worker."""
