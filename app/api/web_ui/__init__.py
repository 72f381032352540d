"""The built web UI's files, served for the GETs no route takes."""
