"""The PostgreSQL ledger's own bad state, on the session's real server: no mocks.

A wrong schema version, a foreign schema, a role without rights, an unreachable server, a lock
held past the timeout, a connection lost in the middle of a write, the server down in the middle
of a run, a database out of resources (a fault raised by the real server, from a trigger), and
the DSN's password, which never shows in a log, an error, a repr or a Result. The semantics the
two stores share are tested on both in tests/test_ledger.py.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
import traceback
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

import accord
from accord import Ledger, LedgerError, Retry, Stabilizer, Vote, models
from accord.ledger import exists

pytest.importorskip("psycopg")
import psycopg


@pytest.fixture
def server(postgres_server: Any) -> Any:
    return postgres_server


@pytest.fixture
def dsn(server: Any) -> str:
    return str(server.create_database())


@pytest.fixture
def role(server: Any, dsn: str) -> Iterator[tuple[str, str]]:
    """A login role with a password full of URL specials and no rights at all: (name, password)."""
    name, password = f"r_{secrets.token_hex(4)}", f"p@ss:w/rd%{secrets.token_hex(4)}"
    server.execute(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'")
    yield name, password
    server.execute(f"DROP OWNED BY {name}", dbname(dsn))
    server.execute(f"DROP ROLE {name}")


def dbname(dsn: str) -> str:
    return dsn.rsplit("/", 1)[1]


def stab(ledger: Ledger, answer: str = "positive", **options: Any) -> Stabilizer[Any]:
    return Stabilizer(models.function(lambda p: answer, name="m"), str, ledger=ledger, **options)


def shown(error: BaseException | None) -> str:
    """All an error shows: its text and repr, and those of every cause and context it chains."""
    if error is None:
        return ""
    head = "".join(traceback.format_exception_only(error))
    return f"{error}\n{error!r}\n{head}\n{shown(error.__cause__)}\n{'' if error.__suppress_context__ else shown(error.__context__)}"


# -- the schema ---------------------------------------------------------------------------------


def test_a_new_database_gets_the_schema_with_its_version_and_looking_creates_nothing(server: Any, dsn: str) -> None:
    assert exists(dsn) is False
    assert server.execute("SELECT to_regnamespace('accord') IS NULL", dbname(dsn)) == [(True,)], "exists() made nothing"
    Ledger(dsn).close()
    assert exists(dsn) is True
    assert server.execute("SELECT version FROM accord.version", dbname(dsn)) == [(2,)]
    tables = server.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'accord' ORDER BY 1", dbname(dsn))
    assert [t for (t,) in tables] == ["answers", "ballots", "claims", "contexts", "keys", "runs", "version"]
    Ledger(dsn).close()  # a second open finds it and changes nothing
    assert server.execute("SELECT count(*) FROM accord.version", dbname(dsn)) == [(1,)]


def test_a_ledger_from_a_newer_accord_raises(server: Any, dsn: str) -> None:
    Ledger(dsn).close()
    server.execute("UPDATE accord.version SET version = 99", dbname(dsn))
    with pytest.raises(LedgerError, match=r"newer accord \(format 99\); upgrade accord"):
        Ledger(dsn)


def test_a_foreign_schema_named_accord_is_refused_and_left_alone(server: Any, dsn: str) -> None:
    server.execute("CREATE SCHEMA accord", dbname(dsn))
    server.execute("CREATE TABLE accord.users (name TEXT)", dbname(dsn))
    with pytest.raises(LedgerError, match="schema 'accord' that is not an accord ledger"):
        Ledger(dsn)
    tables = server.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'accord'", dbname(dsn))
    assert tables == [("users",)]


def test_an_empty_schema_accord_made_by_an_administrator_is_adopted(server: Any, dsn: str) -> None:
    server.execute("CREATE SCHEMA accord", dbname(dsn))
    with Ledger(dsn) as ledger:
        assert stab(ledger).run("q").meta["ledger"]["run"] == 1


def test_an_older_format_is_upgraded_in_place_keeping_every_row(server: Any, dsn: str) -> None:
    with Ledger(dsn) as ledger:
        first = stab(ledger).run("kept")
    server.execute("DROP TABLE accord.claims", dbname(dsn))  # as a format-1 ledger was
    server.execute("UPDATE accord.version SET version = 1", dbname(dsn))
    with Ledger(dsn) as ledger:
        again = stab(ledger, "other").run("kept")
        assert again.replayed and again.value == first.value
        assert stab(ledger).map(["claimed"], progress=False)[0].meta["ledger"]["run"] == 2
    assert server.execute("SELECT version FROM accord.version", dbname(dsn)) == [(2,)]


# -- roles and rights ---------------------------------------------------------------------------


def test_a_role_that_may_not_create_the_schema_gets_permission_denied(server: Any, dsn: str, role: tuple[str, str]) -> None:
    name, password = role
    with pytest.raises(LedgerError, match="permission denied") as raised:
        Ledger(server.dsn(dbname(dsn), user=name, password=password))
    assert password not in shown(raised.value)


def test_a_read_only_role_replays_but_its_writes_are_reported(server: Any, dsn: str, role: tuple[str, str],
                                                              caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    with Ledger(dsn) as owner:
        stab(owner).run("decided")
    name, password = role
    db = dbname(dsn)
    server.execute(f"GRANT USAGE ON SCHEMA accord TO {name}", db)
    server.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA accord TO {name}", db)
    with Ledger(server.dsn(db, user=name, password=password)) as reader, caplog.at_level(logging.WARNING, logger="accord"):
        hit = stab(reader, "other").run("decided")
        assert hit.replayed and hit.value == "positive"
        new = stab(reader).run("new")
        assert new.value == "positive" and not new.replayed
        assert new.meta["ledger_error"]["type"] == "LedgerError" and "permission denied" in new.meta["ledger_error"]["message"]
        assert reader.runs()[0]["request"] == "decided"
    assert "not recorded" in caplog.text and password not in caplog.text


def test_a_role_without_usage_on_the_schema_is_refused_at_open(server: Any, dsn: str, role: tuple[str, str]) -> None:
    Ledger(dsn).close()
    name, password = role
    with pytest.raises(LedgerError, match="permission denied"):
        Ledger(server.dsn(dbname(dsn), user=name, password=password))


# -- the server and the connection ----------------------------------------------------------------


def test_an_unreachable_server_raises_at_open_without_the_password(caplog: pytest.LogCaptureFixture) -> None:
    from servers import free_port

    target = f"postgresql://alice:s3cret-pw@127.0.0.1:{free_port()}/accord"  # nothing listens there
    with caplog.at_level(logging.DEBUG), pytest.raises(LedgerError, match="cannot connect to the ledger at") as raised:
        Ledger(target, timeout=1)
    assert "postgresql://alice@127.0.0.1:" in str(raised.value)
    assert "s3cret-pw" not in shown(raised.value) and "s3cret-pw" not in caplog.text
    with pytest.raises(LedgerError, match="cannot connect"):
        exists(target)


def test_a_dsn_that_cannot_be_parsed_is_a_config_error_that_does_not_echo_it() -> None:
    with pytest.raises(accord.ConfigError, match="cannot be parsed") as raised:
        Ledger("postgresql://alice:s3cret-pw@[::1/accord")
    assert "s3cret-pw" not in shown(raised.value) and "alice" not in str(raised.value)


def test_the_password_never_shows_in_a_repr_a_log_an_error_or_a_result(server: Any, dsn: str, role: tuple[str, str],
                                                                       caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    name, password = role
    db = dbname(dsn)
    Ledger(dsn).close()
    server.execute(f"GRANT USAGE ON SCHEMA accord TO {name}", db)
    server.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA accord TO {name}", db)
    target = server.dsn(db, user=name, password=password)
    assert password in target or "p%40ss" in target
    seen: list[str] = []
    with caplog.at_level(logging.DEBUG):
        ledger = Ledger(target)
        seen += [repr(ledger), str(ledger.where), repr(ledger._store), str(vars(ledger))]
        ok = stab(ledger).run("q")  # the write is refused: reported in the Result
        seen.append(json.dumps(ok.to_dict(), default=str))
        counting = Stabilizer(models.function(lambda p: "nonsense", name="m"), int, ledger=ledger,
                              vote=Vote(k=1), retry=Retry(attempts=1))  # fmt: skip
        with pytest.raises(accord.InvalidOutput) as raised:
            counting.run("n")
        seen += [shown(raised.value), json.dumps(raised.value.result.to_dict(), default=str)]
        server.stop()
        try:
            with pytest.raises(LedgerError) as down:
                ledger.runs()
            seen.append(shown(down.value))
            with pytest.raises(LedgerError) as reopen:
                Ledger(target, timeout=1)
            seen.append(shown(reopen.value))
            seen.append(json.dumps(stab(ledger).map(["m"], progress=False)[0].to_dict(), default=str))
        finally:
            server.start()
        ledger.close()
    seen.append(caplog.text)
    assert "permission denied" in ok.meta["ledger_error"]["message"]
    assert ledger.where == f"postgresql://{name}@127.0.0.1:{server.port}/{db}"
    for text in seen:
        for secret in (password, quote(password, safe="")):
            assert secret not in text


def test_the_server_down_mid_run_returns_the_answer_reports_the_write_and_reconnects(
    server: Any, dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    ledger = Ledger(dsn, timeout=1)
    calls = []

    def model(prompt: Any) -> str:
        calls.append(prompt)
        if len(calls) == 1:
            server.stop()  # after the run was opened: its ballots and its end cannot be written
        return "positive"

    with caplog.at_level(logging.WARNING, logger="accord"):
        try:
            result = Stabilizer(models.function(model, name="m"), str, ledger=ledger).run("q")
        finally:
            server.start()
    assert result.value == "positive" and result.stable
    assert result.meta["ledger_error"]["type"] == "LedgerError"
    assert "cannot connect" in result.meta["ledger_error"]["message"]
    assert "not recorded" in caplog.text
    again = Stabilizer(models.function(model, name="m"), str, ledger=ledger).run("q")
    assert "ledger_error" not in again.meta and not again.replayed, "reconnected; the lost run was never stored"
    assert Stabilizer(models.function(model, name="m"), str, ledger=ledger).run("q").replayed
    outcomes = [r["outcome"] for r in ledger.runs()]
    assert outcomes == ["accepted", "interrupted"], "the run opened before the outage stays as history"
    ledger.close()


class Holder:
    """Another session holding a lock on ``accord.answers`` that blocks writes, never reads."""

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg.connect(dsn)
        self.conn.execute("LOCK TABLE accord.answers IN EXCLUSIVE MODE")

    def close(self) -> None:
        self.conn.rollback()
        self.conn.close()


def test_a_lock_held_past_the_timeout_is_reported_and_the_answer_returned(dsn: str) -> None:
    ledger = Ledger(dsn, timeout=0.3)
    holder = Holder(dsn)
    try:
        start = time.monotonic()
        result = stab(ledger).run("q")
        waited = time.monotonic() - start
        assert result.value == "positive"
        assert "stayed locked by another writer for more than 0.3 s" in result.meta["ledger_error"]["message"]
        assert 0.3 <= waited < 3
        assert ledger.runs()[0]["outcome"] == "interrupted", "readers are not blocked by a writer"
    finally:
        holder.close()
    assert stab(ledger).run("q").meta["ledger"]["run"] == 2
    ledger.close()


def test_a_connection_lost_in_the_middle_of_a_write_is_reported_and_the_next_call_reconnects(server: Any, dsn: str) -> None:
    ledger = Ledger(dsn)
    holder = Holder(dsn)  # the write waits on it; meanwhile its session is ended by the server
    ledger_pid = server.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s AND application_name = 'accord'",
                                dbname(dsn), (dbname(dsn),))  # fmt: skip
    assert len(ledger_pid) == 1

    def end_it() -> None:
        time.sleep(0.5)
        server.execute("SELECT pg_terminate_backend(%s)", params=(ledger_pid[0][0],))

    killer = threading.Thread(target=end_it)
    killer.start()
    try:
        result = stab(ledger).run("q")
    finally:
        killer.join()
        holder.close()
    assert result.value == "positive"
    assert "lost the connection" in result.meta["ledger_error"]["message"]
    assert ledger.runs()[0]["outcome"] == "interrupted", "the next call reconnected; nothing half-written"
    assert stab(ledger).run("q").meta["ledger"]["run"] == 2
    ledger.close()


def test_a_database_out_of_resources_returns_the_answer_and_writes_nothing(server: Any, dsn: str) -> None:
    ledger = Ledger(dsn)
    stab(ledger).run("small")
    db = dbname(dsn)
    server.execute("CREATE FUNCTION accord.no_space() RETURNS trigger LANGUAGE plpgsql AS "
                   "$$ BEGIN RAISE EXCEPTION 'could not extend file' USING ERRCODE = 'disk_full'; END $$", db)  # fmt: skip
    server.execute("CREATE TRIGGER no_space BEFORE INSERT ON accord.ballots FOR EACH ROW EXECUTE FUNCTION accord.no_space()", db)
    result = stab(ledger).run("big")
    assert result.value == "positive" and result.stable
    assert "out of resources" in result.meta["ledger_error"]["message"]
    assert [r["outcome"] for r in ledger.runs()] == ["interrupted", "accepted"], "the failed run wrote no ballot, no answer"
    assert ledger.recall(stab(ledger), "big") is None
    server.execute("DROP TRIGGER no_space ON accord.ballots", db)
    assert stab(ledger).run("big").meta["ledger"]["run"] == 3
    ledger.close()


def test_a_ledger_on_a_server_restarted_between_calls_reconnects_without_an_error(server: Any, dsn: str) -> None:
    ledger = Ledger(dsn)
    stab(ledger).run("before")
    server.restart()
    after = stab(ledger).run("after")
    assert "ledger_error" not in after.meta and after.meta["ledger"]["run"] == 2
    assert stab(ledger).run("before").replayed
    ledger.close()


def test_a_role_with_the_grants_of_the_docs_decides_stores_and_claims(server: Any, dsn: str, role: tuple[str, str]) -> None:
    from test_ledger import docs_sql

    Ledger(dsn).close()  # the owner made the schema
    name, password = role
    grants = "\n".join(line for line in docs_sql("GRANT USAGE ON ALL SEQUENCES").splitlines() if not line.startswith("--"))
    for statement in filter(str.strip, grants.split(";")):
        server.execute(statement.replace("worker", name), dbname(dsn))
    with Ledger(server.dsn(dbname(dsn), user=name, password=password)) as worker:
        results = stab(worker).map(["a", "b", "a"], progress=False)
        assert [r.replayed for r in results] == [False, False, True]
        assert all("ledger_error" not in r.meta for r in results)
        assert stab(worker, "other").run("a").replayed
