"""Uploaded media: files named by their sha256 plus their database rows."""
