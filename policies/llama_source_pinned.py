"""The llama.cpp source is pinned by content: a full commit id, or an archive and its sha256.

A branch or tag name moves, so the same stack could build a different llama-server tomorrow,
and the build key (which names the build on the host) would no longer say what was built.
"""

import re

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy

from resources import for_kind, is_sha256

SEED = "seed 001 'How to develop with it' (the pinned triple moves together or not at all)"
_COMMIT = re.compile(r"[0-9a-fA-F]{40}")


@for_kind("llama-server-build")
def llama_source_pinned(args: ResourceValidationArgs, report: ReportViolation) -> None:
    source = args.props["source"]
    if "git" in source:
        commit = source.get("commit")
        if not (isinstance(commit, str) and _COMMIT.fullmatch(commit)):
            report(f"{SEED}: llama.cpp source {source['git']} is pinned to {commit!r}, not a full"
                   " 40-hex commit id; a branch or tag moves, so the build would too. Fix: set"
                   " llamaCpp.source.commit to the commit id (git rev-parse <ref>^{commit}).")
    elif "archive" in source:
        digest = source.get("sha256")
        if not is_sha256(digest):
            report(f"{SEED}: llama.cpp archive {source['archive']} has no sha256 (got"
                   f" {digest!r}). Fix: set llamaCpp.source.sha256 to the archive's sha256sum.")
    else:
        report(f"{SEED}: the llama.cpp source is neither {{git, commit}} nor {{archive, sha256}}."
               " Fix: give one of them in llamaCpp.source.")


POLICY = ResourceValidationPolicy(
    name="llama-source-pinned",
    description="llama-server is built from a llama.cpp source pinned by a commit id or sha256.",
    validate=llama_source_pinned,
    enforcement_level=EnforcementLevel.MANDATORY,
)
