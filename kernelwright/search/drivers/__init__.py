"""Drivers answer the engine's asks: the async loop, the LLM router, the local judge, batch
folders, and the session that starts, resumes, pauses and finishes a run."""
