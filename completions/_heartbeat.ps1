
using namespace System.Management.Automation
using namespace System.Management.Automation.Language

Register-ArgumentCompleter -Native -CommandName 'heartbeat' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)

    $commandElements = $commandAst.CommandElements
    $command = @(
        'heartbeat'
        for ($i = 1; $i -lt $commandElements.Count; $i++) {
            $element = $commandElements[$i]
            if ($element -isnot [StringConstantExpressionAst] -or
                $element.StringConstantType -ne [StringConstantType]::BareWord -or
                $element.Value.StartsWith('-') -or
                $element.Value -eq $wordToComplete) {
                break
        }
        $element.Value
    }) -join ';'

    $completions = @(switch ($command) {
        'heartbeat' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock')
            [CompletionResult]::new('--now', '--now', [CompletionResultType]::ParameterName, 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('run', 'run', [CompletionResultType]::ParameterValue, 'Run the due tasks once (for cron and systemd timers)')
            [CompletionResult]::new('daemon', 'daemon', [CompletionResultType]::ParameterValue, 'Stay up: tick every interval, answer Telegram buttons and commands')
            [CompletionResult]::new('check', 'check', [CompletionResultType]::ParameterValue, 'Validate the config and files; list tasks, what would happen now and when they are due')
            [CompletionResult]::new('status', 'status', [CompletionResultType]::ParameterValue, 'Last run, pause, pending approvals, spend, tripped tasks, outbox and the run lock')
            [CompletionResult]::new('doctor', 'doctor', [CompletionResultType]::ParameterValue, 'Is anything wrong or missed? Read-only checks of the scheduler, runs, lock, tasks, approvals, delivery, files, clock and state dir')
            [CompletionResult]::new('approve', 'approve', [CompletionResultType]::ParameterValue, 'Approve pending approvals (by id, all, or one by one on a terminal) and run them')
            [CompletionResult]::new('deny', 'deny', [CompletionResultType]::ParameterValue, 'Deny pending approvals')
            [CompletionResult]::new('approvals', 'approvals', [CompletionResultType]::ParameterValue, 'List approvals')
            [CompletionResult]::new('grants', 'grants', [CompletionResultType]::ParameterValue, 'List the always-grants (tasks that run without asking)')
            [CompletionResult]::new('revoke', 'revoke', [CompletionResultType]::ParameterValue, 'Remove the always-grant of a task')
            [CompletionResult]::new('reset', 'reset', [CompletionResultType]::ParameterValue, 'Clear a tripped task''s failure count, or release an interrupted one-time task, so it runs again')
            [CompletionResult]::new('snooze', 'snooze', [CompletionResultType]::ParameterValue, 'Hold one task back for a while (the file is not touched)')
            [CompletionResult]::new('unsnooze', 'unsnooze', [CompletionResultType]::ParameterValue, 'End a task''s snooze')
            [CompletionResult]::new('pause', 'pause', [CompletionResultType]::ParameterValue, 'Pause runs (until resumed, or for a while)')
            [CompletionResult]::new('resume', 'resume', [CompletionResultType]::ParameterValue, 'End a pause')
            [CompletionResult]::new('notify-test', 'notify-test', [CompletionResultType]::ParameterValue, 'Send a test message to every configured channel (Telegram chats included), or one')
            [CompletionResult]::new('telegram-chats', 'telegram-chats', [CompletionResultType]::ParameterValue, 'List the chats that recently wrote to the bot, with their ids (for telegram.chat_ids)')
            [CompletionResult]::new('mcp-tools', 'mcp-tools', [CompletionResultType]::ParameterValue, 'List the tools the configured MCP servers offer (starts each server)')
            [CompletionResult]::new('mcp', 'mcp', [CompletionResultType]::ParameterValue, 'Serve MCP on stdin/stdout for agents: read the check-list, propose tasks; a person decides')
            [CompletionResult]::new('log', 'log', [CompletionResultType]::ParameterValue, 'Show the audit log, filtered; human-readable unless --json')
            [CompletionResult]::new('metrics', 'metrics', [CompletionResultType]::ParameterValue, 'Print Prometheus metrics (text format 0.0.4) computed from the state dir')
            [CompletionResult]::new('init', 'init', [CompletionResultType]::ParameterValue, 'Write a commented HEARTBEAT.md and heartbeat.toml to start from (never overwrites)')
            [CompletionResult]::new('man', 'man', [CompletionResultType]::ParameterValue, 'Print the man page, or install every page where `man` finds them (--install)')
            [CompletionResult]::new('fleet', 'fleet', [CompletionResultType]::ParameterValue, 'Fleet mode: several hosts sharing one PostgreSQL')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'Print a shell completion script')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'heartbeat;run' {
            [CompletionResult]::new('--task', '--task', [CompletionResultType]::ParameterName, 'Run only this task, now, whatever its schedule or cooldown say (repeatable; implies --once): its id or a unique prefix of it, or FILE:LINE (any line of the item)')
            [CompletionResult]::new('--file', '--file', [CompletionResultType]::ParameterName, 'HEARTBEAT.md to use instead of the config''s `files` (repeatable)')
            [CompletionResult]::new('--autonomy', '--autonomy', [CompletionResultType]::ParameterName, 'Override the configured autonomy for this run')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock')
            [CompletionResult]::new('--now', '--now', [CompletionResultType]::ParameterName, 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone')
            [CompletionResult]::new('--once', '--once', [CompletionResultType]::ParameterName, 'Run once and exit (the daemon is `heartbeat daemon`)')
            [CompletionResult]::new('--allow-missing', '--allow-missing', [CompletionResultType]::ParameterName, 'A missing HEARTBEAT.md counts as empty instead of an error')
            [CompletionResult]::new('--force', '--force', [CompletionResultType]::ParameterName, 'Run even outside active hours or while paused')
            [CompletionResult]::new('--dry-run', '--dry-run', [CompletionResultType]::ParameterName, 'Decide and print the plan; run, queue and write nothing')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON document')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only failures and errors')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only failures and errors')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'heartbeat;daemon' {
            [CompletionResult]::new('--every', '--every', [CompletionResultType]::ParameterName, 'Tick interval (default: daemon.every, 30m); ticks align to multiples of it')
            [CompletionResult]::new('--file', '--file', [CompletionResultType]::ParameterName, 'HEARTBEAT.md to use instead of the config''s `files` (repeatable)')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock')
            [CompletionResult]::new('--now', '--now', [CompletionResultType]::ParameterName, 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone')
            [CompletionResult]::new('--allow-missing', '--allow-missing', [CompletionResultType]::ParameterName, 'A missing HEARTBEAT.md counts as empty instead of an error')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'heartbeat;check' {
            [CompletionResult]::new('--file', '--file', [CompletionResultType]::ParameterName, 'HEARTBEAT.md to use instead of the config''s `files` (repeatable)')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock')
            [CompletionResult]::new('--now', '--now', [CompletionResultType]::ParameterName, 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone')
            [CompletionResult]::new('--allow-missing', '--allow-missing', [CompletionResultType]::ParameterName, 'A missing HEARTBEAT.md counts as empty instead of an error')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON document')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'heartbeat;status' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock')
            [CompletionResult]::new('--now', '--now', [CompletionResultType]::ParameterName, 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON document')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'heartbeat;doctor' {
            [CompletionResult]::new('--since', '--since', [CompletionResultType]::ParameterName, 'The window looked at: a duration back from now (`7d`, `12h`), `today`, `yesterday`, or a time')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock')
            [CompletionResult]::new('--now', '--now', [CompletionResultType]::ParameterName, 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone')
            [CompletionResult]::new('--deep', '--deep', [CompletionResultType]::ParameterName, 'Also start each configured MCP server and list its tools')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON document')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'heartbeat;approve' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock')
            [CompletionResult]::new('--now', '--now', [CompletionResultType]::ParameterName, 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone')
            [CompletionResult]::new('--all', '--all', [CompletionResultType]::ParameterName, 'Approve every pending approval (on a terminal: shown first, asked once)')
            [CompletionResult]::new('--yes', '--yes', [CompletionResultType]::ParameterName, 'With --all: do not ask')
            [CompletionResult]::new('--always', '--always', [CompletionResultType]::ParameterName, 'Also grant these exact tasks from now on: later runs do not ask again')
            [CompletionResult]::new('--later', '--later', [CompletionResultType]::ParameterName, 'Do not run now: the next run runs them')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'heartbeat;deny' {
            [CompletionResult]::new('--reason', '--reason', [CompletionResultType]::ParameterName, 'Why (recorded and shown)')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock')
            [CompletionResult]::new('--now', '--now', [CompletionResultType]::ParameterName, 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone')
            [CompletionResult]::new('--all', '--all', [CompletionResultType]::ParameterName, 'Deny every pending approval')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'heartbeat;approvals' {
            [CompletionResult]::new('--state', '--state', [CompletionResultType]::ParameterName, 'Which approvals to list')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock')
            [CompletionResult]::new('--now', '--now', [CompletionResultType]::ParameterName, 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON document')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'heartbeat;grants' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock')
            [CompletionResult]::new('--now', '--now', [CompletionResultType]::ParameterName, 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON document')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'heartbeat;revoke' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock')
            [CompletionResult]::new('--now', '--now', [CompletionResultType]::ParameterName, 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'heartbeat;reset' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock')
            [CompletionResult]::new('--now', '--now', [CompletionResultType]::ParameterName, 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'heartbeat;snooze' {
            [CompletionResult]::new('--for', '--for', [CompletionResultType]::ParameterName, 'Snooze it for this long (`2h`, `3d`)')
            [CompletionResult]::new('--until', '--until', [CompletionResultType]::ParameterName, 'Snooze it until this time: RFC 3339, or a local `2026-12-07 09:00` in the configured zone')
            [CompletionResult]::new('--reason', '--reason', [CompletionResultType]::ParameterName, 'Why (recorded and shown)')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock')
            [CompletionResult]::new('--now', '--now', [CompletionResultType]::ParameterName, 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'heartbeat;unsnooze' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock')
            [CompletionResult]::new('--now', '--now', [CompletionResultType]::ParameterName, 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'heartbeat;pause' {
            [CompletionResult]::new('--for', '--for', [CompletionResultType]::ParameterName, 'End the pause by itself after this long (default: until `heartbeat resume`)')
            [CompletionResult]::new('--reason', '--reason', [CompletionResultType]::ParameterName, 'Why (recorded and shown)')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock')
            [CompletionResult]::new('--now', '--now', [CompletionResultType]::ParameterName, 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'heartbeat;resume' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock')
            [CompletionResult]::new('--now', '--now', [CompletionResultType]::ParameterName, 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'heartbeat;notify-test' {
            [CompletionResult]::new('--channel', '--channel', [CompletionResultType]::ParameterName, 'Only this channel (`telegram`, or a [channels.NAME] name)')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock')
            [CompletionResult]::new('--now', '--now', [CompletionResultType]::ParameterName, 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'heartbeat;telegram-chats' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock')
            [CompletionResult]::new('--now', '--now', [CompletionResultType]::ParameterName, 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON document')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'heartbeat;mcp-tools' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock')
            [CompletionResult]::new('--now', '--now', [CompletionResultType]::ParameterName, 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON document')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'heartbeat;mcp' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock')
            [CompletionResult]::new('--now', '--now', [CompletionResultType]::ParameterName, 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'heartbeat;log' {
            [CompletionResult]::new('--since', '--since', [CompletionResultType]::ParameterName, 'Only lines at or after this: a duration back from now (`2h`, `1d`), `today`, `yesterday`, an RFC 3339 time, or a local `2026-12-07T02:00` or `2026-12-07`')
            [CompletionResult]::new('--event', '--event', [CompletionResultType]::ParameterName, 'Only this event (repeatable), e.g. task_failed')
            [CompletionResult]::new('--task', '--task', [CompletionResultType]::ParameterName, 'Only lines about this task id (or its first 4 or more hex digits)')
            [CompletionResult]::new('--run', '--run', [CompletionResultType]::ParameterName, 'Only lines of this run id')
            [CompletionResult]::new('-n', '-n', [CompletionResultType]::ParameterName, 'Only the last N matching lines')
            [CompletionResult]::new('--lines', '--lines', [CompletionResultType]::ParameterName, 'Only the last N matching lines')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock')
            [CompletionResult]::new('--now', '--now', [CompletionResultType]::ParameterName, 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print the matching lines as they are (JSON Lines)')
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'Keep printing lines as they are appended (from the end, unless --since or -n is given)')
            [CompletionResult]::new('--follow', '--follow', [CompletionResultType]::ParameterName, 'Keep printing lines as they are appended (from the end, unless --since or -n is given)')
            [CompletionResult]::new('--all', '--all', [CompletionResultType]::ParameterName, 'Also show runs that did nothing (hidden by default)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'heartbeat;metrics' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock')
            [CompletionResult]::new('--now', '--now', [CompletionResultType]::ParameterName, 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'heartbeat;init' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock')
            [CompletionResult]::new('--now', '--now', [CompletionResultType]::ParameterName, 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'heartbeat;man' {
            [CompletionResult]::new('--dir', '--dir', [CompletionResultType]::ParameterName, 'Where --install writes the pages (default: ~/.local/share/man/man1)')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock')
            [CompletionResult]::new('--now', '--now', [CompletionResultType]::ParameterName, 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone')
            [CompletionResult]::new('--install', '--install', [CompletionResultType]::ParameterName, 'Write heartbeat.1 and a page per subcommand into the directory `man` searches for your own installs, so that `man heartbeat` works')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'heartbeat;fleet' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock')
            [CompletionResult]::new('--now', '--now', [CompletionResultType]::ParameterName, 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('forget', 'forget', [CompletionResultType]::ParameterValue, 'Free a node''s name (a node that is gone for good), so another state dir may take it')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'heartbeat;fleet;forget' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock')
            [CompletionResult]::new('--now', '--now', [CompletionResultType]::ParameterName, 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'heartbeat;fleet;help' {
            [CompletionResult]::new('forget', 'forget', [CompletionResultType]::ParameterValue, 'Free a node''s name (a node that is gone for good), so another state dir may take it')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'heartbeat;fleet;help;forget' {
            break
        }
        'heartbeat;fleet;help;help' {
            break
        }
        'heartbeat;completions' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md, then the platform config dir)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Directory for heartbeat.db, audit.jsonl and heartbeat.lock')
            [CompletionResult]::new('--now', '--now', [CompletionResultType]::ParameterName, 'Act as if it were this time, for decisions and records: RFC 3339, or a local 2026-12-07T02:00 or 2026-12-07 in the configured zone')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Diagnostics on stderr (-vv for more)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'heartbeat;help' {
            [CompletionResult]::new('run', 'run', [CompletionResultType]::ParameterValue, 'Run the due tasks once (for cron and systemd timers)')
            [CompletionResult]::new('daemon', 'daemon', [CompletionResultType]::ParameterValue, 'Stay up: tick every interval, answer Telegram buttons and commands')
            [CompletionResult]::new('check', 'check', [CompletionResultType]::ParameterValue, 'Validate the config and files; list tasks, what would happen now and when they are due')
            [CompletionResult]::new('status', 'status', [CompletionResultType]::ParameterValue, 'Last run, pause, pending approvals, spend, tripped tasks, outbox and the run lock')
            [CompletionResult]::new('doctor', 'doctor', [CompletionResultType]::ParameterValue, 'Is anything wrong or missed? Read-only checks of the scheduler, runs, lock, tasks, approvals, delivery, files, clock and state dir')
            [CompletionResult]::new('approve', 'approve', [CompletionResultType]::ParameterValue, 'Approve pending approvals (by id, all, or one by one on a terminal) and run them')
            [CompletionResult]::new('deny', 'deny', [CompletionResultType]::ParameterValue, 'Deny pending approvals')
            [CompletionResult]::new('approvals', 'approvals', [CompletionResultType]::ParameterValue, 'List approvals')
            [CompletionResult]::new('grants', 'grants', [CompletionResultType]::ParameterValue, 'List the always-grants (tasks that run without asking)')
            [CompletionResult]::new('revoke', 'revoke', [CompletionResultType]::ParameterValue, 'Remove the always-grant of a task')
            [CompletionResult]::new('reset', 'reset', [CompletionResultType]::ParameterValue, 'Clear a tripped task''s failure count, or release an interrupted one-time task, so it runs again')
            [CompletionResult]::new('snooze', 'snooze', [CompletionResultType]::ParameterValue, 'Hold one task back for a while (the file is not touched)')
            [CompletionResult]::new('unsnooze', 'unsnooze', [CompletionResultType]::ParameterValue, 'End a task''s snooze')
            [CompletionResult]::new('pause', 'pause', [CompletionResultType]::ParameterValue, 'Pause runs (until resumed, or for a while)')
            [CompletionResult]::new('resume', 'resume', [CompletionResultType]::ParameterValue, 'End a pause')
            [CompletionResult]::new('notify-test', 'notify-test', [CompletionResultType]::ParameterValue, 'Send a test message to every configured channel (Telegram chats included), or one')
            [CompletionResult]::new('telegram-chats', 'telegram-chats', [CompletionResultType]::ParameterValue, 'List the chats that recently wrote to the bot, with their ids (for telegram.chat_ids)')
            [CompletionResult]::new('mcp-tools', 'mcp-tools', [CompletionResultType]::ParameterValue, 'List the tools the configured MCP servers offer (starts each server)')
            [CompletionResult]::new('mcp', 'mcp', [CompletionResultType]::ParameterValue, 'Serve MCP on stdin/stdout for agents: read the check-list, propose tasks; a person decides')
            [CompletionResult]::new('log', 'log', [CompletionResultType]::ParameterValue, 'Show the audit log, filtered; human-readable unless --json')
            [CompletionResult]::new('metrics', 'metrics', [CompletionResultType]::ParameterValue, 'Print Prometheus metrics (text format 0.0.4) computed from the state dir')
            [CompletionResult]::new('init', 'init', [CompletionResultType]::ParameterValue, 'Write a commented HEARTBEAT.md and heartbeat.toml to start from (never overwrites)')
            [CompletionResult]::new('man', 'man', [CompletionResultType]::ParameterValue, 'Print the man page, or install every page where `man` finds them (--install)')
            [CompletionResult]::new('fleet', 'fleet', [CompletionResultType]::ParameterValue, 'Fleet mode: several hosts sharing one PostgreSQL')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'Print a shell completion script')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'heartbeat;help;run' {
            break
        }
        'heartbeat;help;daemon' {
            break
        }
        'heartbeat;help;check' {
            break
        }
        'heartbeat;help;status' {
            break
        }
        'heartbeat;help;doctor' {
            break
        }
        'heartbeat;help;approve' {
            break
        }
        'heartbeat;help;deny' {
            break
        }
        'heartbeat;help;approvals' {
            break
        }
        'heartbeat;help;grants' {
            break
        }
        'heartbeat;help;revoke' {
            break
        }
        'heartbeat;help;reset' {
            break
        }
        'heartbeat;help;snooze' {
            break
        }
        'heartbeat;help;unsnooze' {
            break
        }
        'heartbeat;help;pause' {
            break
        }
        'heartbeat;help;resume' {
            break
        }
        'heartbeat;help;notify-test' {
            break
        }
        'heartbeat;help;telegram-chats' {
            break
        }
        'heartbeat;help;mcp-tools' {
            break
        }
        'heartbeat;help;mcp' {
            break
        }
        'heartbeat;help;log' {
            break
        }
        'heartbeat;help;metrics' {
            break
        }
        'heartbeat;help;init' {
            break
        }
        'heartbeat;help;man' {
            break
        }
        'heartbeat;help;fleet' {
            [CompletionResult]::new('forget', 'forget', [CompletionResultType]::ParameterValue, 'Free a node''s name (a node that is gone for good), so another state dir may take it')
            break
        }
        'heartbeat;help;fleet;forget' {
            break
        }
        'heartbeat;help;completions' {
            break
        }
        'heartbeat;help;help' {
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}
