"""The rollout gate as a tool (`scripts/gate`): runs spear/rollout_gate.py's measurements against
the live path and writes the record and its evidence where the stack reads them."""
