"""The inference-platform toolkit: configuration, planner, offline plan and the Pulumi program."""
