"""Predictors, corpus evaluation, reports, example choice, corpus analysis and scoring."""
