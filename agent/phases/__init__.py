"""The loop's phases that are more than a call: perceive (build the request) and plan (type the response)."""
