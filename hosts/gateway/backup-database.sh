#!/bin/sh
# One backup of the gateway's database (LiteLLM's keys, budgets and spend, and spear-fleet's
# ledger): pg_dump's custom format, encrypted with the passphrase in $SPEAR_BACKUP_KEY_FILE
# (openssl enc @CIPHER@; components/gateway/backup.py), into $SPEAR_BACKUP_FOLDER as
# litellm-<UTC time>.dump (0600), then only the newest $SPEAR_BACKUP_KEEP dumps are kept.
# On a gateway host spear-gateway-backup.timer runs it (so does `systemctl start
# spear-gateway-backup.service`) against the local cluster at $SPEAR_BACKUP_PORT; in the
# cluster the CronJob spear-gateway-backup runs it against $DATABASE_URL. Prints the dump's name.
set -eu
: "${SPEAR_BACKUP_FOLDER:?}" "${SPEAR_BACKUP_KEEP:?}" "${SPEAR_BACKUP_KEY_FILE:?}"
umask 077
cd /  # pg_dump as postgres cannot enter root's home
dump() {
  if [ -n "${DATABASE_URL:-}" ]; then
    pg_dump --format=custom --dbname="$DATABASE_URL"
  else
    runuser -u postgres -- pg_dump -p "${SPEAR_BACKUP_PORT:?}" --format=custom litellm
  fi
}
mkdir -p "$SPEAR_BACKUP_FOLDER"
name="litellm-$(date -u +%Y%m%dT%H%M%SZ).dump"
part="$SPEAR_BACKUP_FOLDER/.$name.part"
# Encrypted as it is written (never plain on disk), beside the folder and renamed: a dump cut
# off never looks like a whole one. sh has no pipefail: pg_dump's status comes back by a file.
status=$(mktemp)
{ dump; echo $? > "$status"; } \
  | openssl enc -e @CIPHER@ -salt -pass "file:$SPEAR_BACKUP_KEY_FILE" > "$part"
dumped=$(cat "$status")
rm -f "$status"
if [ "$dumped" != 0 ]; then
  rm -f "$part"
  echo "pg_dump failed ($dumped): no dump written" >&2
  exit 1
fi
mv "$part" "$SPEAR_BACKUP_FOLDER/$name"
# The glob lists the dumps oldest first (their names sort by time): all but the newest go.
set -- "$SPEAR_BACKUP_FOLDER"/litellm-[0-9]*T[0-9]*Z.dump
excess=$(($# - SPEAR_BACKUP_KEEP))
while [ "$excess" -gt 0 ]; do
  rm -f "$1"
  shift
  excess=$((excess - 1))
done
echo "$name"
