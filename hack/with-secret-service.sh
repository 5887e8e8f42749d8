#!/usr/bin/env bash
# with-secret-service.sh COMMAND [ARG...]
#
# Runs COMMAND inside a private D-Bus session with a real, unlocked Secret
# Service (gnome-keyring), for tests of kiln's keyring store:
#
#   hack/with-secret-service.sh env KILN_TEST_SECRET_SERVICE=1 go test ./creds/ -run SecretService -v
#
# Needs the Debian packages dbus (dbus-run-session) and gnome-keyring;
# libsecret-tools (secret-tool) helps when debugging.
#
# The keyring files and the daemon's control socket live in a temp dir that
# is removed afterwards, so the user's real login keyring is never touched.
set -euo pipefail

if [ "$#" -eq 0 ]; then
	echo "usage: $0 COMMAND [ARG...]" >&2
	exit 2
fi
for tool in dbus-run-session gnome-keyring-daemon; do
	if ! command -v "$tool" >/dev/null; then
		echo "$0: $tool not found; install: apt-get install -y dbus gnome-keyring" >&2
		exit 2
	fi
done

state=$(mktemp -d "${TMPDIR:-/tmp}/kiln-secret-service.XXXXXX")
trap 'rm -rf "$state"' EXIT
mkdir -m 0700 "$state/data" "$state/run"

# Not exec: the trap above must run after the session (and with it the
# daemon, which exits when its bus goes away) has ended.
KILN_SS_STATE=$state dbus-run-session -- bash -c '
	set -euo pipefail
	has_owner() {
		dbus-send --session --print-reply --dest=org.freedesktop.DBus \
			/org/freedesktop/DBus org.freedesktop.DBus.NameHasOwner \
			string:org.freedesktop.secrets 2>/dev/null | grep -q "boolean true"
	}
	# --unlock reads the login keyring password from stdin and creates the
	# "login" collection (the "default" alias) with it. It must be an empty
	# *line*: with no input at all no login collection is created, and
	# without a default collection there is nowhere to store items.
	env=$(echo "" | XDG_DATA_HOME="$KILN_SS_STATE/data" XDG_RUNTIME_DIR="$KILN_SS_STATE/run" \
		gnome-keyring-daemon --unlock --components=secrets)
	while IFS= read -r line; do
		[ -n "$line" ] && export "$line"
	done <<<"$env"
	# The daemon prints its environment before it owns its bus name. Anything
	# that calls org.freedesktop.secrets in that gap makes D-Bus activate a
	# second daemon, which then fights the first over the keyring files.
	for _ in $(seq 100); do
		has_owner && break
		sleep 0.05
	done
	if ! has_owner; then
		echo "with-secret-service.sh: gnome-keyring did not register org.freedesktop.secrets" >&2
		exit 1
	fi
	unset KILN_SS_STATE
	exec "$@"
' with-secret-service "$@"
