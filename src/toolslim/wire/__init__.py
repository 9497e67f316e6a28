"""Protocol knowledge, pure: routing, content codings, SSE, usage readers per API, error bodies."""
