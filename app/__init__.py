"""kvchat: the server (`python -m app`). Entry points and settings live at this root; each
folder holds one concern (see docs/development.md, Layout)."""
