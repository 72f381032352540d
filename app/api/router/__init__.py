"""The router's own API (router mode: `--models-dir`, `--models-preset`): the models and their
status, loading and unloading them, its `/props` and `/health`, and every other request forwarded
to the server of the model it names (app/router)."""
