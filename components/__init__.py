"""Pulumi ComponentResources, one concern each; they receive typed args and never read config."""
