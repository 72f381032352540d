"""`python -m rag ingest PATH... --collection NAME`.

The command stores into the server's database, so it runs the app's pipeline (app/docs/cli.py):
an entry point, like app/__main__.py, is the one place that may import across the layers.
"""

from __future__ import annotations

import sys

from app.docs.cli import main

if __name__ == "__main__":
    sys.exit(main())
