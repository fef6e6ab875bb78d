# The init of an ors sandbox (sandbox/bwrap.rs): PID 1 of the sandbox's own PID namespace. It
# runs one command at a time for the server and, before it reports the command's end, kills
# every other process of the sandbox and waits until they are gone.
#
# A request on standard input: the line "<nonce> <lines> <input bytes>", then <lines> lines of
# shell script (run in a subshell), then <input bytes> bytes, spooled to a file that becomes the
# command's standard input. Its end, once nothing of it is left: "<nonce> <status> <cancelled>"
# on standard output and "<nonce>" on standard error, right after the command's own output.
# SIGUSR1 (sent by the server on a timeout or a cancellation) kills the running command.

# The command's processes: killed at SIGUSR1; `pid` is empty while no command runs.
pid=
trap 'cancelled=1; [ -n "$pid" ] && kill -KILL -1 2>/dev/null' USR1

# Kill every process but this one (kill -1 spares PID 1) until /proc lists no other; waiting
# for a child of our own reaps the orphans the kernel handed to PID 1 on the way. /proc is
# read first: kill -1 walks every process of the host, not only the sandbox's, and after most
# commands there is nothing left to kill.
gone() {
    while :; do
        set -- /proc/[0-9]*
        [ "$#" -le 1 ] && return 0
        kill -KILL -1 2>/dev/null
        : &
        wait "$!" 2>/dev/null
    done
}

printf 'ready\n'
while :; do
    cancelled=0
    if ! read -r nonce lines input; then
        # A SIGUSR1 between commands interrupts the read; only the end of input ends the init.
        [ "$cancelled" = 1 ] && continue
        gone
        exit 0
    fi
    script=
    while [ "$lines" -gt 0 ]; do
        IFS= read -r line
        script="$script$line
"
        lines=$((lines - 1))
    done
    stdin=/dev/null
    if [ "$input" -gt 0 ]; then
        head -c "$input" >/run/ors/stdin
        stdin=/run/ors/stdin
    fi
    status=0
    if [ "$cancelled" = 0 ]; then
        # Set before the fork: a SIGUSR1 that arrives while the command starts (its trap runs
        # once the fork is done, before pid=$!) kills it too.
        pid=starting
        # The subshell forgets the init's variables (the nonce above all: a command that
        # knew it could fake its end), functions and arguments before the command runs.
        (eval "unset nonce lines input line stdin status pid cancelled script; unset -f gone; \
            set --; $script") <"$stdin" &
        pid=$!
        wait "$pid"
        status=$?
        # A trap ran (SIGUSR1): the command was killed; reap it for its real status.
        [ "$cancelled" = 1 ] && { wait "$pid"; status=$?; }
    fi
    gone
    pid=
    # rm is a program (a fork and an exec, as much as the command itself takes for `true`):
    # run it only when there is a spool to remove.
    [ "$stdin" = /dev/null ] || rm -f /run/ors/stdin
    printf '%s %s %s\n' "$nonce" "$status" "$cancelled"
    printf '%s\n' "$nonce" >&2
done
