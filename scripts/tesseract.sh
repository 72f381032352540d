#!/usr/bin/env bash
# Tesseract for OCR of scanned PDF pages and images of pages (rag/ocr/tesseract.py runs it, a
# child process per page) with its English data. Prints the binary's path; installs Debian's
# tesseract-ocr and tesseract-ocr-eng with apt-get when tesseract is missing (more languages:
# tesseract-ocr-LANG, then --ocr-lang eng+LANG). Everything but the path goes to stderr.
set -euo pipefail

if path=$(command -v tesseract); then
    echo "$path"
    exit 0
fi
if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
    echo "tesseract.sh: tesseract not found; install Debian's tesseract-ocr package" \
        "(elsewhere: tesseract 4 or later with its English data)" >&2
    exit 1
fi
echo "tesseract.sh: tesseract not found: installing tesseract-ocr with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >&2
apt-get install -y -q --no-install-recommends tesseract-ocr tesseract-ocr-eng >&2
command -v tesseract
