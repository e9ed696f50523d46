"""A local S3-compatible server for the shared-state tests: SeaweedFS's `weed server` (master,
volume, filer and S3 gateway in one process; built by localhosts/kubebuild.py) on loopback, with
one identity whose keys are made for the run, and one bucket for Pulumi's state.

Its ports lie below Linux's ephemeral range; SeaweedFS's extra listeners (Iceberg, Lance) are
turned off. The filer's HTTP API reads the bucket's objects as files, so a test can look at what
Pulumi wrote there.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from components.hostops.waiting import wait_until
from localhosts import kubebuild
from localhosts.processes import stop

FIRST_PORT = 26001  # master, volume, filer, S3; each gRPC port 10 above
START_TIMEOUT = 60.0


@dataclass(frozen=True)
class S3Server:
    endpoint: str  # host:port of the S3 gateway
    access_key: str
    secret_key: str
    bucket: str
    filer: str  # http://host:port of the filer

    @property
    def backend_url(self) -> str:
        """PULUMI_BACKEND_URL for the bucket (plain HTTP on loopback, path-style addressing)."""
        return (f"s3://{self.bucket}?endpoint={self.endpoint}&disableSSL=true"
                "&s3ForcePathStyle=true&region=us-east-1")

    def env(self) -> dict[str, str]:
        """What the pulumi CLI needs to log in: the keys, and no AWS machinery of this machine."""
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
                # SeaweedFS sends no checksums; the SDK would warn on every read.
                "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required",
                "AWS_REQUEST_CHECKSUM_CALCULATION": "when_required"}

    def objects(self, prefix: str = "") -> dict[str, bytes]:
        """Every object under `prefix` of the bucket, by key, as stored."""
        found: dict[str, bytes] = {}
        self._walk(f"/buckets/{self.bucket}/{prefix}".rstrip("/"), found)
        return found

    def _walk(self, path: str, found: dict[str, bytes]) -> None:
        request = urllib.request.Request(f"{self.filer}{path}/", headers={"Accept": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            listing = json.loads(answer.read())
        for entry in listing.get("Entries") or []:
            full = entry["FullPath"]
            if entry["Mode"] & 0o20000000000:  # a folder (Go's os.ModeDir)
                self._walk(full, found)
            else:
                with urllib.request.urlopen(f"{self.filer}{full}", timeout=30) as answer:
                    found[full.removeprefix(f"/buckets/{self.bucket}/")] = answer.read()


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=2).close()
    except urllib.error.HTTPError:
        return True  # 403 to an unsigned request: the gateway is up
    except OSError:
        return False
    return True


@contextlib.contextmanager
def running(data_dir: Path, bucket: str = "spear-state",
            first_port: int = FIRST_PORT) -> Iterator[S3Server]:
    """Starts SeaweedFS with its data in `data_dir` and one bucket; stops it afterwards."""
    weed = kubebuild.seaweedfs().ensure() / "weed"
    master, volume, filer, s3 = range(first_port, first_port + 4)
    access_key, secret_key = f"spear{secrets.token_hex(6)}", secrets.token_urlsafe(30)
    data_dir.mkdir(parents=True, exist_ok=True)
    config = data_dir / "s3.json"
    config.touch(mode=0o600)
    config.write_text(json.dumps({"identities": [{
        "name": "pulumi", "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
        "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}))
    log = open(data_dir / "weed.log", "w")
    server = subprocess.Popen([
        str(weed), "server", f"-dir={data_dir}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
        f"-master.port={master}", f"-master.port.grpc={master + 10}", "-master.telemetry=false",
        "-master.volumeSizeLimitMB=64", f"-volume.port={volume}",
        f"-volume.port.grpc={volume + 10}", "-volume.max=8", "-volume.preStopSeconds=1",
        "-filer", f"-filer.port={filer}", f"-filer.port.grpc={filer + 10}",
        "-s3", f"-s3.port={s3}", f"-s3.port.grpc={s3 + 10}", "-s3.port.iceberg=0",
        "-s3.port.lance=0", f"-s3.config={config}"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: server.poll() is not None or _answers(f"http://127.0.0.1:{s3}/"),
                   START_TIMEOUT, interval=0.3)
        if server.poll() is not None or not _answers(f"http://127.0.0.1:{s3}/"):
            raise RuntimeError(f"SeaweedFS did not start; its log:\n"
                               f"{(data_dir / 'weed.log').read_text()[-3000:]}")
        # A bucket is a folder under the filer's /buckets.
        urllib.request.urlopen(urllib.request.Request(
            f"http://127.0.0.1:{filer}/buckets/{bucket}/", method="POST"), timeout=30).close()
        yield S3Server(endpoint=f"127.0.0.1:{s3}", access_key=access_key, secret_key=secret_key,
                       bucket=bucket, filer=f"http://127.0.0.1:{filer}")
    finally:
        stop(server, timeout=30)  # one process: its servers are goroutines
        log.close()
