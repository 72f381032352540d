"""Requests this server makes to other hosts (llama-server's /cors-proxy, remote image URLs):
public addresses only, checked after name lookup and on every redirect, within a deadline and a
size limit, with errors that tell the client what it needs and nothing of the network behind."""
