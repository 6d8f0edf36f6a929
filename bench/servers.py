"""The servers bench/run measures against, beside its plain ones: a throwaway CA for TLS, a
mosquitto config with a plain and a TLS listener, and nats-server configs for TLS beside plain
TCP and for operator mode with a user's .creds file.

Everything is written under one temporary directory that bench/run deletes; every listener is on
127.0.0.1.
"""
import base64
import json
import os
import subprocess
from pathlib import Path


def _run(*cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def throwaway_ca(d: Path):
    """openssl: an ECDSA P-256 CA and a server certificate it signs for 127.0.0.1 (and
    localhost), valid one day. Returns (ca.pem, server.pem, server.key)."""
    ca, ca_key = d / "ca.pem", d / "ca.key"
    crt, key, csr, ext = d / "server.pem", d / "server.key", d / "server.csr", d / "server.ext"
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _run("openssl", "req", "-x509", *ec, "-keyout", str(ca_key), "-out", str(ca), "-days", "1",
         "-subj", "/CN=msgbench bench CA", "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    _run("openssl", "req", "-new", *ec, "-keyout", str(key), "-out", str(csr), "-subj", "/CN=127.0.0.1")
    ext.write_text("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                   "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _run("openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
         "-CAcreateserial", "-out", str(crt), "-days", "1", "-extfile", str(ext))
    key.chmod(0o600)
    return ca, crt, key


def mosquitto_conf(plain_port, tls_port, ca, crt, key):
    """One mosquitto, two listeners with the same settings: plain TCP and TLS (server
    certificate only, no client certificates)."""
    return (f"listener {plain_port} 127.0.0.1\nallow_anonymous true\npersistence false\nmax_queued_messages 0\n"
            f"max_inflight_messages 0\nuser root\n"
            f"listener {tls_port} 127.0.0.1\ncafile {ca}\ncertfile {crt}\nkeyfile {key}\n")


def nats_tls_conf(port, crt, key):
    """A nats-server that takes TLS and plain TCP on one port (allow_non_tls): a client that
    asks for TLS gets it, the others stay plain."""
    return (f'listen: "127.0.0.1:{port}"\n'
            f'tls {{\n  cert_file: "{crt}"\n  key_file: "{key}"\n}}\nallow_non_tls: true\n')


def _jwt_subject(jwt):
    payload = jwt.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["sub"]


def nats_operator(d: Path, port, name="BENCH"):
    """Operator-mode accounts as a team makes them, the way e2e/src/harness/nats_auth.rs does:
    natscli's `nats auth` (v0.5.0, `e2e/tools/ensure nats`) writes operator `name`, account APP
    and user `bench` into a store under d (its own XDG directories), then the user's .creds
    file. Returns (the nats-server config for port, preloading the account JWTs with
    `resolver: MEMORY`, the .creds file's path)."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(d / "config"), "XDG_DATA_HOME": str(d / "data")}
    nats = lambda *a: _run("nats", *a, env=env)
    nats("auth", "operator", "add", name)
    nats("auth", "account", "add", "APP", "--operator", name, "--defaults")
    nats("auth", "user", "add", "bench", "APP", "--operator", name, "--defaults")
    creds = d / f"{name}-bench.creds"
    nats("auth", "user", "credential", str(creds), "bench", "APP", "--operator", name)
    store = d / "data/nats/nsc/stores" / name
    read = lambda p: p.read_text().strip()
    accounts = [read(store / f"accounts/{a}/{a}.jwt") for a in ("SYSTEM", "APP")]
    preload = "".join(f"  {_jwt_subject(j)}: {j}\n" for j in accounts)
    conf = (f'listen: "127.0.0.1:{port}"\noperator: {read(store / f"{name}.jwt")}\n'
            f"system_account: {_jwt_subject(accounts[0])}\nresolver: MEMORY\nresolver_preload: {{\n{preload}}}\n")
    return conf, creds
