"""Certificates and keys for a throwaway control plane on loopback, made at test time with the
openssl command line (Debian's base image has it): a CA, the API server's serving certificate, the
webhook servers' serving certificate, the service-account signing key and the admin's token.
Nothing here outlives the test session's temporary directory."""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pki:
    dir: Path
    ca: Path
    serving_cert: Path
    serving_key: Path
    sa_key: Path
    sa_pub: Path
    token_file: Path
    admin_token: str
    node_tokens: dict[str, str]  # node name → its kubelet's token (user system:node:<name>)


def _openssl(*args: str, cwd: Path) -> None:
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise RuntimeError(f"openssl {' '.join(args)} failed: {proc.stderr.strip()}")


def make_pki(directory: Path, ips: tuple[str, ...] = (), nodes: tuple[str, ...] = ()) -> Pki:
    """A CA and one serving certificate for 127.0.0.1 / localhost (the API server and every webhook
    server listen there) and `ips` (tests/node: the node's address, and the `kubernetes` Service's
    ClusterIP, which pods dial), an RSA key pair for service-account tokens, a static admin token
    and one token per kubelet in `nodes` (group system:nodes, so the Node authorizer and
    NodeRestriction judge it as a kubelet)."""
    d = directory
    d.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
             "-days", "2", "-subj", "/CN=inference-platform-test-ca", cwd=d)  # fmt: skip
    (d / "san.cnf").write_text(
        "[req]\ndistinguished_name=dn\n[dn]\n[ext]\nsubjectAltName=IP:127.0.0.1,"
        + "".join(f"IP:{ip}," for ip in ips)
        + "DNS:localhost,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n"
    )
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "serving.key", "-out", "serving.csr",
             "-subj", "/CN=localhost", cwd=d)  # fmt: skip
    _openssl("x509", "-req", "-in", "serving.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "serving.crt", "-days", "2", "-extfile", "san.cnf", "-extensions", "ext", cwd=d)  # fmt: skip
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=d)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)
    token = secrets.token_hex(16)
    node_tokens = {n: secrets.token_hex(16) for n in nodes}
    lines = [f'{token},admin,admin,"system:masters"']
    lines += [f'{t},system:node:{n},system:node:{n},"system:nodes"' for n, t in node_tokens.items()]
    (d / "tokens.csv").write_text("\n".join(lines) + "\n")
    return Pki(d, d / "ca.crt", d / "serving.crt", d / "serving.key", d / "sa.key", d / "sa.pub", d / "tokens.csv", token,
               node_tokens)  # fmt: skip


def kubeconfig(pki: Pki, server: str, path: Path, token: str | None = None) -> Path:
    """A kubeconfig for the admin (token auth, the test CA), or for whoever `token` names."""
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
        f"clusters:\n- name: test\n  cluster:\n    server: {server}\n    certificate-authority: {pki.ca}\n"
        f"users:\n- name: admin\n  user:\n    token: {token or pki.admin_token}\n"
        "contexts:\n- name: test\n  context: {cluster: test, user: admin}\n"
    )
    path.chmod(0o600)
    return path


def client_certificate(pki: Pki, user: str, group: str) -> tuple[Path, Path]:
    """A client certificate and key for `user` in `group`, signed by the test CA (which the API
    server trusts for client certificates): (certificate, key) paths in the PKI's directory."""
    d = pki.dir
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{user}.key", "-out", f"{user}.csr",
             "-subj", f"/O={group}/CN={user}", cwd=d)  # fmt: skip
    _openssl("x509", "-req", "-in", f"{user}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", f"{user}.crt", "-days", "2", cwd=d)  # fmt: skip
    return d / f"{user}.crt", d / f"{user}.key"

