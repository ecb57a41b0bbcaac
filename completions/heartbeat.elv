
use builtin;
use str;

set edit:completion:arg-completer[heartbeat] = {|@words|
    fn spaces {|n|
        builtin:repeat $n ' ' | str:join ''
    }
    fn cand {|text desc|
        edit:complex-candidate $text &display=$text' '(spaces (- 14 (wcswidth $text)))$desc
    }
    var command = 'heartbeat'
    for word $words[1..-1] {
        if (str:has-prefix $word '-') {
            break
        }
        set command = $command';'$word
    }
    var completions = [
        &'heartbeat'= {
            cand --config 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)'
            cand --state-dir 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock'
            cand --now 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone'
            cand -v 'Diagnostics on stderr (-vv for more)'
            cand --verbose 'Diagnostics on stderr (-vv for more)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
            cand run 'Run the due tasks once (for cron and systemd timers)'
            cand daemon 'Stay up: tick every interval, answer Telegram buttons and commands'
            cand check 'Validate the config and files; list tasks, what would happen now and when they are due'
            cand status 'Last run, pause, pending approvals, spend, tripped tasks, outbox and the run lock'
            cand doctor 'Is anything wrong or missed? Read-only checks of the scheduler, runs, lock, tasks, approvals, delivery, files, clock and state dir'
            cand approve 'Approve pending approvals (by id, all, or one by one on a terminal) and run them'
            cand deny 'Deny pending approvals'
            cand approvals 'List approvals'
            cand grants 'List the always-grants (tasks that run without asking)'
            cand revoke 'Remove the always-grant of a task'
            cand reset 'Clear a tripped task''s failure count, or release an interrupted one-time task, so it runs again'
            cand snooze 'Hold one task back for a while (the file is not touched)'
            cand unsnooze 'End a task''s snooze'
            cand pause 'Pause runs (until resumed, or for a while)'
            cand resume 'End a pause'
            cand notify-test 'Send a test message to every configured channel (Telegram chats included), or one'
            cand telegram-chats 'List the chats that recently wrote to the bot, with their ids (for telegram.chat_ids)'
            cand mcp-tools 'List the tools the configured MCP servers offer (starts each server)'
            cand mcp 'Serve MCP on stdin/stdout for agents: read the check-list, propose tasks; a person decides'
            cand log 'Show the audit log, filtered; human-readable unless --json'
            cand metrics 'Print Prometheus metrics (text format 0.0.4) computed from the state dir'
            cand init 'Write a commented HEARTBEAT.md and heartbeat.toml to start from (never overwrites)'
            cand man 'Print the man page, or install every page where `man` finds them (--install)'
            cand fleet 'Fleet mode: several hosts sharing one PostgreSQL'
            cand completions 'Print a shell completion script'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'heartbeat;run'= {
            cand --task 'Run only this task, now, whatever its schedule or cooldown say (repeatable; implies --once): its id or a unique prefix of it, or FILE:LINE (any line of the item)'
            cand --file 'HEARTBEAT.md to use instead of the config''s `files` (repeatable)'
            cand --autonomy 'Override the configured autonomy for this run'
            cand --config 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)'
            cand --state-dir 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock'
            cand --now 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone'
            cand --once 'Run once and exit (the daemon is `heartbeat daemon`)'
            cand --allow-missing 'A missing HEARTBEAT.md counts as empty instead of an error'
            cand --force 'Run even outside active hours or while paused'
            cand --dry-run 'Decide and print the plan; run, queue and write nothing'
            cand --json 'Print one JSON document'
            cand -q 'Print only failures and errors'
            cand --quiet 'Print only failures and errors'
            cand -v 'Diagnostics on stderr (-vv for more)'
            cand --verbose 'Diagnostics on stderr (-vv for more)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'heartbeat;daemon'= {
            cand --every 'Tick interval (default: daemon.every, 30m); ticks align to multiples of it'
            cand --file 'HEARTBEAT.md to use instead of the config''s `files` (repeatable)'
            cand --config 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)'
            cand --state-dir 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock'
            cand --now 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone'
            cand --allow-missing 'A missing HEARTBEAT.md counts as empty instead of an error'
            cand -v 'Diagnostics on stderr (-vv for more)'
            cand --verbose 'Diagnostics on stderr (-vv for more)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'heartbeat;check'= {
            cand --file 'HEARTBEAT.md to use instead of the config''s `files` (repeatable)'
            cand --config 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)'
            cand --state-dir 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock'
            cand --now 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone'
            cand --allow-missing 'A missing HEARTBEAT.md counts as empty instead of an error'
            cand --json 'Print one JSON document'
            cand -v 'Diagnostics on stderr (-vv for more)'
            cand --verbose 'Diagnostics on stderr (-vv for more)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'heartbeat;status'= {
            cand --config 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)'
            cand --state-dir 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock'
            cand --now 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone'
            cand --json 'Print one JSON document'
            cand -v 'Diagnostics on stderr (-vv for more)'
            cand --verbose 'Diagnostics on stderr (-vv for more)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'heartbeat;doctor'= {
            cand --since 'The window looked at: a duration back from now (`7d`, `12h`), `today`, `yesterday`, or a time'
            cand --config 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)'
            cand --state-dir 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock'
            cand --now 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone'
            cand --deep 'Also start each configured MCP server and list its tools'
            cand --json 'Print one JSON document'
            cand -v 'Diagnostics on stderr (-vv for more)'
            cand --verbose 'Diagnostics on stderr (-vv for more)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'heartbeat;approve'= {
            cand --config 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)'
            cand --state-dir 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock'
            cand --now 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone'
            cand --all 'Approve every pending approval (on a terminal: shown first, asked once)'
            cand --yes 'With --all: do not ask'
            cand --always 'Also grant these exact tasks from now on: later runs do not ask again'
            cand --later 'Do not run now: the next run runs them'
            cand -v 'Diagnostics on stderr (-vv for more)'
            cand --verbose 'Diagnostics on stderr (-vv for more)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'heartbeat;deny'= {
            cand --reason 'Why (recorded and shown)'
            cand --config 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)'
            cand --state-dir 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock'
            cand --now 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone'
            cand --all 'Deny every pending approval'
            cand -v 'Diagnostics on stderr (-vv for more)'
            cand --verbose 'Diagnostics on stderr (-vv for more)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'heartbeat;approvals'= {
            cand --state 'Which approvals to list'
            cand --config 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)'
            cand --state-dir 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock'
            cand --now 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone'
            cand --json 'Print one JSON document'
            cand -v 'Diagnostics on stderr (-vv for more)'
            cand --verbose 'Diagnostics on stderr (-vv for more)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'heartbeat;grants'= {
            cand --config 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)'
            cand --state-dir 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock'
            cand --now 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone'
            cand --json 'Print one JSON document'
            cand -v 'Diagnostics on stderr (-vv for more)'
            cand --verbose 'Diagnostics on stderr (-vv for more)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'heartbeat;revoke'= {
            cand --config 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)'
            cand --state-dir 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock'
            cand --now 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone'
            cand -v 'Diagnostics on stderr (-vv for more)'
            cand --verbose 'Diagnostics on stderr (-vv for more)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'heartbeat;reset'= {
            cand --config 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)'
            cand --state-dir 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock'
            cand --now 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone'
            cand -v 'Diagnostics on stderr (-vv for more)'
            cand --verbose 'Diagnostics on stderr (-vv for more)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'heartbeat;snooze'= {
            cand --for 'Snooze it for this long (`2h`, `3d`)'
            cand --until 'Snooze it until this time: RFC 3339, or a local `2026-12-07 09:00` in the configured zone'
            cand --reason 'Why (recorded and shown)'
            cand --config 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)'
            cand --state-dir 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock'
            cand --now 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone'
            cand -v 'Diagnostics on stderr (-vv for more)'
            cand --verbose 'Diagnostics on stderr (-vv for more)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'heartbeat;unsnooze'= {
            cand --config 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)'
            cand --state-dir 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock'
            cand --now 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone'
            cand -v 'Diagnostics on stderr (-vv for more)'
            cand --verbose 'Diagnostics on stderr (-vv for more)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'heartbeat;pause'= {
            cand --for 'End the pause by itself after this long (default: until `heartbeat resume`)'
            cand --reason 'Why (recorded and shown)'
            cand --config 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)'
            cand --state-dir 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock'
            cand --now 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone'
            cand -v 'Diagnostics on stderr (-vv for more)'
            cand --verbose 'Diagnostics on stderr (-vv for more)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'heartbeat;resume'= {
            cand --config 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)'
            cand --state-dir 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock'
            cand --now 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone'
            cand -v 'Diagnostics on stderr (-vv for more)'
            cand --verbose 'Diagnostics on stderr (-vv for more)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'heartbeat;notify-test'= {
            cand --channel 'Only this channel (`telegram`, or a [channels.NAME] name)'
            cand --config 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)'
            cand --state-dir 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock'
            cand --now 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone'
            cand -v 'Diagnostics on stderr (-vv for more)'
            cand --verbose 'Diagnostics on stderr (-vv for more)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'heartbeat;telegram-chats'= {
            cand --config 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)'
            cand --state-dir 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock'
            cand --now 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone'
            cand --json 'Print one JSON document'
            cand -v 'Diagnostics on stderr (-vv for more)'
            cand --verbose 'Diagnostics on stderr (-vv for more)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'heartbeat;mcp-tools'= {
            cand --config 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)'
            cand --state-dir 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock'
            cand --now 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone'
            cand --json 'Print one JSON document'
            cand -v 'Diagnostics on stderr (-vv for more)'
            cand --verbose 'Diagnostics on stderr (-vv for more)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'heartbeat;mcp'= {
            cand --config 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)'
            cand --state-dir 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock'
            cand --now 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone'
            cand -v 'Diagnostics on stderr (-vv for more)'
            cand --verbose 'Diagnostics on stderr (-vv for more)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'heartbeat;log'= {
            cand --since 'Only lines at or after this: a duration back from now (`2h`, `1d`), `today`, `yesterday`, an RFC 3339 time, or a local `2026-12-07T02:00` or `2026-12-07`'
            cand --event 'Only this event (repeatable), e.g. task_failed'
            cand --task 'Only lines about this task id (or its first 4 or more hex digits)'
            cand --run 'Only lines of this run id'
            cand -n 'Only the last N matching lines'
            cand --lines 'Only the last N matching lines'
            cand --config 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)'
            cand --state-dir 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock'
            cand --now 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone'
            cand --json 'Print the matching lines as they are (JSON Lines)'
            cand -f 'Keep printing lines as they are appended (from the end, unless --since or -n is given)'
            cand --follow 'Keep printing lines as they are appended (from the end, unless --since or -n is given)'
            cand --all 'Also show runs that did nothing (hidden by default)'
            cand -v 'Diagnostics on stderr (-vv for more)'
            cand --verbose 'Diagnostics on stderr (-vv for more)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'heartbeat;metrics'= {
            cand --config 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)'
            cand --state-dir 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock'
            cand --now 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone'
            cand -v 'Diagnostics on stderr (-vv for more)'
            cand --verbose 'Diagnostics on stderr (-vv for more)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'heartbeat;init'= {
            cand --config 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)'
            cand --state-dir 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock'
            cand --now 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone'
            cand -v 'Diagnostics on stderr (-vv for more)'
            cand --verbose 'Diagnostics on stderr (-vv for more)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'heartbeat;man'= {
            cand --dir 'Where --install writes the pages (default: ~/.local/share/man/man1)'
            cand --config 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)'
            cand --state-dir 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock'
            cand --now 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone'
            cand --install 'Write heartbeat.1 and a page per subcommand into the directory `man` searches for your own installs, so that `man heartbeat` works'
            cand -v 'Diagnostics on stderr (-vv for more)'
            cand --verbose 'Diagnostics on stderr (-vv for more)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'heartbeat;fleet'= {
            cand --config 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)'
            cand --state-dir 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock'
            cand --now 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone'
            cand -v 'Diagnostics on stderr (-vv for more)'
            cand --verbose 'Diagnostics on stderr (-vv for more)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
            cand forget 'Free a node''s name (a node that is gone for good), so another state dir may take it'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'heartbeat;fleet;forget'= {
            cand --config 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)'
            cand --state-dir 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock'
            cand --now 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone'
            cand -v 'Diagnostics on stderr (-vv for more)'
            cand --verbose 'Diagnostics on stderr (-vv for more)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'heartbeat;fleet;help'= {
            cand forget 'Free a node''s name (a node that is gone for good), so another state dir may take it'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'heartbeat;fleet;help;forget'= {
        }
        &'heartbeat;fleet;help;help'= {
        }
        &'heartbeat;completions'= {
            cand --config 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)'
            cand --state-dir 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock'
            cand --now 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone'
            cand -v 'Diagnostics on stderr (-vv for more)'
            cand --verbose 'Diagnostics on stderr (-vv for more)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'heartbeat;help'= {
            cand run 'Run the due tasks once (for cron and systemd timers)'
            cand daemon 'Stay up: tick every interval, answer Telegram buttons and commands'
            cand check 'Validate the config and files; list tasks, what would happen now and when they are due'
            cand status 'Last run, pause, pending approvals, spend, tripped tasks, outbox and the run lock'
            cand doctor 'Is anything wrong or missed? Read-only checks of the scheduler, runs, lock, tasks, approvals, delivery, files, clock and state dir'
            cand approve 'Approve pending approvals (by id, all, or one by one on a terminal) and run them'
            cand deny 'Deny pending approvals'
            cand approvals 'List approvals'
            cand grants 'List the always-grants (tasks that run without asking)'
            cand revoke 'Remove the always-grant of a task'
            cand reset 'Clear a tripped task''s failure count, or release an interrupted one-time task, so it runs again'
            cand snooze 'Hold one task back for a while (the file is not touched)'
            cand unsnooze 'End a task''s snooze'
            cand pause 'Pause runs (until resumed, or for a while)'
            cand resume 'End a pause'
            cand notify-test 'Send a test message to every configured channel (Telegram chats included), or one'
            cand telegram-chats 'List the chats that recently wrote to the bot, with their ids (for telegram.chat_ids)'
            cand mcp-tools 'List the tools the configured MCP servers offer (starts each server)'
            cand mcp 'Serve MCP on stdin/stdout for agents: read the check-list, propose tasks; a person decides'
            cand log 'Show the audit log, filtered; human-readable unless --json'
            cand metrics 'Print Prometheus metrics (text format 0.0.4) computed from the state dir'
            cand init 'Write a commented HEARTBEAT.md and heartbeat.toml to start from (never overwrites)'
            cand man 'Print the man page, or install every page where `man` finds them (--install)'
            cand fleet 'Fleet mode: several hosts sharing one PostgreSQL'
            cand completions 'Print a shell completion script'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'heartbeat;help;run'= {
        }
        &'heartbeat;help;daemon'= {
        }
        &'heartbeat;help;check'= {
        }
        &'heartbeat;help;status'= {
        }
        &'heartbeat;help;doctor'= {
        }
        &'heartbeat;help;approve'= {
        }
        &'heartbeat;help;deny'= {
        }
        &'heartbeat;help;approvals'= {
        }
        &'heartbeat;help;grants'= {
        }
        &'heartbeat;help;revoke'= {
        }
        &'heartbeat;help;reset'= {
        }
        &'heartbeat;help;snooze'= {
        }
        &'heartbeat;help;unsnooze'= {
        }
        &'heartbeat;help;pause'= {
        }
        &'heartbeat;help;resume'= {
        }
        &'heartbeat;help;notify-test'= {
        }
        &'heartbeat;help;telegram-chats'= {
        }
        &'heartbeat;help;mcp-tools'= {
        }
        &'heartbeat;help;mcp'= {
        }
        &'heartbeat;help;log'= {
        }
        &'heartbeat;help;metrics'= {
        }
        &'heartbeat;help;init'= {
        }
        &'heartbeat;help;man'= {
        }
        &'heartbeat;help;fleet'= {
            cand forget 'Free a node''s name (a node that is gone for good), so another state dir may take it'
        }
        &'heartbeat;help;fleet;forget'= {
        }
        &'heartbeat;help;completions'= {
        }
        &'heartbeat;help;help'= {
        }
    ]
    $completions[$command]
}
