"""The reviewer's summary of a preview: what each change of the stack means on a host, in a
cluster and to the developers (CLI: scripts/preview_summary.py).

It reads only what the engine reported: each step's op, replaceReasons and the inputs of its old
and new state (the JSON carries no diffReasons or detailedDiff for these dynamic resources, so
the changed keys are found by comparing the two), plus the policy events of the engine's event
log (`pulumi preview --event-log FILE`; `--json` leaves them out). Every part is classified as
exactly one change class (`kinds.CLASSES`); run the preview with `--show-sames` to have
unchanged parts listed too. Secrets are never shown: the `connection` input (and the serialized
provider) are skipped whatever their value, and so are the gateway's master key and developer
keys: a key change is named ("ana: budget 25 -> 40 USD / 30d (in place)"), its value never shown.

`kinds` is the vocabulary a kind of resource is described in; each kind's descriptor sits beside
its class (Kubernetes objects, which are not ours, in `kubernetes`); `registry` finds them;
`parts` turns the steps into parts; `policies` reads the pack's events; `summary` writes the
Markdown.
"""
