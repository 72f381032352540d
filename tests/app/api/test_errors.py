"""Error answers a load balancer acts on: a database that cannot be reached is a 503 (nginx
sends the request to another replica), in the API's own error shape."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text
from sqlalchemy.exc import SQLAlchemyError

from app.api.errors import install_error_handlers


def unreachable_database_error() -> SQLAlchemyError:
    """What SQLAlchemy raises when PostgreSQL is not there (a port nothing listens on)."""
    engine = create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except SQLAlchemyError as e:
        return e
    finally:
        engine.dispose()
    pytest.fail("a connection to port 1 succeeded")


def test_an_unreachable_database_answers_503_with_retry_after():
    error = unreachable_database_error()
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/sessions")
    def sessions() -> None:
        raise error

    r = TestClient(app, raise_server_exceptions=False).get("/sessions")
    assert r.status_code == 503 and r.headers["retry-after"] == "1"
    assert r.json()["error"]["type"] == "unavailable_error"
    assert "database" in r.json()["error"]["message"]


def test_other_failures_stay_500():
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/boom")
    def boom() -> None:
        raise ValueError("a bug")

    r = TestClient(app, raise_server_exceptions=False).get("/boom")
    assert r.status_code == 500
