"""Facts the toolkit is built on: GPU sizes, regions, model architectures, pinned versions.

Catalog modules hold data, not logic; everything here is plain Python with no Pulumi imports.
"""
