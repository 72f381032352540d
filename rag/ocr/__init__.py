"""OCR: page images read as text (Debian's tesseract, run as a child process per page), the
images of an upload (a photo or scan, checked before it is decoded) and the PDF pages without a
text layer, rendered within a pixel budget."""
