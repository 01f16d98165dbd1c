"""Pulumi ComponentResources: the planned groups (group.py); they render nothing and read no config."""
