"""The seeds' rules as pure functions and data: the constants, predicates, renderers and judges
that more than one side must agree on. The program (components/), the config check (config/),
the gate's tools (gate/), the gateway's hooks and the policy pack import them, so each rule is
written once.

What belongs here is what the policy pack's virtualenv (pulumi, pulumi-policy and PyYAML) and
the gateway host can import unchanged: standard library only, nothing of the repository outside
spear/, and no I/O (no files, processes, network, environment or clock): values in, values out.
A caller does the I/O and hands the values over. tests/unit/test_spear_is_pure.py holds it so.
"""
