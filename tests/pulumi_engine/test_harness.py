"""The harness alone, with a throwaway program (a kubernetes Provider from a secret kubeconfig, a
Namespace, a ConfigMap in it): the stand-in language host runs a Python program under the real
CLI, the built kubernetes provider creates, diffs and deletes through the real API server, the
passphrase provider encrypts the kubeconfig, and nothing is downloaded. When this fails, the
harness is broken, not the project's program."""

from __future__ import annotations

import json
import textwrap

PROGRAM = textwrap.dedent('''\
    import pulumi
    import pulumi_kubernetes as k8s

    config = pulumi.Config()
    provider = k8s.Provider("k8s", kubeconfig=config.require_secret("kubeconfig"))
    opts = pulumi.ResourceOptions(provider=provider)
    ns = k8s.core.v1.Namespace("ns", metadata={"name": "engine-harness"}, opts=opts)
    cm = k8s.core.v1.ConfigMap("cm", metadata={"namespace": ns.metadata["name"], "name": "hello"},
                               data={"greeting": "hello"}, opts=opts)
    pulumi.export("configmap", cm.metadata["name"])
''')


def test_throwaway_program_up_no_change_destroy(workspace, engine_kubeconfig, control_plane, tmp_path):
    from kubernetes import client, config

    project = tmp_path / "program"
    project.mkdir()
    (project / "Pulumi.yaml").write_text("name: engine-harness\nruntime:\n  name: python\n  options:\n"
                                         "    virtualenv: .venv\n")  # fmt: skip
    (project / "__main__.py").write_text(PROGRAM)
    (project / ".venv").symlink_to(workspace.root / ".venv")
    workspace.root = project
    kubeconfig, secrets = engine_kubeconfig

    workspace.pulumi("stack", "init", "harness", "--secrets-provider", "passphrase")
    workspace.pulumi("config", "set", "--secret", "kubeconfig", stdin=kubeconfig.read_text())
    preview = workspace.pulumi("preview", "--json")
    steps = {s["urn"].split("::")[-1]: s["op"] for s in json.loads(preview.stdout)["steps"]}
    assert steps == {"engine-harness-harness": "create", "k8s": "create", "ns": "create", "cm": "create"}

    workspace.pulumi("up", "--yes", "--skip-preview")
    api = client.CoreV1Api(config.new_client_from_config(config_file=str(control_plane.kubeconfig)))
    assert api.read_namespaced_config_map("hello", "engine-harness").data == {"greeting": "hello"}
    workspace.pulumi("up", "--yes", "--expect-no-changes", "--skip-preview")

    leaks = [name for name, value in secrets.items() for path in workspace.backend_files()
             if value in path.read_text(errors="replace")]  # fmt: skip
    assert not leaks, f"in the backend's files in plain text: {leaks}"

    workspace.pulumi("destroy", "--yes", "--skip-preview")
    names = [ns.metadata.name for ns in api.list_namespace().items]
    assert "engine-harness" not in names  # the provider waits until a deleted Namespace is gone
    assert workspace.plugins() == []
