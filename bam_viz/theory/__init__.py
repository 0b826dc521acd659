"""The Theory lab: one module per paper, every family asked through the registry."""
