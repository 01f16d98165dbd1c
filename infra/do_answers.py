"""The DigitalOcean API answers `infra doctor` reads, as pydantic models.

Shapes from the API reference (https://docs.digitalocean.com/reference/api/digitalocean/):
`GET /v2/account`, `GET /v2/sizes`, `GET /v2/regions` (both paginated with `meta.total`) and
`GET /v2/kubernetes/options`. Only the fields the checks read are declared; everything else DO
sends is ignored, so a new field never breaks doctor, while a field of the wrong kind is one clear
failing check naming it (`account.droplet_limit` is a string, expected a whole number) — never
its value, which could be anything the server echoes.

The account object has two models, one per check that reads it, so a bad `droplet_limit` fails
the droplet limit check and not the token check.
"""

from __future__ import annotations

from typing import Any

from infra.json_shapes import Shape, expected


class AccountAnswer(Shape):
    account: dict[str, Any] = expected("an object")


class AccountStatus(Shape):
    """What the `api token` check reads of `account`."""

    status: str | None = None
    email: str | None = None
    status_message: str | None = None


class AccountLimits(Shape):
    """What the `droplet limit` check reads of `account`."""

    droplet_limit: int | None = expected("a whole number", None, ge=0)


class GpuInfo(Shape):
    count: int | None = None
    model: str | None = None


class Size(Shape):
    slug: str
    available: bool = True
    regions: list[str] | None = None
    price_hourly: float | None = None
    gpu_info: GpuInfo | None = None


class Region(Shape):
    slug: str
    name: str | None = None
    available: bool = True


class PageMeta(Shape):
    total: int | None = None


class SizesPage(Shape):
    sizes: list[Size] | None = None
    meta: PageMeta | None = None


class RegionsPage(Shape):
    regions: list[Region] | None = None
    meta: PageMeta | None = None


PAGES: dict[str, type[SizesPage] | type[RegionsPage]] = {"sizes": SizesPage, "regions": RegionsPage}


class DoksRegion(Shape):
    slug: str | None = None
    name: str | None = None


class DoksVersion(Shape):
    slug: str | None = None
    kubernetes_version: str | None = None


class KubernetesOptions(Shape):
    regions: list[DoksRegion] | None = None
    versions: list[DoksVersion] | None = None


class KubernetesOptionsAnswer(Shape):
    options: KubernetesOptions = expected("an object")
