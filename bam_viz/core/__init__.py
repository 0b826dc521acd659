"""Foundations every layer shares: input checks, the quantities' names, the task, metrics, token text,
value grids, memory budgets, the device and the caches."""
