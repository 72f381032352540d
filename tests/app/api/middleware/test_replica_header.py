"""Every response names its replica, errors and streams included."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from fastapi.testclient import TestClient

from app.api.errors import install_error_handlers
from app.api.middleware.replica_header import ReplicaHeader


def app_named(name: str) -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)
    app.add_middleware(ReplicaHeader, name=name)

    @app.get("/ok")
    def ok() -> dict:
        return {"ok": True}

    @app.get("/stream")
    def stream() -> StreamingResponse:
        return StreamingResponse(iter(["data: 1\n\n"]), media_type="text/event-stream")

    return app


def test_answers_errors_and_streams_carry_the_replica_name():
    client = TestClient(app_named("replica-7"))
    for path, status in (("/ok", 200), ("/stream", 200), ("/missing", 404)):
        r = client.get(path)
        assert r.status_code == status
        assert r.headers["x-replica"] == "replica-7"
        assert r.headers.get_list("x-replica") == ["replica-7"]
