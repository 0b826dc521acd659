"""Foundations every layer shares: input checks, names, the task, metrics, the device and the work budgets."""
