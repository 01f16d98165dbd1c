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


def _openssl(*args: str, cwd: Path) -> None:
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise RuntimeError(f"openssl {' '.join(args)} failed: {proc.stderr.strip()}")


def make_pki(directory: Path) -> Pki:
    """A CA and one serving certificate for 127.0.0.1 / localhost (the API server and every webhook
    server listen there), an RSA key pair for service-account tokens and a static admin token."""
    d = directory
    d.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
             "-days", "2", "-subj", "/CN=inference-platform-test-ca", cwd=d)  # fmt: skip
    (d / "san.cnf").write_text(
        "[req]\ndistinguished_name=dn\n[dn]\n[ext]\nsubjectAltName=IP:127.0.0.1,DNS:localhost,"
        "DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n"
    )
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "serving.key", "-out", "serving.csr",
             "-subj", "/CN=localhost", cwd=d)  # fmt: skip
    _openssl("x509", "-req", "-in", "serving.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "serving.crt", "-days", "2", "-extfile", "san.cnf", "-extensions", "ext", cwd=d)  # fmt: skip
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=d)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)
    token = secrets.token_hex(16)
    (d / "tokens.csv").write_text(f'{token},admin,admin,"system:masters"\n')
    return Pki(d, d / "ca.crt", d / "serving.crt", d / "serving.key", d / "sa.key", d / "sa.pub", d / "tokens.csv", token)


def kubeconfig(pki: Pki, server: str, path: Path) -> Path:
    """A kubeconfig for the admin (token auth, the test CA)."""
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
        f"clusters:\n- name: test\n  cluster:\n    server: {server}\n    certificate-authority: {pki.ca}\n"
        f"users:\n- name: admin\n  user:\n    token: {pki.admin_token}\n"
        "contexts:\n- name: test\n  context: {cluster: test, user: admin}\n"
    )
    path.chmod(0o600)
    return path
