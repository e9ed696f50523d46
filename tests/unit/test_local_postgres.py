"""The throwaway PostgreSQL of tests and benchmarks (localhosts/servers/postgres.py)."""

import socket

from localhosts.servers import postgres


def test_a_port_taken_between_the_check_and_the_start_is_left_for_the_next_free_one(monkeypatch):
    taken = postgres.PORTS[-1]
    first_free = postgres._free_port_in_range
    answers = iter([taken])
    # The port looks free when checked, and another server binds it before this one starts.
    monkeypatch.setattr(postgres, "_free_port_in_range", lambda: next(answers, None) or first_free())
    with socket.socket() as other:
        other.bind(("127.0.0.1", taken))
        other.listen()
        with postgres.postgres_database(name="ports", user="ports") as db:
            assert db.port != taken
            assert db.psql("SELECT 1") == "1"
