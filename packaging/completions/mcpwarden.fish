# fish completion for mcpwarden(1)
set -l cmds run status logs ps inspect reap clients wrap unwrap uninstall config journal export audit drill demo bench broker version help
complete -c mcpwarden -f
complete -c mcpwarden -n "not __fish_seen_subcommand_from $cmds" -l help -d 'Show help'
complete -c mcpwarden -n "not __fish_seen_subcommand_from $cmds" -l version -d 'Version and build options'
complete -c mcpwarden -n "not __fish_seen_subcommand_from $cmds" -a run -d 'Run an MCP stdio server under supervision'
complete -c mcpwarden -n "not __fish_seen_subcommand_from $cmds" -a ps -d 'List MCP servers or every process'
complete -c mcpwarden -n "not __fish_seen_subcommand_from $cmds" -a inspect -d 'Incident record of one process'
complete -c mcpwarden -n "not __fish_seen_subcommand_from $cmds" -a reap -d 'Remove trees other clients left behind'
complete -c mcpwarden -n "not __fish_seen_subcommand_from $cmds" -a clients -d 'List MCP clients and their servers'
complete -c mcpwarden -n "not __fish_seen_subcommand_from $cmds" -a wrap -d 'Route configured servers through mcpwarden run'
complete -c mcpwarden -n "not __fish_seen_subcommand_from $cmds" -a unwrap -d 'Restore wrapped client configs'
complete -c mcpwarden -n "not __fish_seen_subcommand_from $cmds" -a broker -d 'Serve the sessions of run --share'
complete -c mcpwarden -n "not __fish_seen_subcommand_from $cmds" -a status -d 'The sessions running now'
complete -c mcpwarden -n "not __fish_seen_subcommand_from $cmds" -a config -d 'The settings file: values and where from; check it'
complete -c mcpwarden -n "not __fish_seen_subcommand_from $cmds" -a uninstall -d 'Unwrap everything and remove backups'
complete -c mcpwarden -n "not __fish_seen_subcommand_from $cmds" -a journal -d 'Read the journal'
complete -c mcpwarden -n "not __fish_seen_subcommand_from $cmds" -a export -d 'Deliver the journal to OpenTelemetry or syslog'
complete -c mcpwarden -n "__fish_seen_subcommand_from export" -l follow -d 'Keep following the journal'
complete -c mcpwarden -n "__fish_seen_subcommand_from export" -l otlp -x -d 'OTLP/HTTP base URL'
complete -c mcpwarden -n "__fish_seen_subcommand_from export" -l syslog -x -d 'tcp:// or tls://HOST:PORT'
complete -c mcpwarden -n "__fish_seen_subcommand_from export" -l protocol -x -a 'http/protobuf http/json'
complete -c mcpwarden -n "__fish_seen_subcommand_from export" -l headers-file -r -d 'HTTP headers'
complete -c mcpwarden -n "not __fish_seen_subcommand_from $cmds" -a audit -d 'Check the journal integrity'
complete -c mcpwarden -n "not __fish_seen_subcommand_from $cmds" -a drill -d 'Crash drill'
complete -c mcpwarden -n "not __fish_seen_subcommand_from $cmds" -a demo -d 'See what mcpwarden does'
complete -c mcpwarden -n "not __fish_seen_subcommand_from $cmds" -a bench -d 'Measure against the baselines'
complete -c mcpwarden -n "not __fish_seen_subcommand_from $cmds" -a version -d 'Version and build options'
complete -c mcpwarden -n "not __fish_seen_subcommand_from $cmds" -a help -d 'Help of a command'

# run
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l name -x -d 'Display name in the journal'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l eof-grace -x -d 'Time to exit after EOF'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l term-grace -x -d 'Time after SIGTERM'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l isolate -x -a 'auto none cgroup pidns'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l no-journal -d 'Record nothing'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l stdout-guard -x -a 'divert pass fail'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l max-message -x -d 'Largest message classified'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l on-journal-failure -x -a 'warn deny'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l record-args -x -a 'none preview full'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l record-argv -x -a 'redacted full'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l journal-sync -x -a 'periodic always'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l journal-retention -x -d 'Prune older records'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l idle-stop -x -d 'Asleep after this long unused'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l lazy -d 'Start the server only when its catalog cannot answer'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l lazy-max-age -x -d 'With --lazy: a catalog older than this is not used'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l share -d 'Serve this session from the tree every session of the server shares'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l share-linger -x -d 'With --share: how long a tree without clients stays'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l explain -d 'Print the containment layers'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l sandbox -x -a 'off strict workspace'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l allow-read -r -F -d 'Also readable beneath PATH'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l allow-write -r -F -d 'Also writable beneath PATH'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l net -x -a 'none loopback any'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l allow-connect -x -d 'TCP port the server may connect to'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l env-allow -x -d 'Variable passed on'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l require-sandbox -d 'Refuse to start unless fully enforced'
# ps
complete -c mcpwarden -n "__fish_seen_subcommand_from ps" -l mcp -d 'MCP server trees only'
complete -c mcpwarden -n "__fish_seen_subcommand_from ps" -s a -l all -d 'Every process of every user'
complete -c mcpwarden -n "__fish_seen_subcommand_from ps" -l orphans -d 'Only orphaned trees'
complete -c mcpwarden -n "__fish_seen_subcommand_from ps" -l no-journal -d 'Do not read the journal'
complete -c mcpwarden -n "__fish_seen_subcommand_from ps" -l wedged-after -x -d 'Seconds without traffic'
complete -c mcpwarden -n "__fish_seen_subcommand_from ps" -s t -l tree -d 'Indent children'
complete -c mcpwarden -n "__fish_seen_subcommand_from ps" -s w -l wide -d 'Never cut commands'
complete -c mcpwarden -n "__fish_seen_subcommand_from ps" -s p -l pid -x -d 'Only these processes'
complete -c mcpwarden -n "__fish_seen_subcommand_from ps" -l descendants-of -x -d 'Descendants of a pid'
# inspect
complete -c mcpwarden -n "__fish_seen_subcommand_from inspect" -l record -d 'Append a snapshot'
# reap
complete -c mcpwarden -n "__fish_seen_subcommand_from reap" -l orphans -d 'Select logical orphans'
complete -c mcpwarden -n "__fish_seen_subcommand_from reap" -l include-suspects -d 'Orphans named MCP by name alone too'
complete -c mcpwarden -n "__fish_seen_subcommand_from reap" -l session -x -d 'Select a session'
complete -c mcpwarden -n "__fish_seen_subcommand_from reap" -l pid -x -d 'Select a tree'
complete -c mcpwarden -n "__fish_seen_subcommand_from reap" -l older-than -x -d 'Minimum age'
complete -c mcpwarden -n "__fish_seen_subcommand_from reap" -l match -x -d 'Command regex'
complete -c mcpwarden -n "__fish_seen_subcommand_from reap" -l user -x -a '(__fish_complete_users)'
complete -c mcpwarden -n "__fish_seen_subcommand_from reap" -l all-users -d 'Other users too (root)'
complete -c mcpwarden -n "__fish_seen_subcommand_from reap" -l revoke-cmd -x -d 'Hook before any signal'
complete -c mcpwarden -n "__fish_seen_subcommand_from reap" -l revoke-timeout -x -d 'Hook bound'
complete -c mcpwarden -n "__fish_seen_subcommand_from reap" -l force -d 'Go on when the hook fails'
complete -c mcpwarden -n "__fish_seen_subcommand_from reap" -l grace -x -d 'SIGTERM to SIGKILL window'
complete -c mcpwarden -n "__fish_seen_subcommand_from reap" -s y -l yes -d 'Act without asking'
complete -c mcpwarden -n "__fish_seen_subcommand_from reap" -s n -l dry-run -d 'Only print the plan'
complete -c mcpwarden -n "__fish_seen_subcommand_from reap" -l watch -d 'Repeat every --interval'
complete -c mcpwarden -n "__fish_seen_subcommand_from reap" -l interval -x -d 'Pause between passes'
# clients, wrap, unwrap
complete -c mcpwarden -n "__fish_seen_subcommand_from clients wrap unwrap" -l project -x -a '(__fish_complete_directories)'
complete -c mcpwarden -n "__fish_seen_subcommand_from wrap unwrap" -l client -x -a 'claude-code claude-desktop cursor vscode windsurf zed codex gemini cline'
complete -c mcpwarden -n "__fish_seen_subcommand_from wrap unwrap" -l all -d 'Every detected client'
complete -c mcpwarden -n "__fish_seen_subcommand_from wrap" -l sandbox -x -a 'off strict workspace'
complete -c mcpwarden -n "__fish_seen_subcommand_from wrap" -l share -d 'Add --share to wrapped entries'
complete -c mcpwarden -n "__fish_seen_subcommand_from broker" -l linger -x -d 'How long to wait for a first client'
complete -c mcpwarden -n "__fish_seen_subcommand_from wrap unwrap" -l server -x -d 'Only this server'
complete -c mcpwarden -n "__fish_seen_subcommand_from wrap unwrap" -l dry-run -d 'Print a diff'
complete -c mcpwarden -n "__fish_seen_subcommand_from wrap" -l mcpwarden -r -F -d 'Path to write'
complete -c mcpwarden -n "__fish_seen_subcommand_from wrap unwrap" -l file -r -F -d 'Only this config file'
complete -c mcpwarden -n "__fish_seen_subcommand_from unwrap" -l unrecorded -d 'Also hand-wrapped entries'
complete -c mcpwarden -n "__fish_seen_subcommand_from clients" -l check -d 'Verify wrapped entries'
complete -c mcpwarden -n "__fish_seen_subcommand_from uninstall" -l purge -d 'Also journal and settings'
complete -c mcpwarden -n "__fish_seen_subcommand_from uninstall" -l dry-run -d 'Change nothing'

# logs
complete -c mcpwarden -n "not __fish_seen_subcommand_from $cmds" -a logs -d 'What the servers wrote on stderr'
complete -c mcpwarden -n "__fish_seen_subcommand_from logs" -s f -l follow -d 'Keep printing new lines'
complete -c mcpwarden -n "__fish_seen_subcommand_from logs" -l since -x -d 'Only lines this recent'
complete -c mcpwarden -n "__fish_seen_subcommand_from logs" -l json -d 'JSON lines'
complete -c mcpwarden -n "__fish_seen_subcommand_from logs" -l journal -r -d 'Journal database'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l restart -x -a 'no on-failure' -d 'Start a server that died again'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l restart-burst -x -d 'Starts allowed per interval'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l restart-interval -x -d 'The start limit interval'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l logs -d 'Keep the server stderr in a log'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l log-size -x -d 'One log file bound'
complete -c mcpwarden -n "__fish_seen_subcommand_from run" -l log-files -x -d 'Log files kept'
# status
complete -c mcpwarden -n "__fish_seen_subcommand_from status" -l watch -d 'Refresh in place'
complete -c mcpwarden -n "__fish_seen_subcommand_from status" -l interval -x -d 'Pause between frames'
complete -c mcpwarden -n "__fish_seen_subcommand_from status" -l count -x -d 'Frames to show'

# config
complete -c mcpwarden -n "__fish_seen_subcommand_from config; and not __fish_seen_subcommand_from show check" -a 'show check'
complete -c mcpwarden -n "__fish_seen_subcommand_from config" -l name -x -d 'As run --name'
complete -c mcpwarden -n "__fish_seen_subcommand_from config" -l json -d 'JSON output'

# journal
complete -c mcpwarden -n "__fish_seen_subcommand_from journal; and not __fish_seen_subcommand_from sessions activity show reconcile prune export" -a 'sessions activity show reconcile prune export'
complete -c mcpwarden -n "__fish_seen_subcommand_from journal" -l since -x -d 'Time window'
complete -c mcpwarden -n "__fish_seen_subcommand_from journal" -l server -x -d 'Server name contains'
complete -c mcpwarden -n "__fish_seen_subcommand_from journal" -l tool -x -d 'Only this tool'
complete -c mcpwarden -n "__fish_seen_subcommand_from journal" -l outcome -x -a 'ok jsonrpc_error tool_error in-flight abandoned unresolved'
complete -c mcpwarden -n "__fish_seen_subcommand_from journal" -l session -x -d 'Only this session'
complete -c mcpwarden -n "__fish_seen_subcommand_from journal" -l format -x -a 'otlp-json ndjson'
complete -c mcpwarden -n "__fish_seen_subcommand_from journal" -l since-seq -x -d 'Only records after seq'
complete -c mcpwarden -n "__fish_seen_subcommand_from journal" -l include-content -d 'Argument previews'
complete -c mcpwarden -n "__fish_seen_subcommand_from journal" -l jsonl -d 'One record a line (show)'
complete -c mcpwarden -n "__fish_seen_subcommand_from journal" -l older-than -x -d 'Prune: older than'
complete -c mcpwarden -n "__fish_seen_subcommand_from journal" -l max-size -x -d 'Prune: keep within'
complete -c mcpwarden -n "__fish_seen_subcommand_from journal" -l export-to -r -F -d 'Prune: export first'
complete -c mcpwarden -n "__fish_seen_subcommand_from journal" -l no-compact -d 'Prune: no VACUUM'
# audit
complete -c mcpwarden -n "__fish_seen_subcommand_from audit; and not __fish_seen_subcommand_from verify anchor" -a 'verify anchor'
complete -c mcpwarden -n "__fish_seen_subcommand_from audit" -l require-anchored -d 'Exit 3 when unanchored'
complete -c mcpwarden -n "__fish_seen_subcommand_from audit" -l trusted-checkpoint -r -F
complete -c mcpwarden -n "__fish_seen_subcommand_from audit" -l public-key -r -F
# drill
complete -c mcpwarden -n "__fish_seen_subcommand_from drill" -l crash-at -x -a 'before-init idle in-flight mid-response'
complete -c mcpwarden -n "__fish_seen_subcommand_from drill" -l tool -x -d 'Tool to call'
complete -c mcpwarden -n "__fish_seen_subcommand_from drill" -l args -x -d 'Tool arguments (JSON)'
complete -c mcpwarden -n "__fish_seen_subcommand_from drill bench" -l trials -x -d 'Trials'
complete -c mcpwarden -n "__fish_seen_subcommand_from drill" -l compare-direct -d 'Also run without mcpwarden'
complete -c mcpwarden -n "__fish_seen_subcommand_from drill" -l markdown -r -F
complete -c mcpwarden -n "__fish_seen_subcommand_from drill" -l eof-grace -x
complete -c mcpwarden -n "__fish_seen_subcommand_from drill" -l term-grace -x
complete -c mcpwarden -n "__fish_seen_subcommand_from drill" -l timeout -x
# demo, bench
complete -c mcpwarden -n "__fish_seen_subcommand_from demo" -l no-node -d 'Skip server-everything'
complete -c mcpwarden -n "__fish_seen_subcommand_from demo" -l from -r -F
complete -c mcpwarden -n "__fish_seen_subcommand_from demo bench" -l fixture -r -F
complete -c mcpwarden -n "__fish_seen_subcommand_from bench; and not __fish_seen_subcommand_from teardown" -a teardown
complete -c mcpwarden -n "__fish_seen_subcommand_from bench" -l shapes -x
complete -c mcpwarden -n "__fish_seen_subcommand_from bench" -l strategies -x
complete -c mcpwarden -n "__fish_seen_subcommand_from bench" -l grace-ms -x
complete -c mcpwarden -n "__fish_seen_subcommand_from bench" -l svg -r -F
# shared
complete -c mcpwarden -n "__fish_seen_subcommand_from run status ps inspect reap journal audit drill demo" -l journal -r -F -d 'Journal database'
complete -c mcpwarden -n "__fish_seen_subcommand_from status ps inspect reap clients journal audit drill demo bench" -l json -d 'JSON output'
