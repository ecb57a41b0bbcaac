# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_heartbeat_global_optspecs
    string join \n config= state-dir= now= v/verbose h/help V/version
end

function __fish_heartbeat_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_heartbeat_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_heartbeat_using_subcommand
    set -l cmd (__fish_heartbeat_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c heartbeat -n "__fish_heartbeat_needs_command" -l config -d 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)' -r -F
complete -c heartbeat -n "__fish_heartbeat_needs_command" -l state-dir -d 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock' -r -F
complete -c heartbeat -n "__fish_heartbeat_needs_command" -l now -d 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_needs_command" -s v -l verbose -d 'Diagnostics on stderr (-vv for more)'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -s h -l help -d 'Print help'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -s V -l version -d 'Print version'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -f -a "run" -d 'Run the due tasks once (for cron and systemd timers)'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -f -a "daemon" -d 'Stay up: tick every interval, answer Telegram buttons and commands'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -f -a "check" -d 'Validate the config and files; list tasks, what would happen now and when they are due'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -f -a "status" -d 'Last run, pause, pending approvals, spend, tripped tasks, outbox and the run lock'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -f -a "doctor" -d 'Is anything wrong or missed? Read-only checks of the scheduler, runs, lock, tasks, approvals, delivery, files, clock and state dir'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -f -a "approve" -d 'Approve pending approvals (by id, all, or one by one on a terminal) and run them'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -f -a "deny" -d 'Deny pending approvals'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -f -a "approvals" -d 'List approvals'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -f -a "grants" -d 'List the always-grants (tasks that run without asking)'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -f -a "revoke" -d 'Remove the always-grant of a task'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -f -a "reset" -d 'Clear a tripped task\'s failure count, or release an interrupted one-time task, so it runs again'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -f -a "snooze" -d 'Hold one task back for a while (the file is not touched)'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -f -a "unsnooze" -d 'End a task\'s snooze'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -f -a "pause" -d 'Pause runs (until resumed, or for a while)'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -f -a "resume" -d 'End a pause'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -f -a "notify-test" -d 'Send a test message to every configured channel (Telegram chats included), or one'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -f -a "telegram-chats" -d 'List the chats that recently wrote to the bot, with their ids (for telegram.chat_ids)'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -f -a "mcp-tools" -d 'List the tools the configured MCP servers offer (starts each server)'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -f -a "mcp" -d 'Serve MCP on stdin/stdout for agents: read the check-list, propose tasks; a person decides'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -f -a "log" -d 'Show the audit log, filtered; human-readable unless --json'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -f -a "metrics" -d 'Print Prometheus metrics (text format 0.0.4) computed from the state dir'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -f -a "init" -d 'Write a commented HEARTBEAT.md and heartbeat.toml to start from (never overwrites)'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -f -a "man" -d 'Print the man page, or install every page where `man` finds them (--install)'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -f -a "fleet" -d 'Fleet mode: several hosts sharing one PostgreSQL'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -f -a "completions" -d 'Print a shell completion script'
complete -c heartbeat -n "__fish_heartbeat_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand run" -l task -d 'Run only this task, now, whatever its schedule or cooldown say (repeatable; implies --once): its id or a unique prefix of it, or FILE:LINE (any line of the item)' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand run" -l file -d 'HEARTBEAT.md to use instead of the config\'s `files` (repeatable)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand run" -l autonomy -d 'Override the configured autonomy for this run' -r -f -a "observe\t''
cautious\t''
full\t''"
complete -c heartbeat -n "__fish_heartbeat_using_subcommand run" -l config -d 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand run" -l state-dir -d 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand run" -l now -d 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand run" -l once -d 'Run once and exit (the daemon is `heartbeat daemon`)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand run" -l allow-missing -d 'A missing HEARTBEAT.md counts as empty instead of an error'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand run" -l force -d 'Run even outside active hours or while paused'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand run" -l dry-run -d 'Decide and print the plan; run, queue and write nothing'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand run" -l json -d 'Print one JSON document'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand run" -s q -l quiet -d 'Print only failures and errors'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand run" -s v -l verbose -d 'Diagnostics on stderr (-vv for more)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand run" -s h -l help -d 'Print help'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand run" -s V -l version -d 'Print version'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand daemon" -l every -d 'Tick interval (default: daemon.every, 30m); ticks align to multiples of it' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand daemon" -l file -d 'HEARTBEAT.md to use instead of the config\'s `files` (repeatable)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand daemon" -l config -d 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand daemon" -l state-dir -d 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand daemon" -l now -d 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand daemon" -l allow-missing -d 'A missing HEARTBEAT.md counts as empty instead of an error'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand daemon" -s v -l verbose -d 'Diagnostics on stderr (-vv for more)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand daemon" -s h -l help -d 'Print help'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand daemon" -s V -l version -d 'Print version'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand check" -l file -d 'HEARTBEAT.md to use instead of the config\'s `files` (repeatable)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand check" -l config -d 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand check" -l state-dir -d 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand check" -l now -d 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand check" -l allow-missing -d 'A missing HEARTBEAT.md counts as empty instead of an error'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand check" -l json -d 'Print one JSON document'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand check" -s v -l verbose -d 'Diagnostics on stderr (-vv for more)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand check" -s h -l help -d 'Print help'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand check" -s V -l version -d 'Print version'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand status" -l config -d 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand status" -l state-dir -d 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand status" -l now -d 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand status" -l json -d 'Print one JSON document'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand status" -s v -l verbose -d 'Diagnostics on stderr (-vv for more)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand status" -s h -l help -d 'Print help'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand status" -s V -l version -d 'Print version'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand doctor" -l since -d 'The window looked at: a duration back from now (`7d`, `12h`), `today`, `yesterday`, or a time' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand doctor" -l config -d 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand doctor" -l state-dir -d 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand doctor" -l now -d 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand doctor" -l deep -d 'Also start each configured MCP server and list its tools'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand doctor" -l json -d 'Print one JSON document'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand doctor" -s v -l verbose -d 'Diagnostics on stderr (-vv for more)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand doctor" -s h -l help -d 'Print help'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand doctor" -s V -l version -d 'Print version'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand approve" -l config -d 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand approve" -l state-dir -d 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand approve" -l now -d 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand approve" -l all -d 'Approve every pending approval (on a terminal: shown first, asked once)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand approve" -l yes -d 'With --all: do not ask'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand approve" -l always -d 'Also grant these exact tasks from now on: later runs do not ask again'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand approve" -l later -d 'Do not run now: the next run runs them'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand approve" -s v -l verbose -d 'Diagnostics on stderr (-vv for more)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand approve" -s h -l help -d 'Print help'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand approve" -s V -l version -d 'Print version'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand deny" -l reason -d 'Why (recorded and shown)' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand deny" -l config -d 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand deny" -l state-dir -d 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand deny" -l now -d 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand deny" -l all -d 'Deny every pending approval'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand deny" -s v -l verbose -d 'Diagnostics on stderr (-vv for more)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand deny" -s h -l help -d 'Print help'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand deny" -s V -l version -d 'Print version'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand approvals" -l state -d 'Which approvals to list' -r -f -a "all\t''
pending\t''
approved\t''
running\t''
retrying\t''
succeeded\t''
failed\t''
denied\t''
expired\t''
stale\t''"
complete -c heartbeat -n "__fish_heartbeat_using_subcommand approvals" -l config -d 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand approvals" -l state-dir -d 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand approvals" -l now -d 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand approvals" -l json -d 'Print one JSON document'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand approvals" -s v -l verbose -d 'Diagnostics on stderr (-vv for more)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand approvals" -s h -l help -d 'Print help'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand approvals" -s V -l version -d 'Print version'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand grants" -l config -d 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand grants" -l state-dir -d 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand grants" -l now -d 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand grants" -l json -d 'Print one JSON document'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand grants" -s v -l verbose -d 'Diagnostics on stderr (-vv for more)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand grants" -s h -l help -d 'Print help'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand grants" -s V -l version -d 'Print version'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand revoke" -l config -d 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand revoke" -l state-dir -d 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand revoke" -l now -d 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand revoke" -s v -l verbose -d 'Diagnostics on stderr (-vv for more)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand revoke" -s h -l help -d 'Print help'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand revoke" -s V -l version -d 'Print version'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand reset" -l config -d 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand reset" -l state-dir -d 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand reset" -l now -d 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand reset" -s v -l verbose -d 'Diagnostics on stderr (-vv for more)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand reset" -s h -l help -d 'Print help'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand reset" -s V -l version -d 'Print version'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand snooze" -l for -d 'Snooze it for this long (`2h`, `3d`)' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand snooze" -l until -d 'Snooze it until this time: RFC 3339, or a local `2026-12-07 09:00` in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand snooze" -l reason -d 'Why (recorded and shown)' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand snooze" -l config -d 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand snooze" -l state-dir -d 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand snooze" -l now -d 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand snooze" -s v -l verbose -d 'Diagnostics on stderr (-vv for more)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand snooze" -s h -l help -d 'Print help'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand snooze" -s V -l version -d 'Print version'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand unsnooze" -l config -d 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand unsnooze" -l state-dir -d 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand unsnooze" -l now -d 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand unsnooze" -s v -l verbose -d 'Diagnostics on stderr (-vv for more)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand unsnooze" -s h -l help -d 'Print help'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand unsnooze" -s V -l version -d 'Print version'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand pause" -l for -d 'End the pause by itself after this long (default: until `heartbeat resume`)' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand pause" -l reason -d 'Why (recorded and shown)' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand pause" -l config -d 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand pause" -l state-dir -d 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand pause" -l now -d 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand pause" -s v -l verbose -d 'Diagnostics on stderr (-vv for more)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand pause" -s h -l help -d 'Print help'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand pause" -s V -l version -d 'Print version'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand resume" -l config -d 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand resume" -l state-dir -d 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand resume" -l now -d 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand resume" -s v -l verbose -d 'Diagnostics on stderr (-vv for more)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand resume" -s h -l help -d 'Print help'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand resume" -s V -l version -d 'Print version'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand notify-test" -l channel -d 'Only this channel (`telegram`, or a [channels.NAME] name)' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand notify-test" -l config -d 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand notify-test" -l state-dir -d 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand notify-test" -l now -d 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand notify-test" -s v -l verbose -d 'Diagnostics on stderr (-vv for more)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand notify-test" -s h -l help -d 'Print help'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand notify-test" -s V -l version -d 'Print version'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand telegram-chats" -l config -d 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand telegram-chats" -l state-dir -d 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand telegram-chats" -l now -d 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand telegram-chats" -l json -d 'Print one JSON document'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand telegram-chats" -s v -l verbose -d 'Diagnostics on stderr (-vv for more)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand telegram-chats" -s h -l help -d 'Print help'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand telegram-chats" -s V -l version -d 'Print version'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand mcp-tools" -l config -d 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand mcp-tools" -l state-dir -d 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand mcp-tools" -l now -d 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand mcp-tools" -l json -d 'Print one JSON document'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand mcp-tools" -s v -l verbose -d 'Diagnostics on stderr (-vv for more)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand mcp-tools" -s h -l help -d 'Print help'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand mcp-tools" -s V -l version -d 'Print version'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand mcp" -l config -d 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand mcp" -l state-dir -d 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand mcp" -l now -d 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand mcp" -s v -l verbose -d 'Diagnostics on stderr (-vv for more)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand mcp" -s h -l help -d 'Print help'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand mcp" -s V -l version -d 'Print version'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand log" -l since -d 'Only lines at or after this: a duration back from now (`2h`, `1d`), `today`, `yesterday`, an RFC 3339 time, or a local `2026-12-07T02:00` or `2026-12-07`' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand log" -l event -d 'Only this event (repeatable), e.g. task_failed' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand log" -l task -d 'Only lines about this task id (or its first 4 or more hex digits)' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand log" -l run -d 'Only lines of this run id' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand log" -s n -l lines -d 'Only the last N matching lines' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand log" -l config -d 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand log" -l state-dir -d 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand log" -l now -d 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand log" -l json -d 'Print the matching lines as they are (JSON Lines)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand log" -s f -l follow -d 'Keep printing lines as they are appended (from the end, unless --since or -n is given)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand log" -l all -d 'Also show runs that did nothing (hidden by default)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand log" -s v -l verbose -d 'Diagnostics on stderr (-vv for more)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand log" -s h -l help -d 'Print help'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand log" -s V -l version -d 'Print version'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand metrics" -l config -d 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand metrics" -l state-dir -d 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand metrics" -l now -d 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand metrics" -s v -l verbose -d 'Diagnostics on stderr (-vv for more)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand metrics" -s h -l help -d 'Print help'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand metrics" -s V -l version -d 'Print version'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand init" -l config -d 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand init" -l state-dir -d 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand init" -l now -d 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand init" -s v -l verbose -d 'Diagnostics on stderr (-vv for more)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand init" -s h -l help -d 'Print help'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand init" -s V -l version -d 'Print version'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand man" -l dir -d 'Where --install writes the pages (default: ~/.local/share/man/man1)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand man" -l config -d 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand man" -l state-dir -d 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand man" -l now -d 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand man" -l install -d 'Write heartbeat.1 and a page per subcommand into the directory `man` searches for your own installs, so that `man heartbeat` works'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand man" -s v -l verbose -d 'Diagnostics on stderr (-vv for more)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand man" -s h -l help -d 'Print help'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand man" -s V -l version -d 'Print version'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand fleet; and not __fish_seen_subcommand_from forget help" -l config -d 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand fleet; and not __fish_seen_subcommand_from forget help" -l state-dir -d 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand fleet; and not __fish_seen_subcommand_from forget help" -l now -d 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand fleet; and not __fish_seen_subcommand_from forget help" -s v -l verbose -d 'Diagnostics on stderr (-vv for more)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand fleet; and not __fish_seen_subcommand_from forget help" -s h -l help -d 'Print help'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand fleet; and not __fish_seen_subcommand_from forget help" -s V -l version -d 'Print version'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand fleet; and not __fish_seen_subcommand_from forget help" -f -a "forget" -d 'Free a node\'s name (a node that is gone for good), so another state dir may take it'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand fleet; and not __fish_seen_subcommand_from forget help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand fleet; and __fish_seen_subcommand_from forget" -l config -d 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand fleet; and __fish_seen_subcommand_from forget" -l state-dir -d 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand fleet; and __fish_seen_subcommand_from forget" -l now -d 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand fleet; and __fish_seen_subcommand_from forget" -s v -l verbose -d 'Diagnostics on stderr (-vv for more)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand fleet; and __fish_seen_subcommand_from forget" -s h -l help -d 'Print help'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand fleet; and __fish_seen_subcommand_from forget" -s V -l version -d 'Print version'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand fleet; and __fish_seen_subcommand_from help" -f -a "forget" -d 'Free a node\'s name (a node that is gone for good), so another state dir may take it'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand fleet; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand completions" -l config -d 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand completions" -l state-dir -d 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock' -r -F
complete -c heartbeat -n "__fish_heartbeat_using_subcommand completions" -l now -d 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone' -r
complete -c heartbeat -n "__fish_heartbeat_using_subcommand completions" -s v -l verbose -d 'Diagnostics on stderr (-vv for more)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand completions" -s h -l help -d 'Print help'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand completions" -s V -l version -d 'Print version'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand help; and not __fish_seen_subcommand_from run daemon check status doctor approve deny approvals grants revoke reset snooze unsnooze pause resume notify-test telegram-chats mcp-tools mcp log metrics init man fleet completions help" -f -a "run" -d 'Run the due tasks once (for cron and systemd timers)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand help; and not __fish_seen_subcommand_from run daemon check status doctor approve deny approvals grants revoke reset snooze unsnooze pause resume notify-test telegram-chats mcp-tools mcp log metrics init man fleet completions help" -f -a "daemon" -d 'Stay up: tick every interval, answer Telegram buttons and commands'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand help; and not __fish_seen_subcommand_from run daemon check status doctor approve deny approvals grants revoke reset snooze unsnooze pause resume notify-test telegram-chats mcp-tools mcp log metrics init man fleet completions help" -f -a "check" -d 'Validate the config and files; list tasks, what would happen now and when they are due'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand help; and not __fish_seen_subcommand_from run daemon check status doctor approve deny approvals grants revoke reset snooze unsnooze pause resume notify-test telegram-chats mcp-tools mcp log metrics init man fleet completions help" -f -a "status" -d 'Last run, pause, pending approvals, spend, tripped tasks, outbox and the run lock'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand help; and not __fish_seen_subcommand_from run daemon check status doctor approve deny approvals grants revoke reset snooze unsnooze pause resume notify-test telegram-chats mcp-tools mcp log metrics init man fleet completions help" -f -a "doctor" -d 'Is anything wrong or missed? Read-only checks of the scheduler, runs, lock, tasks, approvals, delivery, files, clock and state dir'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand help; and not __fish_seen_subcommand_from run daemon check status doctor approve deny approvals grants revoke reset snooze unsnooze pause resume notify-test telegram-chats mcp-tools mcp log metrics init man fleet completions help" -f -a "approve" -d 'Approve pending approvals (by id, all, or one by one on a terminal) and run them'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand help; and not __fish_seen_subcommand_from run daemon check status doctor approve deny approvals grants revoke reset snooze unsnooze pause resume notify-test telegram-chats mcp-tools mcp log metrics init man fleet completions help" -f -a "deny" -d 'Deny pending approvals'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand help; and not __fish_seen_subcommand_from run daemon check status doctor approve deny approvals grants revoke reset snooze unsnooze pause resume notify-test telegram-chats mcp-tools mcp log metrics init man fleet completions help" -f -a "approvals" -d 'List approvals'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand help; and not __fish_seen_subcommand_from run daemon check status doctor approve deny approvals grants revoke reset snooze unsnooze pause resume notify-test telegram-chats mcp-tools mcp log metrics init man fleet completions help" -f -a "grants" -d 'List the always-grants (tasks that run without asking)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand help; and not __fish_seen_subcommand_from run daemon check status doctor approve deny approvals grants revoke reset snooze unsnooze pause resume notify-test telegram-chats mcp-tools mcp log metrics init man fleet completions help" -f -a "revoke" -d 'Remove the always-grant of a task'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand help; and not __fish_seen_subcommand_from run daemon check status doctor approve deny approvals grants revoke reset snooze unsnooze pause resume notify-test telegram-chats mcp-tools mcp log metrics init man fleet completions help" -f -a "reset" -d 'Clear a tripped task\'s failure count, or release an interrupted one-time task, so it runs again'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand help; and not __fish_seen_subcommand_from run daemon check status doctor approve deny approvals grants revoke reset snooze unsnooze pause resume notify-test telegram-chats mcp-tools mcp log metrics init man fleet completions help" -f -a "snooze" -d 'Hold one task back for a while (the file is not touched)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand help; and not __fish_seen_subcommand_from run daemon check status doctor approve deny approvals grants revoke reset snooze unsnooze pause resume notify-test telegram-chats mcp-tools mcp log metrics init man fleet completions help" -f -a "unsnooze" -d 'End a task\'s snooze'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand help; and not __fish_seen_subcommand_from run daemon check status doctor approve deny approvals grants revoke reset snooze unsnooze pause resume notify-test telegram-chats mcp-tools mcp log metrics init man fleet completions help" -f -a "pause" -d 'Pause runs (until resumed, or for a while)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand help; and not __fish_seen_subcommand_from run daemon check status doctor approve deny approvals grants revoke reset snooze unsnooze pause resume notify-test telegram-chats mcp-tools mcp log metrics init man fleet completions help" -f -a "resume" -d 'End a pause'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand help; and not __fish_seen_subcommand_from run daemon check status doctor approve deny approvals grants revoke reset snooze unsnooze pause resume notify-test telegram-chats mcp-tools mcp log metrics init man fleet completions help" -f -a "notify-test" -d 'Send a test message to every configured channel (Telegram chats included), or one'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand help; and not __fish_seen_subcommand_from run daemon check status doctor approve deny approvals grants revoke reset snooze unsnooze pause resume notify-test telegram-chats mcp-tools mcp log metrics init man fleet completions help" -f -a "telegram-chats" -d 'List the chats that recently wrote to the bot, with their ids (for telegram.chat_ids)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand help; and not __fish_seen_subcommand_from run daemon check status doctor approve deny approvals grants revoke reset snooze unsnooze pause resume notify-test telegram-chats mcp-tools mcp log metrics init man fleet completions help" -f -a "mcp-tools" -d 'List the tools the configured MCP servers offer (starts each server)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand help; and not __fish_seen_subcommand_from run daemon check status doctor approve deny approvals grants revoke reset snooze unsnooze pause resume notify-test telegram-chats mcp-tools mcp log metrics init man fleet completions help" -f -a "mcp" -d 'Serve MCP on stdin/stdout for agents: read the check-list, propose tasks; a person decides'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand help; and not __fish_seen_subcommand_from run daemon check status doctor approve deny approvals grants revoke reset snooze unsnooze pause resume notify-test telegram-chats mcp-tools mcp log metrics init man fleet completions help" -f -a "log" -d 'Show the audit log, filtered; human-readable unless --json'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand help; and not __fish_seen_subcommand_from run daemon check status doctor approve deny approvals grants revoke reset snooze unsnooze pause resume notify-test telegram-chats mcp-tools mcp log metrics init man fleet completions help" -f -a "metrics" -d 'Print Prometheus metrics (text format 0.0.4) computed from the state dir'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand help; and not __fish_seen_subcommand_from run daemon check status doctor approve deny approvals grants revoke reset snooze unsnooze pause resume notify-test telegram-chats mcp-tools mcp log metrics init man fleet completions help" -f -a "init" -d 'Write a commented HEARTBEAT.md and heartbeat.toml to start from (never overwrites)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand help; and not __fish_seen_subcommand_from run daemon check status doctor approve deny approvals grants revoke reset snooze unsnooze pause resume notify-test telegram-chats mcp-tools mcp log metrics init man fleet completions help" -f -a "man" -d 'Print the man page, or install every page where `man` finds them (--install)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand help; and not __fish_seen_subcommand_from run daemon check status doctor approve deny approvals grants revoke reset snooze unsnooze pause resume notify-test telegram-chats mcp-tools mcp log metrics init man fleet completions help" -f -a "fleet" -d 'Fleet mode: several hosts sharing one PostgreSQL'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand help; and not __fish_seen_subcommand_from run daemon check status doctor approve deny approvals grants revoke reset snooze unsnooze pause resume notify-test telegram-chats mcp-tools mcp log metrics init man fleet completions help" -f -a "completions" -d 'Print a shell completion script'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand help; and not __fish_seen_subcommand_from run daemon check status doctor approve deny approvals grants revoke reset snooze unsnooze pause resume notify-test telegram-chats mcp-tools mcp log metrics init man fleet completions help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c heartbeat -n "__fish_heartbeat_using_subcommand help; and __fish_seen_subcommand_from fleet" -f -a "forget" -d 'Free a node\'s name (a node that is gone for good), so another state dir may take it'
