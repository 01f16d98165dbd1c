"""Pure manifest renderers: config-derived inputs in, plain Kubernetes dicts out (no Pulumi)."""
