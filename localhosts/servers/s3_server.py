"""A local S3-compatible server for the shared-state tests: S3Proxy (a Java S3 API server, one
jar from Maven Central, run with the machine's Java) on loopback, storing objects as plain files
(jclouds' filesystem store), with one identity whose keys are made for the run, and one bucket for
Pulumi's state.

S3Proxy replaced SeaweedFS here: `weed` had to be compiled from its Go module, 7 minutes of the
cold CI run's two cores, for a server the tests use for seconds; the jar downloads in seconds.
The jar is pinned by sha256 and kept under `$SPEAR_CACHE/s3proxy/`. The store is a folder of
files, so a test reads what Pulumi wrote straight from disk.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from components.cache import build_once, cache_dir
from components.hostops.waiting import wait_until
from localhosts.hosts.llama_source import file_sha256
from localhosts.servers.processes import stop

VERSION = "3.1.0"
JAR = f"s3proxy-{VERSION}-jar-with-dependencies.jar"
JAR_URL = f"https://repo1.maven.org/maven2/org/gaul/s3proxy/{VERSION}/{JAR}"
# Of JAR as published on Maven Central, which never replaces a released file: any other digest
# is a truncated or tampered download.
JAR_SHA256 = "7e348225287f2efa580b1f9be170a3efe187bc6cfa9cd3730968863d1c7363ac"
PORT = 26011  # below Linux's ephemeral range
START_TIMEOUT = 90.0  # the JVM's start on a loaded 2-core machine


@dataclass(frozen=True)
class S3Server:
    endpoint: str  # host:port of the S3 API
    access_key: str
    secret_key: str
    bucket: str
    store: Path  # the bucket's folder: one file per object, at its key

    @property
    def backend_url(self) -> str:
        """PULUMI_BACKEND_URL for the bucket (plain HTTP on loopback, path-style addressing)."""
        return (f"s3://{self.bucket}?endpoint={self.endpoint}&disableSSL=true"
                "&s3ForcePathStyle=true&region=us-east-1")

    def env(self) -> dict[str, str]:
        """What the pulumi CLI needs to log in: the keys, and no AWS machinery of this machine."""
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
                # Checksums only where S3 requires them: S3Proxy takes no checksum trailers.
                "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required",
                "AWS_REQUEST_CHECKSUM_CALCULATION": "when_required"}

    def objects(self, prefix: str = "") -> dict[str, bytes]:
        """Every object under `prefix` of the bucket, by key, as stored."""
        return {key: path.read_bytes() for path in sorted(self.store.rglob("*"))
                if path.is_file() and (key := path.relative_to(self.store).as_posix()).startswith(prefix)}


def ensure_jar() -> Path:
    """The S3Proxy jar, downloaded once into the cache and checked against JAR_SHA256."""
    jar = cache_dir() / "s3proxy" / JAR

    def download() -> None:
        partial = jar.with_name(jar.name + ".partial")
        with urllib.request.urlopen(JAR_URL, timeout=120) as answer, partial.open("wb") as out:
            shutil.copyfileobj(answer, out)
        if (digest := file_sha256(partial)) != JAR_SHA256:
            partial.unlink()
            raise RuntimeError(f"{JAR_URL} has sha256 {digest}, expected {JAR_SHA256}")
        partial.rename(jar)  # a jar that exists is complete

    build_once(jar, download, "S3Proxy's jar")
    return jar


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=2).close()
    except urllib.error.HTTPError:
        return True  # 403 to an unsigned request: the server is up
    except OSError:
        return False
    return True


@contextlib.contextmanager
def running(data_dir: Path, bucket: str = "spear-state", port: int = PORT) -> Iterator[S3Server]:
    """Starts S3Proxy with its store in `data_dir` and one bucket; stops it afterwards."""
    java = shutil.which("java")
    if not java:
        raise RuntimeError("the shared-state tests' S3 server needs Java 17 or later on PATH")
    jar = ensure_jar()
    access_key, secret_key = f"spear{secrets.token_hex(6)}", secrets.token_urlsafe(30)
    store = data_dir / "store"
    (store / bucket).mkdir(parents=True, exist_ok=True)  # a bucket is a folder of the store
    config = data_dir / "s3proxy.conf"
    config.touch(mode=0o600)  # the secret key is in it
    config.write_text("\n".join([
        f"s3proxy.endpoint=http://127.0.0.1:{port}", "s3proxy.authorization=aws-v2-or-v4",
        f"s3proxy.identity={access_key}", f"s3proxy.credential={secret_key}",
        "jclouds.provider=filesystem", f"jclouds.filesystem.basedir={store}", ""]))
    log = open(data_dir / "s3proxy.log", "w")
    # A small heap: the state files are kilobytes, and the kube tests run beside these.
    server = subprocess.Popen([java, "-Xmx256m", "-jar", str(jar), "--properties", str(config)],
                              stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_until(lambda: server.poll() is not None or _answers(url), START_TIMEOUT, interval=0.3)
        if server.poll() is not None or not _answers(url):
            raise RuntimeError(f"S3Proxy did not start; its log:\n"
                               f"{(data_dir / 's3proxy.log').read_text()[-3000:]}")
        yield S3Server(endpoint=f"127.0.0.1:{port}", access_key=access_key, secret_key=secret_key,
                       bucket=bucket, store=store / bucket)
    finally:
        stop(server, timeout=30)
        log.close()
