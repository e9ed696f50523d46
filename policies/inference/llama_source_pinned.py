"""The llama.cpp source is pinned by content: a full commit id, or an archive and its sha256.

A branch or tag name moves, so the same stack could build a different llama-server tomorrow,
and the build key (which names the build on the host) would no longer say what was built.
"""

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy

from policies.common import for_type
from spear import tokens
from spear.rules import is_commit, is_sha256

SEED = "seed 001 'How to develop with it' (the pinned triple moves together or not at all)"


@for_type(tokens.LLAMA_SERVER_BUILD)
def llama_source_pinned(args: ResourceValidationArgs, report: ReportViolation) -> None:
    source = args.props["source"]
    if "git" in source:
        commit = source.get("commit")
        if not is_commit(commit):
            report(f"{SEED}: llama.cpp source {source['git']} is pinned to {commit!r}, not a full"
                   " 40-hex commit id; a branch or tag moves, so the build would too. Fix: set"
                   " inferenceHosts.<host>.llamaCpp.source.commit to the commit id"
                   " (git rev-parse <ref>^{commit}).")
    elif "archive" in source:
        digest = source.get("sha256")
        if not is_sha256(digest):
            report(f"{SEED}: llama.cpp archive {source['archive']} has no sha256 (got"
                   f" {digest!r}). Fix: set inferenceHosts.<host>.llamaCpp.source.sha256 to the"
                   " archive's sha256sum.")
    else:
        report(f"{SEED}: the llama.cpp source is neither {{git, commit}} nor {{archive, sha256}}."
               " Fix: give one of them in inferenceHosts.<host>.llamaCpp.source.")


POLICY = ResourceValidationPolicy(
    name="llama-source-pinned",
    description="llama-server is built from a llama.cpp source pinned by a commit id or sha256.",
    validate=llama_source_pinned,
    enforcement_level=EnforcementLevel.MANDATORY,
)
