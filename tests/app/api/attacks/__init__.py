"""Attacks on a shared deployment, kept beside the schema fuzzing (test_openapi_fuzz.py): each
module holds the attacks of one kind, through a real server, so that a change that reopens one
fails `make test`. No test sends traffic off this machine: outbound guards are tested with a
resolver or transport the test controls."""
