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

from config.checker import (API_URL_TEXT, DNS_LABEL, DNS_LABEL_TEXT, MISSING, NAME, NAME_TEXT,
                            Checker, absolute_dir, api_url, get, ip_address, show)
from config.schema.common import api_key, ssh_key_entry, ssh_target
from config.types import (DATABASE_LOCATIONS, EXTERNAL_DATABASE, FRONTIER_API_KEY,
                          GATEWAY_BACKUP_KEY, GATEWAY_DATABASE_URL, GATEWAY_MASTER_KEY, GATEWAY_TLS_CERTIFICATE,
                          GATEWAY_TLS_KEY, LOCAL_DATABASE, OFFLINE_ENGINE, QUERY_ENGINES, ApiKey,
                          Gateway, GatewayCluster, GatewayTls, ClusterBackupPlan,
                          DatabaseBackupPlan, TlsListener,
                          GatewayDatabase, Hatch, PackageSource, Pricing)
from config import tls
from spear.rules import (BACKUP_DUMP, BACKUP_DUMP_TEXT, FLEET_UPSTREAM, alert_below_cap,
                         image_pin_problem, is_loopback)

KEYS = ("gateway", GATEWAY_MASTER_KEY, FRONTIER_API_KEY, GATEWAY_DATABASE_URL,
        GATEWAY_TLS_CERTIFICATE, GATEWAY_TLS_KEY, GATEWAY_BACKUP_KEY)
OBJECT_KEYS = ("gateway",)
LOOPBACK_LISTEN_TEXT = ("a loopback address such as 127.0.0.1 (plain HTTP stays on the gateway"
                        " host; others reach it by name over TLS at gateway.listen.tls)")
SECRET_NAMES = (GATEWAY_MASTER_KEY, FRONTIER_API_KEY, GATEWAY_DATABASE_URL, GATEWAY_BACKUP_KEY)
# Secrets only some gateways need (checked where what needs them is).
_OPTIONAL_SECRETS = (GATEWAY_DATABASE_URL, GATEWAY_BACKUP_KEY)
# A passphrase's least length: openssl derives the dumps' key from it (PBKDF2).
BACKUP_KEY_MIN_CHARS = 32
TLS_SECRETS = (GATEWAY_TLS_CERTIFICATE, GATEWAY_TLS_KEY)  # PEM text, checked with the gateway's tls

DEFAULT_NAME = "gateway"
DEFAULT_PORT = 4000  # LiteLLM's own default
DEFAULT_TLS_PORT = 4443
DEFAULT_LITELLM = "1.91.1"  # the cookbook's pin
DEFAULT_PYPI = "https://pypi.org/simple"
DEFAULT_DATABASE_PORT = 5432
DEFAULT_HATCH_API = "https://api.anthropic.com"
# USD per million tokens charged to a developer's budget for `coder` (input, output).
DEFAULT_PRICE = {"input": 0.5, "output": 2.0}
# The frontier provider's list price for a Sonnet-class model, USD per million tokens.
DEFAULT_HATCH_PRICE = {"input": 3.0, "output": 15.0}

_KEYS = ("name", "ssh", "kubernetes", "runtimeDir", "listen", "litellm", "database", "coder",
         "hatch")
# gateway.kubernetes: the gateway in the fleet's cluster.
_CLUSTER_KEYS = ("namespace", "replicas", "image", "venv", "serviceIP", "tls", "nodePort")
NODE_PORTS = (30000, 32767)  # Kubernetes' default --service-node-port-range
# A DNS name of one or more labels (RFC 1123), as a certificate's subject alternative name has it.
_DNS_NAME = re.compile(r"(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*")
_HOST_ONLY = ("ssh", "runtimeDir", "listen")  # settings of the gateway host
DEFAULT_NAMESPACE = "spear-gateway"
MIN_REPLICAS = 2  # one replica is the single gateway the cluster placement is there to avoid
DEFAULT_VENV = "/opt/litellm/venv"  # where localhosts/images/gateway_image puts it
_VERSION = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")
_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")
_DATABASE_URL = re.compile(r"postgres(ql)?://\S+")


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
    gateway = check.obj("gateway", value, _KEYS)
    if gateway is None:
        return None, given
    name = check.pattern("gateway.name", get(gateway, "name"), NAME, NAME_TEXT,
                         default=DEFAULT_NAME)
    if name in taken_names:
        check.fail("gateway.name", name, "a name no inference host, pod or REDS endpoint has:"
                   " sshPrivateKeys.<name> holds one key")
    in_cluster = get(gateway, "kubernetes") is not MISSING
    cluster = ssh = None
    if in_cluster:
        for key in _HOST_ONLY:
            if get(gateway, key) is not MISSING:
                check.report(f"gateway.{key}", "a setting of the gateway host",
                             "nothing with gateway.kubernetes (the gateway runs in the cluster)")
        cluster = _cluster(check, get(gateway, "kubernetes"), pem)
    else:
        ssh = ssh_target(check, "gateway", name or DEFAULT_NAME, get(gateway, "ssh"),
                         ssh_key_entry(ssh_keys_value, name or DEFAULT_NAME),
                         "a host name or IP address")
    runtime_dir = check.text("gateway.runtimeDir", get(gateway, "runtimeDir"), absolute_dir,
                             "an absolute path other than / (letters, digits, '._+-/')",
                             default="/opt/spear-gateway")
    listen = check.obj("gateway.listen", get(gateway, "listen"), ("host", "port", "tls"),
                       required=False)
    host = port = listener = None
    if listen is not None:
        # Plain HTTP only on loopback: a gateway host serves plain HTTP, and every request
        # carries a developer's key. Others reach it through its SSH tunnel.
        host = check.text("gateway.listen.host", get(listen, "host"),
                          lambda v: v if ip_address(v) and is_loopback(v) else None,
                          LOOPBACK_LISTEN_TEXT, default="127.0.0.1")
        port = check.port("gateway.listen.port", get(listen, "port"), DEFAULT_PORT)
        if get(listen, "tls") is not MISSING:
            listener = _listener(check, get(listen, "tls"), pem)
    version, packages = _litellm(check, get(gateway, "litellm"))
    # Whether the stack set the URL at all: a malformed one is reported once, as malformed.
    database = _database(check, get(gateway, "database"),
                         secret_values[GATEWAY_DATABASE_URL] is not MISSING, in_cluster,
                         has_backup_key=secret_values[GATEWAY_BACKUP_KEY] is not MISSING)
    # A key without a backup is kept: it still decrypts the dumps taken before the timer went.
    upstreams, retries, timeout, pricing = _coder(check, get(gateway, "coder"), endpoint_names,
                                                  keyless, in_cluster)
    hatch = _hatch(check, get(gateway, "hatch"))
    if not check.clean_since(start):
        return None, given
    return Gateway(name=name, ssh=ssh, runtime_dir=runtime_dir, host=host, port=port,
                   litellm_version=version, packages=packages, database=database,
                   upstreams=upstreams, num_retries=retries, request_timeout=timeout,
                   pricing=pricing, hatch=hatch, kubernetes=cluster,
                   tls_listener=listener), given


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


def _cluster(check: Checker, value: Any, pem: Mapping[str, Any]) -> GatewayCluster | None:
    start = check.mark()
    cluster = check.obj("gateway.kubernetes", value, _CLUSTER_KEYS)
    if cluster is None:
        return None
    namespace = check.pattern("gateway.kubernetes.namespace", get(cluster, "namespace"),
                              DNS_LABEL, DNS_LABEL_TEXT, default=DEFAULT_NAMESPACE)
    replicas = check.integer("gateway.kubernetes.replicas", get(cluster, "replicas"),
                             MIN_REPLICAS, 50, default=MIN_REPLICAS)
    image = check.text("gateway.kubernetes.image", get(cluster, "image"),
                       lambda v: None if image_pin_problem(v) else v,
                       "an image that pins LiteLLM: a version tag (not latest) or an @sha256"
                       " digest, holding litellm.version's LiteLLM, python3, bash and psql")
    venv = check.text("gateway.kubernetes.venv", get(cluster, "venv"), absolute_dir,
                      "the absolute path of the image's LiteLLM virtualenv", default=DEFAULT_VENV)
    service_ip = None
    if get(cluster, "serviceIP") is not MISSING:
        service_ip = check.text("gateway.kubernetes.serviceIP", get(cluster, "serviceIP"),
                                ip_address, "an IP address in the cluster's Service range")
    the_tls = _tls(check, get(cluster, "tls"), pem) if get(cluster, "tls") is not MISSING else None
    node_port = None
    if get(cluster, "nodePort") is not MISSING:
        node_port = check.integer("gateway.kubernetes.nodePort", get(cluster, "nodePort"),
                                  *NODE_PORTS)
        if get(cluster, "tls") is MISSING:
            # Plain HTTP only on loopback: a NodePort carries the keys across every node's network.
            check.report("gateway.kubernetes.nodePort", show(get(cluster, "nodePort")),
                         "nothing without gateway.kubernetes.tls: a gateway reached from outside"
                         " the cluster serves TLS by name")
    if not check.clean_since(start):
        return None
    return GatewayCluster(namespace=namespace, replicas=replicas, image=image, venv=venv,
                          service_ip=service_ip, tls=the_tls, node_port=node_port)


def _tls(check: Checker, value: Any, pem: Mapping[str, Any]) -> GatewayTls | None:
    """gateway.kubernetes.tls: the name the Service's certificate holds."""
    the_tls = check.obj("gateway.kubernetes.tls", value, ("name",))
    return None if the_tls is None else _tls_material(
        check, "gateway.kubernetes.tls", get(the_tls, "name"), pem)


def _listener(check: Checker, value: Any, pem: Mapping[str, Any]) -> TlsListener | None:
    """gateway.listen.tls: the gateway host's HTTPS listener, beside its loopback HTTP."""
    start = check.mark()
    listener = check.obj("gateway.listen.tls", value, ("name", "address", "port"))
    if listener is None:
        return None
    address = check.text("gateway.listen.tls.address", get(listener, "address"),
                         lambda v: v if ip_address(v) and not is_loopback(v) else None,
                         "an IP address of the gateway host other than loopback, which the"
                         " seats' pods and developers reach (loopback is gateway.listen.host)")
    port = check.port("gateway.listen.tls.port", get(listener, "port"), DEFAULT_TLS_PORT)
    the_tls = _tls_material(check, "gateway.listen.tls", get(listener, "name"), pem)
    if not check.clean_since(start):
        return None
    return TlsListener(address=address, port=port, tls=the_tls)


def _tls_material(check: Checker, key: str, value: Any, pem: Mapping[str, Any]) -> GatewayTls | None:
    """`key`.name, and the certificate and key secrets checked against it (config/tls.py),
    described and never echoed."""
    start = check.mark()
    name = check.pattern(f"{key}.name", value, _DNS_NAME,
                         "a DNS name in lower case, e.g. gateway.spear.internal: the name the"
                         " certificate holds, which seats and developers reach the gateway by")
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


def _litellm(check: Checker, value: Any) -> tuple[str | None, PackageSource | None]:
    litellm = check.obj("gateway.litellm", value, ("version", "indexUrl", "wheelhouse"),
                        required=False)
    if litellm is None:
        return None, None
    version = check.pattern("gateway.litellm.version", get(litellm, "version"), _VERSION,
                            "a LiteLLM release X.Y.Z (litellm[proxy]==X.Y.Z is installed)",
                            default=DEFAULT_LITELLM)
    index_url, wheelhouse = get(litellm, "indexUrl"), get(litellm, "wheelhouse")
    if index_url is not MISSING and wheelhouse is not MISSING:
        check.report("gateway.litellm", "both indexUrl and wheelhouse",
                     "at most one of indexUrl (a package index) or wheelhouse (a folder of wheels"
                     " on the gateway host)")
        return version, None
    if wheelhouse is not MISSING:
        path = check.text("gateway.litellm.wheelhouse", wheelhouse, absolute_dir,
                          "an absolute folder on the gateway host")
        return version, PackageSource(None, path) if path else None
    url = check.text("gateway.litellm.indexUrl", index_url, api_url,
                     API_URL_TEXT, default=DEFAULT_PYPI)
    return version, PackageSource(url, None) if url else None


def _database(check: Checker, value: Any, has_url: bool, in_cluster: bool,
              has_backup_key: bool = False) -> GatewayDatabase | None:
    database = check.obj("gateway.database", value,
                         ("location", "port", "queryEngine", "backup", "restoreFrom"), required=False)
    if database is None:
        return None
    location = check.choice("gateway.database.location", get(database, "location"),
                            DATABASE_LOCATIONS,
                            default=EXTERNAL_DATABASE if in_cluster else LOCAL_DATABASE)
    if in_cluster and location == LOCAL_DATABASE:
        check.fail("gateway.database.location", location,
                   "external with gateway.kubernetes: the replicas share one PostgreSQL the"
                   " cluster reaches (gatewayDatabaseUrl)")
        return None
    port = check.port("gateway.database.port", get(database, "port"), DEFAULT_DATABASE_PORT)
    engine = check.choice("gateway.database.queryEngine", get(database, "queryEngine"),
                          QUERY_ENGINES, default=OFFLINE_ENGINE)
    if location == EXTERNAL_DATABASE and not has_url:
        check.report(GATEWAY_DATABASE_URL, "nothing", "a secret (required with"
                     " gateway.database.location external): pulumi config set --secret"
                     f" {GATEWAY_DATABASE_URL} < file")
    if location == LOCAL_DATABASE and has_url:
        check.report(GATEWAY_DATABASE_URL, "a database URL with a local database",
                     "no gatewayDatabaseUrl, or gateway.database.location external")
    backup = (_cluster_backup(check, get(database, "backup")) if in_cluster
              else _backup(check, get(database, "backup"), location))
    if backup is not None and not has_backup_key:
        check.report(GATEWAY_BACKUP_KEY, "nothing", "a secret (required with"
                     " gateway.database.backup: every dump is encrypted with it, and a restore"
                     f" decrypts with it): pulumi config set --secret {GATEWAY_BACKUP_KEY} < file")
    restore_from = None
    if get(database, "restoreFrom") is not MISSING:
        restore_from = check.pattern("gateway.database.restoreFrom", get(database, "restoreFrom"),
                                     BACKUP_DUMP, BACKUP_DUMP_TEXT)
        if backup is None and (location == LOCAL_DATABASE or in_cluster):
            check.report("gateway.database.restoreFrom", "a dump without gateway.database.backup",
                         f"{'a dump in the volume of' if in_cluster else 'a dump in'}"
                         f" gateway.database.backup{'' if in_cluster else '.folder'} (declare the"
                         " backup)")
    if None in (location, port, engine):
        return None
    return GatewayDatabase(location=location, port=port, query_engine=engine, backup=backup,
                           restore_from=restore_from)


# A systemd calendar expression's characters; the gateway host's systemd checks the rest.
_CALENDAR = re.compile(r"[A-Za-z0-9*:,./~ -]{1,100}")


# A cron schedule's five fields (Kubernetes checks the rest).
_CRON = re.compile(r"(@(hourly|daily|weekly|monthly|yearly))|([0-9*/,-]+( [0-9*/,-]+){4})")


def _cluster_backup(check: Checker, value: Any) -> ClusterBackupPlan | None:
    """The in-cluster gateway's: a CronJob dumps the external database into a volume."""
    if value is MISSING:
        return None
    key = "gateway.database.backup"
    backup = check.obj(key, value, ("schedule", "keep", "hostPath", "claim"))
    if backup is None:
        return None
    start = check.mark()
    schedule = check.pattern(f"{key}.schedule", get(backup, "schedule"), _CRON,
                             "a cron schedule, e.g. \"0 3 * * *\" or @daily", default="0 3 * * *")
    keep = check.integer(f"{key}.keep", get(backup, "keep"), 1, 365, default=7)
    host_path = None if get(backup, "hostPath") is MISSING else check.text(
        f"{key}.hostPath", get(backup, "hostPath"), absolute_dir,
        "an absolute folder on the node, writable by user 1000 (a one-node cluster)")
    claim = None if get(backup, "claim") is MISSING else check.pattern(
        f"{key}.claim", get(backup, "claim"), _CLAIM, "a PersistentVolumeClaim's name in the"
        " gateway's namespace")
    if (get(backup, "hostPath") is MISSING) == (get(backup, "claim") is MISSING):
        check.report(key, "both hostPath and claim" if host_path or claim else "neither hostPath"
                     " nor claim", "one of hostPath (a folder on the node) or claim (a"
                     " PersistentVolumeClaim): where the dumps outlive the gateway")
    if not check.clean_since(start):
        return None
    return ClusterBackupPlan(schedule=schedule, keep=keep, host_path=host_path, claim=claim)


_CLAIM = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def _backup(check: Checker, value: Any, location: str | None) -> DatabaseBackupPlan | None:
    if value is MISSING:
        return None
    backup = check.obj("gateway.database.backup", value, ("folder", "onCalendar", "keep"))
    if backup is None:
        return None
    if location == EXTERNAL_DATABASE:
        check.fail("gateway.database.backup", "a backup of an external database",
                   "no backup with gateway.database.location external (back it up where it runs)")
        return None
    folder = check.text("gateway.database.backup.folder", get(backup, "folder"), absolute_dir,
                        "an absolute folder on the gateway host that outlives it (a mounted volume)")
    on_calendar = check.pattern("gateway.database.backup.onCalendar", get(backup, "onCalendar"),
                                _CALENDAR, "a systemd calendar expression, e.g. daily or"
                                " *-*-* 03:00:00", default="daily")
    keep = check.integer("gateway.database.backup.keep", get(backup, "keep"), 1, 365, default=7)
    if None in (folder, on_calendar, keep):
        return None
    return DatabaseBackupPlan(folder=folder, on_calendar=on_calendar, keep=keep)


def _coder(check: Checker, value: Any, endpoint_names: Collection[str],
           keyless: Collection[str], in_cluster: bool
           ) -> tuple[tuple[str, ...], int | None, int | None, Pricing | None]:
    coder = check.obj("gateway.coder", value, ("upstreams", "numRetries", "requestTimeout",
                                                "pricePerMillionTokensUsd"))
    if coder is None:
        return (), None, None, None
    allowed = ("a non-empty list of declared endpoints (inferenceHosts, runpod.pods,"
               " redsEndpoints, vllmFleet): " + (", ".join(endpoint_names) or "none is declared"))
    names = get(coder, "upstreams")
    upstreams: list[str] = []
    if not isinstance(names, list) or not names:
        check.fail("gateway.coder.upstreams", names, allowed)
    else:
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
    retries = check.integer("gateway.coder.numRetries", get(coder, "numRetries"), 0, 10, default=2)
    timeout = check.integer("gateway.coder.requestTimeout", get(coder, "requestTimeout"), 1, 3600,
                            default=600)
    return tuple(upstreams), retries, timeout, _pricing(
        check, "gateway.coder.pricePerMillionTokensUsd", get(coder, "pricePerMillionTokensUsd"),
        DEFAULT_PRICE)


def _pricing(check: Checker, key: str, value: Any, defaults: dict[str, float]) -> Pricing | None:
    price = check.obj(key, value, ("input", "output"), required=False)
    if price is None:
        return None
    per_million = [check.usd(f"{key}.{part}", get(price, part), defaults[part])
                   for part in ("input", "output")]
    if None in per_million:
        return None
    return Pricing(*(usd / 1e6 for usd in per_million))


def _hatch(check: Checker, value: Any) -> Hatch | None:
    hatch = check.obj("gateway.hatch", value, ("model", "apiBase", "monthlyCapUsd", "alertUsd",
                                                "pricePerMillionTokensUsd"))
    if hatch is None:
        return None
    model = check.pattern("gateway.hatch.model", get(hatch, "model"), _MODEL,
                          "the frontier provider's model id (e.g. claude-sonnet-4-5)")
    api_base = check.text("gateway.hatch.apiBase", get(hatch, "apiBase"), api_url,
                          API_URL_TEXT,
                          default=DEFAULT_HATCH_API)
    cap = check.usd("gateway.hatch.monthlyCapUsd", get(hatch, "monthlyCapUsd"))
    alert = check.usd("gateway.hatch.alertUsd", get(hatch, "alertUsd"))
    if cap is not None and alert is not None and not alert_below_cap(alert, cap):
        check.fail("gateway.hatch.alertUsd", alert,
                   f"an amount below gateway.hatch.monthlyCapUsd ({cap}): the alert must fire"
                   " before the cap shuts the hatch")
        return None
    pricing = _pricing(check, "gateway.hatch.pricePerMillionTokensUsd",
                       get(hatch, "pricePerMillionTokensUsd"), DEFAULT_HATCH_PRICE)
    if None in (model, api_base, cap, alert, pricing):
        return None
    return Hatch(model=model, api_base=api_base, monthly_cap_usd=cap, alert_usd=alert,
                 pricing=pricing)


