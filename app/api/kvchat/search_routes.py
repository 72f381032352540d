"""Search over collections: the best chunks for a query (`/search`) and questions
answered from them with citations (`/ask`); the work is app/docs/questions/doc_questions.py's.

Tenancy: every collection is looked up under the caller's tenant (app/api/lookups.py);
another tenant's answers 404 as if it did not exist.
"""

from __future__ import annotations

from fastapi import APIRouter, Request

from app.api.kvchat.doc_schemas import AskRequest, SearchRequest, hit_json
from app.api.lookups import CollectionDep, QuestionsDep
from app.api.middleware.auth import cache_salt
from app.api.services import ServicesDep
from app.api.turn_reply import reply_answer

router = APIRouter(prefix="/v1")


@router.post("/collections/{collection_id}/search")
async def search_collection(
    collection: CollectionDep, body: SearchRequest, questions: QuestionsDep
):
    found = await questions.search(collection.id, body.query, body)
    return {"object": "list", "data": [hit_json(c, found.scores[c.id]) for c in found.chunks]}


@router.post("/collections/{collection_id}/ask")
async def ask(
    collection: CollectionDep,
    body: AskRequest,
    http: Request,
    services: ServicesDep,
    questions: QuestionsDep,
):
    salt = cache_salt(http, body.cache_salt)
    question, citations = await questions.ask(collection, body.question, body, salt)
    return await reply_answer(services, question, citations, body, salt, http)
