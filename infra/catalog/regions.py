"""DigitalOcean datacenter regions (slugs accepted by the API).

Whether a region offers a given GPU size is only known at run time from `GET /v2/sizes`; `infra
doctor` checks that. Config validation only rejects slugs that are not regions at all (typos).
"""

REGIONS: dict[str, str] = {
    "nyc1": "New York 1",
    "nyc2": "New York 2",
    "nyc3": "New York 3",
    "sfo2": "San Francisco 2",
    "sfo3": "San Francisco 3",
    "ams3": "Amsterdam 3",
    "sgp1": "Singapore 1",
    "lon1": "London 1",
    "fra1": "Frankfurt 1",
    "tor1": "Toronto 1",
    "blr1": "Bangalore 1",
    "syd1": "Sydney 1",
    "atl1": "Atlanta 1",
    "ric1": "Richmond 1",
}
