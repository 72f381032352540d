"""The lookups routes share, as FastAPI dependencies: the caller's tenant, and the tenant's
session, collection or document named by the path, which answer 404 when the tenant has none
(another tenant's reads as "not found", never "forbidden").

They take only the path and the request, and run before the body's fields are checked: a
request to a session that is not there is a 404 whatever its body. They are coroutines: a plain
function would be run in the thread pool.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.api.middleware.auth import tenant_of
from app.api.services import ServicesDep
from app.chat.sessions.session_lookup import load_session
from app.db.documents.document_records import ChunkRecord, CollectionRecord, DocumentRecord
from app.db.records import SessionRecord
from app.docs import doc_lookup
from app.docs.document_service import Documents
from app.docs.questions.doc_questions import DocQuestions
from app.engine.request import RequestError


async def _tenant(http: Request) -> str:
    return tenant_of(http)


TenantDep = Annotated[str, Depends(_tenant)]


async def _session(session_id: str, tenant: TenantDep, services: ServicesDep) -> SessionRecord:
    return await load_session(services.store, session_id, tenant)


SessionDep = Annotated[SessionRecord, Depends(_session)]


def _unavailable(what: str) -> RequestError:
    return RequestError(f"{what} not available", code="unavailable", status=503)


async def _documents(services: ServicesDep) -> Documents:
    """The documents service; 503 on a server that has none."""
    if services.documents is None:
        raise _unavailable("documents are")
    return services.documents


DocsDep = Annotated[Documents, Depends(_documents)]


async def _questions(services: ServicesDep) -> DocQuestions:
    if services.questions is None:  # built with the documents service
        raise _unavailable("documents are")
    return services.questions


QuestionsDep = Annotated[DocQuestions, Depends(_questions)]


async def _collection(collection_id: str, tenant: TenantDep, docs: DocsDep) -> CollectionRecord:
    return await doc_lookup.load_collection(docs, tenant, collection_id)


CollectionDep = Annotated[CollectionRecord, Depends(_collection)]


async def _document(document_id: str, tenant: TenantDep, docs: DocsDep) -> DocumentRecord:
    return await doc_lookup.load_document(docs, tenant, document_id)


DocumentDep = Annotated[DocumentRecord, Depends(_document)]


async def _chunks(document_id: str, tenant: TenantDep, docs: DocsDep) -> list[ChunkRecord]:
    return await doc_lookup.load_chunks(docs, tenant, document_id)


ChunksDep = Annotated[list[ChunkRecord], Depends(_chunks)]
