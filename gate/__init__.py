"""The tools run against a deployed stack with pulumi. The rollout gate (`scripts/gate`: run.py,
stack.py) runs spear/rollout_gate.py's measurements against the live path and writes the record
and its evidence where the stack reads them; rollback.py (`scripts/rollback`) makes the previous
pair stable again; harness_env.py (`scripts/harness-env`) prints a developer's harness wiring
from the stack's outputs; trace.py prints a replay trace."""


class GateError(Exception):
    """What stops a tool before it measures or changes anything, said in one line."""
