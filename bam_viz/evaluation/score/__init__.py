"""Scoring tables of sentences: reading them, scoring them (locally or with Ray) and writing the result."""
