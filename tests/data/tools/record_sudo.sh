#!/usr/bin/env bash
# Records what sudo says to a user who is not root, for labkit.hosts.privilege's classification
# (tests/test_privilege.py reads tests/data/sudo/).
#
# Run as root from the repository root, with labkit in .venv and Debian's sudo installed:
#     bash tests/data/tools/record_sudo.sh [OUTDIR]        (OUTDIR defaults to tests/data)
# It brings up a testbed of its own (`labkit testbed up --login-user lkrec`; name from
# $RECORD_TESTBED, default rec-sudo), whose user exists only inside the testbed's sshds, and
# takes it down on exit. For each case it changes that user's rights in the testbed's private
# copy of /etc (sudoers.d, group; the sshds see that directory), then runs,
# over SSH as that user, the commands labkit.hosts.privilege runs, keeping stdout (.txt),
# stderr (.stderr) and the exit status (.status) of each:
#   passwordless  the testbed's own --sudo rule: lkrec ALL=(ALL:ALL) NOPASSWD: ALL
#   password      no rule of its own, but in group sudo (Debian's `%sudo ALL=(ALL:ALL) ALL`)
#   some          only lkrec ALL=(root) NOPASSWD: /usr/sbin/sysctl
#   none          --no-sudo: no rule, no admin group
set -euo pipefail
export LC_ALL=C

OUT=${1:-tests/data}/sudo
NAME=${RECORD_TESTBED:-rec-sudo}
USER_NAME=lkrec
LABKIT=.venv/bin/labkit
export LABKIT_STATE_HOME=${LABKIT_STATE_HOME:-/tmp/labkit-record-state}
STATE=$LABKIT_STATE_HOME/testbeds/$NAME

cleanup() { "$LABKIT" testbed down --name "$NAME" >/dev/null 2>&1 || true; }
trap cleanup EXIT
"$LABKIT" testbed up --name "$NAME" --one-way-delay 1ms --rate none --login-user "$USER_NAME" --sudo >/dev/null

record() {  # record CASE NAME COMMAND...
    local dir=$OUT/$1 name=$2; shift 2
    mkdir -p "$dir"
    set +e
    ssh -F "$STATE/ssh_config" "$NAME-a" -- "$@" > "$dir/$name.txt" 2> "$dir/$name.stderr"
    echo $? > "$dir/$name.status"
    set -e
}

record_case() {  # record_case CASE: the commands labkit.hosts.privilege runs
    record "$1" id-u id -u
    record "$1" id-Gn id -Gn
    record "$1" sudo-n-true sudo -n -- true
    record "$1" sudo-n-l sudo -n -l
    record "$1" sudo-n-l-sysctl sudo -n -l sysctl -q -w net.ipv4.tcp_slow_start_after_idle=1
    record "$1" sudo-n-l-ip sudo -n -l ip route replace 198.18.0.2/32 congctl cubic
}

rule=$STATE/login/etc/sudoers.d/labkit-testbed-$NAME
record_case passwordless

rm "$rule"
cp "$STATE/login/etc/group" /tmp/record-sudo-group.orig
sed "s/^sudo:x:\([0-9]*\):\(.*\)$/sudo:x:\1:\2,$USER_NAME/; s/:,/:/" /tmp/record-sudo-group.orig > /tmp/record-sudo-group
cat /tmp/record-sudo-group > "$STATE/login/etc/group"
record_case password
cat /tmp/record-sudo-group.orig > "$STATE/login/etc/group"
rm -f /tmp/record-sudo-group /tmp/record-sudo-group.orig

printf '%s ALL=(root) NOPASSWD: /usr/sbin/sysctl\n' "$USER_NAME" > "$rule.new"
chmod 440 "$rule.new"
visudo -cf "$rule.new" >/dev/null
mv "$rule.new" "$rule"
record_case some

"$LABKIT" testbed up --name "$NAME" --one-way-delay 1ms --rate none --login-user "$USER_NAME" --no-sudo >/dev/null
record_case none
