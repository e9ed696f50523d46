#!/usr/bin/env bash
# Applies LiteLLM's database migrations without Prisma's schema engine (none exists offline for
# Prisma 5.17): every litellm_proxy_extras/migrations/<name>/migration.sql, in name order, with
# psql, each in one transaction together with its row in spear_applied_migrations, so a LiteLLM
# version bump applies only the migrations it adds. Names already recorded by `prisma migrate
# deploy` in _prisma_migrations (a database LiteLLM migrated itself) count as applied too.
#
# Usage: DATABASE_URL=postgresql://... migrate.sh --venv DIR | --migrations DIR
#   --venv DIR        a LiteLLM virtualenv (install-litellm.sh); its litellm_proxy_extras is used
#   --migrations DIR  a migrations folder itself
# DATABASE_URL comes from the environment only: it holds a password, and arguments are visible
# to every user of the host. Prints "migrate: applied N, skipped M in S s" on success.
set -euo pipefail

die() { echo "migrate: $*" >&2; exit 2; }

migrations=""
case "${1:-}" in
  --venv)
    [ -n "${2:-}" ] || die "--venv needs the virtualenv folder"
    shopt -s nullglob
    found=("$2"/lib/python3*/site-packages/litellm_proxy_extras/migrations)
    shopt -u nullglob
    [ "${#found[@]}" -eq 1 ] || die "no litellm_proxy_extras/migrations in the virtualenv $2"
    migrations=${found[0]} ;;
  --migrations)
    [ -n "${2:-}" ] || die "--migrations needs a folder"
    migrations=$2 ;;
  *) die "usage: DATABASE_URL=... $0 --venv DIR | --migrations DIR" ;;
esac
[ "$#" -eq 2 ] || die "usage: DATABASE_URL=... $0 --venv DIR | --migrations DIR"
[ -d "$migrations" ] || die "migrations folder $migrations does not exist"
[ -n "${DATABASE_URL:-}" ] || die "DATABASE_URL is not set (the environment variable, postgresql://user:password@host:port/db)"

# libpq reads no URL from the environment: split it into the PG* variables it does read, so the
# password never appears on a command line.
pg_env=$(python3 - <<'EOF'
import os, shlex, sys
from urllib.parse import urlsplit, parse_qs, unquote
u = urlsplit(os.environ["DATABASE_URL"])
if u.scheme not in ("postgresql", "postgres"):
    sys.exit("migrate: DATABASE_URL must start with postgresql:// or postgres://")
pairs = {"PGHOST": u.hostname or "", "PGPORT": str(u.port or 5432),
         "PGUSER": unquote(u.username or ""), "PGPASSWORD": unquote(u.password or ""),
         "PGDATABASE": unquote(u.path.lstrip("/"))}
query = parse_qs(u.query)
if "sslmode" in query:
    pairs["PGSSLMODE"] = query["sslmode"][0]
if "schema" in query:  # Prisma's schema parameter: the tables live there
    pairs["PGOPTIONS"] = "-c search_path=" + query["schema"][0]
print("\n".join(f"export {k}={shlex.quote(v)}" for k, v in pairs.items() if v))
EOF
) || exit 2
eval "$pg_env"

psql_q() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }

start_ns=$(date +%s%N)
psql_q -c "CREATE TABLE IF NOT EXISTS spear_applied_migrations (
  name text PRIMARY KEY, sha256 text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
# One name a line: ours, and those prisma migrate deploy finished.
done_query="SELECT name FROM spear_applied_migrations"
if [ "$(psql_q -At -c "SELECT to_regclass('_prisma_migrations') IS NOT NULL")" = t ]; then
  done_query+=" UNION SELECT migration_name FROM _prisma_migrations
                WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL"
fi
done_names=$(psql_q -At -c "$done_query")

declare -A recorded=()
while IFS= read -r name; do
  [ -z "$name" ] || recorded[$name]=1
done <<<"$done_names"

# A meta-command's argument for psql: single-quoted, a quote in it doubled.
quoted() { printf "'%s'" "${1//\'/\'\'}"; }

# One psql session runs them all: a connection per migration cost most of a run (11 s for
# LiteLLM 1.91.1's 127 on 2 cores). Each migration runs in its own transaction together with its
# row, and at the first error psql stops: that migration's transaction is rolled back and none
# after it runs.
script=""
applied=0 skipped=0
# Folder names may contain spaces: read them NUL-separated, sorted by name (C collation).
while IFS= read -r -d '' sql; do
  name=${sql%/migration.sql}
  name=${name##*/}
  if [ -n "${recorded[$name]+x}" ]; then
    skipped=$((skipped + 1))
    continue
  fi
  sha=$(sha256sum "$sql")
  record="\\set name $(quoted "$name")
\\set sha ${sha%% *}
\\i $(quoted "$sql")
INSERT INTO spear_applied_migrations (name, sha256) VALUES (:'name', :'sha');"
  if grep -qiE '^[[:space:]]*CREATE[[:space:]]+(UNIQUE[[:space:]]+)?INDEX[[:space:]]+CONCURRENTLY' "$sql"; then
    # CREATE INDEX CONCURRENTLY refuses to run in a transaction (these use IF NOT EXISTS, so a
    # run cut between the two steps repeats harmlessly).
    script+="$record"$'\n'
  else
    script+="BEGIN;"$'\n'"$record"$'\n'"COMMIT;"$'\n'
  fi
  script+="\\warn $(quoted "migrate: applied $name")"$'\n'
  applied=$((applied + 1))
done < <(find "$migrations" -mindepth 2 -maxdepth 2 -name migration.sql -print0 | LC_ALL=C sort -z)
# From a pipe: a gateway image's migrations Job may have no writable folder.
[ "$applied" -eq 0 ] || psql_q -f <(printf '%s' "$script")

ms=$(( ($(date +%s%N) - start_ns) / 1000000 ))
echo "migrate: applied $applied, skipped $skipped in $((ms / 1000)).$(printf '%03d' $((ms % 1000))) s"
