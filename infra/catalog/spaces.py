"""DigitalOcean Spaces (S3-compatible object storage) as a weight source: regions, names, limits.

Facts, each with its source:

- Regions with Spaces: ams3, atl1, blr1, fra1, lon1, nyc3, sfo2, sfo3, sgp1, syd1, tor1 —
  digitalocean/terraform-provider-digitalocean `digitalocean/spaces/spaces_entities.go` (tag
  v2.99.1). Of the GPU regions, tor1 and atl1 have Spaces; nyc2 has not (nyc3 is the nearest).
- Endpoint `https://<region>.digitaloceanspaces.com`, bucket host
  `<bucket>.<region>.digitaloceanspaces.com` (same provider, `resource_spaces_bucket.go`). S3
  clients other than AWS's address Spaces path-style: the Run:ai streamer needs
  `RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING=0` (run-ai/runai-model-streamer
  `docs/src/env-vars.md`).
- Request rate limits (docs.digitalocean.com/products/spaces/details/limits): 1,500 requests per
  second per client IP to all buckets of an account; per bucket, 500 operations per second for
  buckets created before 2020–2022 (per datacenter; newer buckets have higher limits, not quoted
  here), 10 concurrent PUT/COPY per object. No throughput (bytes/s) limit is published.
- Bucket names: the DO page on naming was not retrieved; the S3 rules are assumed (3–63
  characters, lowercase letters, digits and hyphens, starting and ending with a letter or
  digit, not shaped like an IPv4 address). Periods are refused too: DO warns that wildcard TLS
  certificates do not match bucket names with a period (limits page above).
"""

from __future__ import annotations

import re

SPACES_REGIONS: tuple[str, ...] = (
    "ams3", "atl1", "blr1", "fra1", "lon1", "nyc3", "sfo2", "sfo3", "sgp1", "syd1", "tor1",
)  # fmt: skip
SPACES_REGIONS_SOURCE = "terraform-provider-digitalocean v2.99.1 digitalocean/spaces/spaces_entities.go"

# Nearest region with Spaces for a region without (suggested in the config error).
NEAREST_SPACES_REGION = {"nyc1": "nyc3", "nyc2": "nyc3", "ric1": "atl1"}

REQUESTS_PER_S_PER_IP = 1500
REQUESTS_PER_S_PER_BUCKET = 500  # the documented floor (buckets created before 2020–2022)

_BUCKET = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")
_IPV4 = re.compile(r"^[0-9]+(\.[0-9]+){3}$")


def endpoint_url(region: str) -> str:
    """The S3 endpoint of a Spaces region (path-style: the bucket goes in the path)."""
    return f"https://{region}.digitaloceanspaces.com"


def bucket_name_problem(name: str) -> str | None:
    """Why `name` cannot be a Spaces bucket, or None when it can."""
    if _IPV4.match(name):
        return "is shaped like an IP address"
    if not 3 <= len(name) <= 63:
        return f"has {len(name)} characters; bucket names have 3 to 63"
    if not _BUCKET.match(name):
        return "may only hold lowercase letters, digits and '-', and must start and end with a letter or digit"
    return None
