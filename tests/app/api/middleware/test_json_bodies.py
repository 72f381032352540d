from __future__ import annotations

from app.api.middleware.json_bodies import reads_as_json


def scope(method: str = "POST", path: str = "/completion", ctype: bytes | None = None) -> dict:
    headers = [(b"host", b"x")] + ([(b"content-type", ctype)] if ctype is not None else [])
    return {"type": "http", "method": method, "path": path, "headers": headers}


def test_bodies_without_a_json_type_are_read_as_json():
    assert reads_as_json(scope())
    assert reads_as_json(scope(ctype=b"application/x-www-form-urlencoded"))
    assert reads_as_json(scope(ctype=b"Application/X-WWW-Form-Urlencoded; charset=utf-8"))


def test_other_bodies_pass_untouched():
    assert not reads_as_json(scope(ctype=b"application/json"))
    assert not reads_as_json(scope(ctype=b"multipart/form-data; boundary=x"))
    assert not reads_as_json(scope(ctype=b"image/png", path="/v1/media"))
    assert not reads_as_json(scope(method="GET"))
    assert not reads_as_json(scope(path="/cors-proxy"))
    assert not reads_as_json({"type": "websocket", "path": "/", "headers": []})
