"""`gateway`: the LiteLLM gateway of seed 001 steps 5-6, on a host spear-fleet logs in to, or
(`gateway.kubernetes`) as a Deployment of two or more replicas in the fleet's cluster.

It holds every credential (`gatewayMasterKey`, `frontierApiKey`, `gatewayDatabaseUrl`: Pulumi
secrets), routes `coder` to the fleet's declared endpoints, and escalates to `frontier` (the
hatch) only when the fleet answered 429/5xx. Its SSH key is a key file (`ssh.privateKeyPath`) or
a secret in `sshPrivateKeys.<name>`, like an inference host's.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any

from config import tls
from config.checker import API_URL_TEXT, MISSING, Checker, absolute_dir, api_url, ip_address, show
from config.options import (PORT, SECRET, USD, AnyOf, Choice, Int, Later, Obj, Opt, Raw, Text,
                            Typed, build, declared, pattern)
from config.schema.common import api_key, ssh_key_entry, ssh_obj, ssh_target
from config.types import (DATABASE_LOCATIONS, EXTERNAL_DATABASE, FRONTIER_API_KEY,
                          GATEWAY_BACKUP_KEY, GATEWAY_DATABASE_URL, GATEWAY_MASTER_KEY,
                          GATEWAY_TLS_CERTIFICATE, GATEWAY_TLS_KEY, LOCAL_DATABASE, ApiKey,
                          ClusterBackupPlan, DatabaseBackupPlan, Gateway, GatewayCluster,
                          GatewayDatabase, GatewayTls, Hatch, PackageSource, Pricing, TlsListener)
from spear.rules import (FLEET_ROUTINGS, FLEET_UPSTREAM, PREFIX_AFFINITY, SERVICE_SPREAD,
                         alert_below_cap, is_loopback)

LOOPBACK_LISTEN_TEXT = ("a loopback address such as 127.0.0.1 (plain HTTP stays on the gateway"
                        " host; others reach it by name over TLS at gateway.listen.tls)")
SECRET_NAMES = (GATEWAY_MASTER_KEY, FRONTIER_API_KEY, GATEWAY_DATABASE_URL, GATEWAY_BACKUP_KEY)
# Secrets only some gateways need (checked where what needs them is).
_OPTIONAL_SECRETS = (GATEWAY_DATABASE_URL, GATEWAY_BACKUP_KEY)
# A passphrase's least length: openssl derives the dumps' key from it (PBKDF2).
BACKUP_KEY_MIN_CHARS = 32
TLS_SECRETS = (GATEWAY_TLS_CERTIFICATE, GATEWAY_TLS_KEY)  # PEM text, checked with the gateway's tls

DEFAULT_NAME = "gateway"
DEFAULT_LITELLM = "1.91.1"  # the cookbook's pin
# USD per million tokens charged to a developer's budget for `coder` (input, output).
DEFAULT_PRICE = {"input": 0.5, "output": 2.0}
# The frontier provider's list price for a Sonnet-class model, USD per million tokens.
DEFAULT_HATCH_PRICE = {"input": 3.0, "output": 15.0}
# A DNS name of one or more labels (RFC 1123), as a certificate's subject alternative name has it.
_DNS_NAME = re.compile(r"(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*")
_HOST_ONLY = ("ssh", "runtimeDir", "listen")  # settings of the gateway host
_DATABASE_URL = re.compile(r"postgres(ql)?://\S+")

_TLS_NAME = Opt(pattern(_DNS_NAME, "a DNS name in lower case, e.g. gateway.spear.internal: the"
                        " name the certificate holds, which seats and developers reach the"
                        " gateway by"), "the DNS name in the certificate (gatewayTlsCertificate)")


def _price(defaults: dict[str, float]) -> Opt:
    return Opt(Obj({part: Opt(USD, f"USD per million {part} tokens", default=defaults[part])
                    for part in ("input", "output")}), "USD per million tokens", default={})


_HOST_BACKUP = Typed(DatabaseBackupPlan)
_CLUSTER_BACKUP = declared(ClusterBackupPlan)
GATEWAY = declared(
    Gateway,
    ssh=Opt(ssh_obj(), "the gateway host (not with kubernetes)", default=None),
    kubernetes=Opt(declared(GatewayCluster, tls=Opt(Obj({"name": _TLS_NAME}), "serve HTTPS under"
                                                    " this name", default=None)),
                   "run it as a Deployment in the fleet's cluster instead", default=None),
    listen=Opt(Obj({
        # Plain HTTP only on loopback: a gateway host serves plain HTTP, and every request
        # carries a developer's key. Others reach it through its SSH tunnel.
        "host": Opt(Text(lambda v: v if ip_address(v) and is_loopback(v) else None,
                         LOOPBACK_LISTEN_TEXT), "where plain HTTP listens", default="127.0.0.1"),
        "port": Opt(PORT, "its port (LiteLLM's default)", default=4000),
        "tls": Opt(declared(TlsListener, name=_TLS_NAME), "HTTPS beside it, for seats and"
                   " developers beyond the host", default=None),
    }), "where the gateway host's proxy listens", default={}),
    litellm=Opt(Obj({
        "version": Opt(pattern(re.compile(r"[0-9]+\.[0-9]+\.[0-9]+"), "a LiteLLM release X.Y.Z"
                               " (litellm[proxy]==X.Y.Z is installed)"), "LiteLLM's release",
                       default=DEFAULT_LITELLM),
        "indexUrl": Opt(Text(api_url, API_URL_TEXT), "the package index (not with wheelhouse)",
                        default=None),
        "wheelhouse": Opt(Text(absolute_dir, "an absolute folder on the gateway host"),
                          "a folder of wheels on the gateway host (an air-gapped host)",
                          default=None),
    }), "the LiteLLM install", default={}),
    database=Opt(declared(
        GatewayDatabase,
        location=Opt(Choice(DATABASE_LOCATIONS), "local (PostgreSQL on the gateway host) or"
                     " external (gatewayDatabaseUrl); default local, external in the cluster",
                     default=None),
        # Its shape is the placement's: a timer on the gateway host, or a CronJob in the cluster.
        backup=Opt(Later(AnyOf((_HOST_BACKUP, _CLUSTER_BACKUP))), "pg_dump on a schedule (host:"
                   " folder, onCalendar, keep; cluster: schedule, keep, hostPath or claim)",
                   default=None)), "the budgets' PostgreSQL", default={}),
    coder=Opt(Obj({
        # Which names are allowed depends on the rest of the stack: checked by _upstreams.
        "upstreams": Opt(Raw({"type": "array", "items": {"type": "string"}, "minItems": 1}),
                         "the declared endpoints `coder` routes to"),
        "numRetries": Opt(Int(0, 10), "retries before the hatch", default=2),
        "requestTimeout": Opt(Int(1, 3600), "seconds", default=600),
        "fleetRouting": Opt(Choice(FLEET_ROUTINGS), "how a fleet track's pod is picked:"
                            " prefix-affinity (a tenant's conversation to the pod holding its"
                            " prefix, bounded by load) or service (the track's Service, at"
                            " random); default prefix-affinity on a gateway host, service in"
                            " the cluster", default=None),
        "pricePerMillionTokensUsd": _price(DEFAULT_PRICE),
    }), "the fleet's one model name, `coder`"),
    hatch=Opt(declared(Hatch, pricePerMillionTokensUsd=_price(DEFAULT_HATCH_PRICE)),
              "the frontier escape hatch (`frontier`), used only when the fleet answered"
              " 429/5xx"))
OPTIONS = {
    "gateway": Opt(GATEWAY, "the LiteLLM gateway between every developer and the fleet",
                   default=None),
    GATEWAY_MASTER_KEY: Opt(SECRET, "the proxy's admin credential", default=None),
    FRONTIER_API_KEY: Opt(SECRET, "the hatch provider's key", default=None),
    GATEWAY_DATABASE_URL: Opt(SECRET, "an external PostgreSQL's URL (with its password)",
                              default=None),
    GATEWAY_TLS_CERTIFICATE: Opt(SECRET, "the TLS bundle (PEM: its own, its chain, the root)",
                                 default=None),
    GATEWAY_TLS_KEY: Opt(SECRET, "the TLS certificate's key", default=None),
    GATEWAY_BACKUP_KEY: Opt(SECRET, "what the database dumps are encrypted with", default=None),
}


def declared_name(value: Any) -> str | None:
    """The gateway's name before any check (it may own an sshPrivateKeys entry); None: none."""
    if not isinstance(value, Mapping):
        return None
    name = value.get("name", DEFAULT_NAME)
    return name if isinstance(name, str) else None


def parse(check: Checker, value: Any, secret_values: Mapping[str, Any], ssh_keys_value: Any,
          endpoint_names: Collection[str], taken_names: Collection[str],
          keyless: Collection[str] = ()) -> tuple[Gateway | None, dict[str, ApiKey]]:
    """The gateway (None when the stack declares none) and the secrets it was given.

    endpoint_names: every inference host, pod and REDS endpoint the stack declares (what
    `coder` may route to); taken_names: the names that already own an sshPrivateKeys entry;
    keyless: REDS endpoints that log in with their ~/.ssh/config alias's key, which the gateway
    host cannot use for its tunnel.
    """
    declared = value is not MISSING
    secrets = {name: _secret(check, name, secret_values[name], required=declared and name
                             not in _OPTIONAL_SECRETS) for name in SECRET_NAMES}
    given = {name: key for name, key in secrets.items() if key is not None}
    pem = {name: secret_values[name] for name in TLS_SECRETS}
    given.update({name: ApiKey(text) for name, text in pem.items() if isinstance(text, str)})
    if not declared:
        for name in given:
            check.report(name, "a secret without a gateway", "set only with `gateway`")
        return None, {}
    if not declares_tls(value):
        for name in (n for n in TLS_SECRETS if n in given):
            check.report(name, "a secret without the gateway's TLS",
                         "set only with gateway.kubernetes.tls or gateway.listen.tls")
    start = check.mark()
    gateway = GATEWAY.read(check, "gateway", value)
    if gateway is None:
        return None, given
    name = gateway["name"]
    if name in taken_names:
        check.fail("gateway.name", name, "a name no inference host, pod or REDS endpoint has:"
                   " sshPrivateKeys.<name> holds one key")
    cluster, in_cluster, ssh, listen = gateway["kubernetes"], "kubernetes" in value, None, gateway["listen"]
    if in_cluster:
        for key in _HOST_ONLY:
            if key in value:
                check.report(f"gateway.{key}", "a setting of the gateway host",
                             "nothing with gateway.kubernetes (the gateway runs in the cluster)")
        cluster = cluster and _cluster(check, cluster, value["kubernetes"], pem)
    elif "ssh" not in value:
        check.fail("gateway.ssh", MISSING, GATEWAY.fields["ssh"].kind.allowed + " (required)")
    else:
        ssh = ssh_target(check, "gateway", name or DEFAULT_NAME, gateway["ssh"],
                         ssh_key_entry(ssh_keys_value, name or DEFAULT_NAME))
    listener = listen and listen["tls"] and _tls_material(check, "gateway.listen.tls",
                                                          listen["tls"], pem)
    packages = gateway["litellm"] and _packages(check, gateway["litellm"])
    # Whether the stack set the URL at all: a malformed one is reported once, as malformed.
    database = gateway["database"] and _database(
        check, gateway["database"], secret_values[GATEWAY_DATABASE_URL] is not MISSING,
        in_cluster, has_backup_key=secret_values[GATEWAY_BACKUP_KEY] is not MISSING)
    # A key without a backup is kept: it still decrypts the dumps taken before the timer went.
    coder, hatch = gateway["coder"], gateway["hatch"]
    upstreams = coder and _upstreams(check, coder["upstreams"], endpoint_names, keyless, in_cluster)
    routing = coder and coder["fleetRouting"]
    if in_cluster and routing == PREFIX_AFFINITY:
        check.fail("gateway.coder.fleetRouting", routing,
                   f"{SERVICE_SPREAD} with gateway.kubernetes ({PREFIX_AFFINITY} lists the pods"
                   " from the API server the stack's kubeconfig names, which a gateway host"
                   " reaches and the gateway's pods may not)")
    if hatch and hatch["monthlyCapUsd"] is not None and hatch["alertUsd"] is not None \
            and not alert_below_cap(hatch["alertUsd"], hatch["monthlyCapUsd"]):
        check.fail("gateway.hatch.alertUsd", hatch["alertUsd"],
                   f"an amount below gateway.hatch.monthlyCapUsd ({hatch['monthlyCapUsd']}): the"
                   " alert must fire before the cap shuts the hatch")
    if not check.clean_since(start):
        return None, given
    return build(Gateway, gateway, ssh=ssh, host=listen["host"], port=listen["port"],
                   litellm_version=gateway["litellm"]["version"], packages=packages,
                   database=database, upstreams=upstreams, num_retries=coder["numRetries"],
                   request_timeout=coder["requestTimeout"],
                   fleet_routing=routing or (SERVICE_SPREAD if in_cluster else PREFIX_AFFINITY),
                   pricing=_pricing(coder["pricePerMillionTokensUsd"]),
                   hatch=build(Hatch, hatch, pricing=_pricing(hatch["pricePerMillionTokensUsd"])),
                   kubernetes=cluster,
                   tls_listener=listener and build(TlsListener, listen["tls"], tls=listener)), given


def declares_tls(value: Any) -> bool:
    """Whether the stack declares gateway.kubernetes.tls or gateway.listen.tls, before any
    check."""
    return any(isinstance(part, Mapping) and "tls" in part for part in
               ((value.get("kubernetes"), value.get("listen")) if isinstance(value, Mapping) else ()))


def _secret(check: Checker, name: str, value: Any, required: bool) -> ApiKey | None:
    if name == GATEWAY_BACKUP_KEY and isinstance(value, str) and len(value) < BACKUP_KEY_MIN_CHARS:
        check.report(name, f"a secret of {len(value)} characters", f"at least"
                     f" {BACKUP_KEY_MIN_CHARS} characters, e.g. from openssl rand -base64 32")
        return None
    if name == GATEWAY_DATABASE_URL and isinstance(value, str) and \
            not _DATABASE_URL.fullmatch(value):
        check.report(name, f"a secret of {len(value)} characters that is not a PostgreSQL URL",
                     "postgresql://user:password@host:port/database")
        return None
    key = api_key(check, name, value, required_by=[])
    if key is None and value is MISSING and required:
        check.report(name, "nothing", f"a secret (required with gateway): pulumi config set"
                     f" --secret {name} < file")
    return key


def _cluster(check: Checker, cluster: dict, given: Mapping[str, Any],
             pem: Mapping[str, Any]) -> GatewayCluster | None:
    start = check.mark()
    if "nodePort" in given and "tls" not in given:
        # Plain HTTP only on loopback: a NodePort carries the keys across every node's network.
        check.report("gateway.kubernetes.nodePort", show(given["nodePort"]),
                     "nothing without gateway.kubernetes.tls: a gateway reached from outside"
                     " the cluster serves TLS by name")
    the_tls = cluster["tls"] and _tls_material(check, "gateway.kubernetes.tls", cluster["tls"], pem)
    if not check.clean_since(start):
        return None
    return build(GatewayCluster, cluster, tls=the_tls)


def _tls_material(check: Checker, key: str, given: dict, pem: Mapping[str, Any]) -> GatewayTls | None:
    """`key`.name, and the certificate and key secrets checked against it (config/tls.py),
    described and never echoed."""
    start = check.mark()
    name = given["name"]
    for secret, text in pem.items():
        if not isinstance(text, str):
            check.report(secret, "nothing" if text is MISSING else f"a {type(text).__name__}",
                         f"a secret (required with {key}): pulumi config set"
                         f" --secret {secret} < file")
    if name is None or not check.clean_since(start):
        return None
    for secret, found, allowed in tls.certificate_problems(name, pem[GATEWAY_TLS_CERTIFICATE],
                                                           pem[GATEWAY_TLS_KEY], setting=key):
        check.report(secret, found, allowed)
    if not check.clean_since(start):
        return None
    return GatewayTls(name=name, root_pem=tls.root_certificate(pem[GATEWAY_TLS_CERTIFICATE]))


def _packages(check: Checker, litellm: dict) -> PackageSource | None:
    index_url, wheelhouse = litellm["indexUrl"], litellm["wheelhouse"]
    if index_url is not None and wheelhouse is not None:
        check.report("gateway.litellm", "both indexUrl and wheelhouse",
                     "at most one of indexUrl (a package index) or wheelhouse (a folder of wheels"
                     " on the gateway host)")
        return None
    return PackageSource(None if wheelhouse else index_url or "https://pypi.org/simple", wheelhouse)


def _database(check: Checker, database: dict, has_url: bool, in_cluster: bool,
              has_backup_key: bool = False) -> GatewayDatabase | None:
    location = database["location"] or (EXTERNAL_DATABASE if in_cluster else LOCAL_DATABASE)
    if in_cluster and location == LOCAL_DATABASE:
        check.fail("gateway.database.location", location,
                   "external with gateway.kubernetes: the replicas share one PostgreSQL the"
                   " cluster reaches (gatewayDatabaseUrl)")
        return None
    if location == EXTERNAL_DATABASE and not has_url:
        check.report(GATEWAY_DATABASE_URL, "nothing", "a secret (required with"
                     " gateway.database.location external): pulumi config set --secret"
                     f" {GATEWAY_DATABASE_URL} < file")
    if location == LOCAL_DATABASE and has_url:
        check.report(GATEWAY_DATABASE_URL, "a database URL with a local database",
                     "no gatewayDatabaseUrl, or gateway.database.location external")
    backup = database["backup"]
    if backup is not None and location == EXTERNAL_DATABASE and not in_cluster:
        check.fail("gateway.database.backup", "a backup of an external database",
                   "no backup with gateway.database.location external (back it up where it runs)")
        return None
    backup = backup and (_cluster_backup(check, backup) if in_cluster else _backup(check, backup))
    if backup is not None and not has_backup_key:
        check.report(GATEWAY_BACKUP_KEY, "nothing", "a secret (required with"
                     " gateway.database.backup: every dump is encrypted with it, and a restore"
                     f" decrypts with it): pulumi config set --secret {GATEWAY_BACKUP_KEY} < file")
    if database["restoreFrom"] is not None and backup is None \
            and (location == LOCAL_DATABASE or in_cluster):
        check.report("gateway.database.restoreFrom", "a dump without gateway.database.backup",
                     f"{'a dump in the volume of' if in_cluster else 'a dump in'}"
                     f" gateway.database.backup{'' if in_cluster else '.folder'} (declare the"
                     " backup)")
    if None in (location, database["port"], database["queryEngine"]):
        return None
    return build(GatewayDatabase, database, location=location, backup=backup)


def _cluster_backup(check: Checker, value: Any) -> ClusterBackupPlan | None:
    """The in-cluster gateway's: a CronJob dumps the external database into a volume."""
    key = "gateway.database.backup"
    backup = _CLUSTER_BACKUP.read(check, key, value)
    if backup is None:
        return None
    start = check.mark()
    if ("hostPath" in value) == ("claim" in value):
        check.report(key, "both hostPath and claim" if "hostPath" in value else "neither hostPath"
                     " nor claim", "one of hostPath (a folder on the node) or claim (a"
                     " PersistentVolumeClaim): where the dumps outlive the gateway")
    if not check.clean_since(start) or None in (backup["schedule"], backup["keep"]):
        return None
    return build(ClusterBackupPlan, backup)


def _backup(check: Checker, value: Any) -> DatabaseBackupPlan | None:
    return _HOST_BACKUP.read(check, "gateway.database.backup", value)


def _upstreams(check: Checker, names: Any, endpoint_names: Collection[str],
               keyless: Collection[str], in_cluster: bool) -> tuple[str, ...]:
    allowed = ("a non-empty list of declared endpoints (inferenceHosts, runpod.pods,"
               " redsEndpoints, vllmFleet): " + (", ".join(endpoint_names) or "none is declared"))
    upstreams: list[str] = []
    if not isinstance(names, list) or not names:
        check.fail("gateway.coder.upstreams", names, allowed)
        return ()
    for i, name in enumerate(names):
        if name not in endpoint_names:
            check.fail(f"gateway.coder.upstreams[{i}]", name, allowed)
        elif in_cluster and name != FLEET_UPSTREAM:
            check.fail(f"gateway.coder.upstreams[{i}]", name,
                       f"{FLEET_UPSTREAM} only with gateway.kubernetes: inference hosts,"
                       " pods and REDS endpoints are reached through the gateway host's SSH"
                       " tunnels")
        elif name in keyless:
            check.fail(f"gateway.coder.upstreams[{i}]", name,
                       f"an endpoint with a key the gateway host can use for its tunnel:"
                       f" redsEndpoints.{name}.ssh.privateKeyPath or sshPrivateKeys.{name}")
        elif name in upstreams:
            check.fail(f"gateway.coder.upstreams[{i}]", name, "each endpoint once")
        else:
            upstreams.append(name)
    return tuple(upstreams)


def _pricing(price: dict) -> Pricing:
    return Pricing(price["input"] / 1e6, price["output"] / 1e6)
