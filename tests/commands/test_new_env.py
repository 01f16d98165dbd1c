"""`infra new-env`: a commented, valid stack file with a VPC range nobody else uses."""

from __future__ import annotations

import ipaddress
import shutil

import pytest

from infra.cli import main
from infra.config import NS, load_stack_file, read_stack_file
from tests.conftest import ROOT, make_project


@pytest.fixture
def repo(tmp_path):
    shutil.copytree(ROOT / "stacks", make_project(tmp_path) / "stacks", dirs_exist_ok=True)
    return tmp_path


def test_new_env_from_staging(repo, capsys):
    assert main(["new-env", "staging-eu", "--from", "staging", "--region", "ams3", "--root", str(repo)]) == 0
    text = (repo / "stacks" / "Pulumi.staging-eu.yaml").read_text()
    assert "created with `infra new-env staging-eu --from staging`" in text
    assert text.splitlines()[0] == "# yaml-language-server: $schema=../docs/stack.schema.json"
    assert "# The chat product's traffic" in text  # source comments survive the round trip
    cfg = load_stack_file("staging-eu", repo)
    assert cfg.region == "ams3" and cfg.environment == "staging"
    mine = ipaddress.ip_network(cfg.network.vpc_cidr)
    for other in ("dev", "staging", "prod"):
        values, _ = read_stack_file(repo / "stacks" / f"Pulumi.{other}.yaml")
        for key in ("vpc_cidr", "cluster_subnet", "service_subnet"):
            cidr = values[NS + "network"].get(key)
            if cidr:
                assert not mine.overlaps(ipaddress.ip_network(cidr)), (other, key)


def test_new_env_drops_source_secrets_and_subnets(repo):
    prod = repo / "stacks" / "Pulumi.prod.yaml"
    prod.write_text(prod.read_text() + "  inference-platform:grafana_admin_password:\n    secure: v1:abc\n")
    assert main(["new-env", "prod-2", "--from", "prod", "--root", str(repo)]) == 0
    text = (repo / "stacks" / "Pulumi.prod-2.yaml").read_text()
    assert "secure:" not in text and "cluster_subnet" not in text


def test_new_env_refuses_overwrite_and_bad_input(repo, capsys):
    assert main(["new-env", "dev", "--from", "staging", "--root", str(repo)]) == 2
    assert "exists" in capsys.readouterr().err
    assert main(["new-env", "Bad_Name", "--from", "staging", "--root", str(repo)]) == 2
    assert main(["new-env", "x1", "--from", "nope", "--root", str(repo)]) == 2
    assert main(["new-env", "x2", "--from", "dev", "--region", "mars1", "--root", str(repo)]) == 2
    assert "inference-platform:region" in capsys.readouterr().err
    assert not (repo / "stacks" / "Pulumi.x2.yaml").exists()


def _vpc(repo, stack):
    values, _ = read_stack_file(repo / "stacks" / f"Pulumi.{stack}.yaml")
    return values[NS + "network"]["vpc_cidr"]


def test_an_explicit_vpc_range_that_another_stack_uses_is_refused(repo, capsys):
    dev_vpc = _vpc(repo, "dev")
    assert main(["new-env", "x3", "--from", "staging", "--vpc-cidr", dev_vpc, "--root", str(repo)]) == 2
    err = capsys.readouterr().err
    assert f"--vpc-cidr {dev_vpc} overlaps Pulumi.dev.yaml network.vpc_cidr" in err and "Traceback" not in err
    assert main(["new-env", "x3", "--from", "staging", "--vpc-cidr", "10.1.2.3/33", "--root", str(repo)]) == 2
    assert "not a network in CIDR notation" in capsys.readouterr().err
    assert not (repo / "stacks" / "Pulumi.x3.yaml").exists()
    assert main(["new-env", "x3", "--from", "staging", "--vpc-cidr", "10.200.0.0/20", "--root", str(repo)]) == 0
    assert _vpc(repo, "x3") == "10.200.0.0/20"


def test_force_keeps_the_overwritten_stacks_own_vpc(repo):
    # A new range would replace the live VPC and everything in it; the stack's own range is not "taken".
    before = _vpc(repo, "staging")
    assert main(["new-env", "staging", "--from", "prod", "--force", "--root", str(repo)]) == 0
    assert _vpc(repo, "staging") == before


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("config:\n  inference-platform:region: tor1\n  x: @bad\n",
         "not valid YAML at line 3, column 6: found character '@' that cannot start any token"),
        ("config:\n  a: [1\n  b: 2\n", "not valid YAML at line 3, column 4: expected ',' or ']'"),
        ("config:\n  a: 1\n  a: 2\n", 'not valid YAML at line 3, column 3: found duplicate key "a"'),
        ("- config\n", "expected a mapping with a `config:` mapping"),
        ("config: 3\n", "expected a mapping with a `config:` mapping"),
    ],
)
def test_new_env_from_a_broken_stack_file_is_one_clear_error(repo, capsys, text, expected):
    (repo / "stacks" / "Pulumi.broken.yaml").write_text(text)
    # Other stacks must not stand in the way of the message about the source itself.
    assert main(["new-env", "zz", "--from", "broken", "--root", str(repo)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {repo / 'stacks' / 'Pulumi.broken.yaml'}: ")
    assert expected in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (repo / "stacks" / "Pulumi.zz.yaml").exists()


def test_new_env_from_a_stack_without_a_network_section_still_gets_a_vpc(repo):
    import yaml as pyyaml

    doc = pyyaml.safe_load((repo / "stacks" / "Pulumi.dev.yaml").read_text())
    doc["config"].pop(NS + "network", None)
    (repo / "stacks" / "Pulumi.bare.yaml").write_text(pyyaml.safe_dump(doc))
    assert main(["new-env", "bare-2", "--from", "bare", "--root", str(repo)]) == 0
    assert _vpc(repo, "bare-2")


def _do_names(plan) -> dict[str, str]:
    """Every DigitalOcean resource's `name` input, keyed by type and logical name without the stack
    prefix. Node-pool names are scoped to their cluster by DOKS, so a pool's name is qualified with
    its cluster's (the default pool too, which is declared inside the cluster)."""
    (cluster,) = [r for r in plan.resources if r["type"].endswith(":KubernetesCluster")]
    names = {"system pool": f"{cluster['inputs']['name']}/{cluster['inputs']['nodePool']['name']}"}
    for r in plan.resources:
        if not r["type"].startswith("digitalocean:") or "name" not in r["inputs"]:
            continue
        kind = r["type"].rsplit(":", 1)[-1]
        name = r["inputs"]["name"]
        if kind == "KubernetesNodePool":
            name = f"{cluster['inputs']['name']}/{name}"
        names[f"{kind} {r['name'].removeprefix(plan.stack + '-')}"] = name
    return names


@pytest.mark.parametrize("source", ["dev", "staging", "prod"])
def test_new_env_gives_every_digitalocean_resource_its_own_name(repo, source):
    # DO VPC and project names are unique per account: a copy that reused them could not be created.
    from infra.offline import build_plan

    assert main(["new-env", f"{source}-copy", "--from", source, "--root", str(repo)]) == 0
    before, after = _do_names(build_plan(source, repo)), _do_names(build_plan(f"{source}-copy", repo))
    assert {k.split()[0] for k in before} >= {"Vpc", "KubernetesCluster", "KubernetesNodePool", "Project"}
    assert before.keys() == after.keys()
    for key, name in before.items():
        assert after[key] != name, f"{key}: {name} in both stacks"
    assert after["Project project-project"] == f"inference-platform-{source}-copy"


def test_shipped_stacks_keep_their_digitalocean_names(plans):
    # Project names follow the stack; the shipped stacks are named after their environments.
    for stack, plan in plans.items():
        names = _do_names(plan)
        assert names["Project project-project"] == f"inference-platform-{stack}"
        assert names["Vpc net-vpc"] == f"{stack}-net-vpc" and names["KubernetesCluster doks"] == f"{stack}-doks"


def test_new_env_keeps_the_source_indentation_and_comments_in_place(repo):
    # Before: lists were re-indented (dash at column 2) while their comments stayed at column 4.
    assert main(["new-env", "prod-eu", "--from", "prod", "--root", str(repo)]) == 0
    source = (repo / "stacks" / "Pulumi.prod.yaml").read_text().splitlines()
    copy = (repo / "stacks" / "Pulumi.prod-eu.yaml").read_text().splitlines()
    body = lambda lines: [ln for ln in lines if not ln.startswith("#") and "vpc_cidr" not in ln]  # noqa: E731
    dropped = ("cluster_subnet", "service_subnet", "VPC-native cluster")
    assert body(copy) == [ln for ln in body(source) if not any(d in ln for d in dropped)]
    assert not any("VPC-native" in ln for ln in copy), "the comment about the dropped subnets goes with them"


def test_new_env_comments_describe_the_new_stack(repo):
    assert main(["new-env", "dev-alice", "--from", "dev", "--environment", "staging", "--root", str(repo)]) == 0
    text = (repo / "stacks" / "Pulumi.dev-alice.yaml").read_text()
    assert "`infra doctor dev-alice`" in text and "infra doctor dev`" not in text
    assert "staging defaults: no HA control plane, not protected, monitoring on." in text
    assert "dev defaults" not in text
    assert "(environment staging, was dev)" in text.splitlines()[1]
