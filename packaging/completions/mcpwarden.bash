# bash completion for mcpwarden(1)                                     -*- shell-script -*-
_mcpwarden() {
    local cur prev words cword
    if declare -F _init_completion >/dev/null; then
        _init_completion || return
    else
        COMPREPLY=()
        cur="${COMP_WORDS[COMP_CWORD]}"
        prev="${COMP_WORDS[COMP_CWORD-1]}"
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
    fi

    local commands="run status logs ps inspect reap clients wrap unwrap uninstall config journal export audit drill demo bench broker version help"
    local cmd="" sub="" i
    for ((i = 1; i < cword; i++)); do
        case "${words[i]}" in
            --) return 0 ;;  # after --: the server's own command line
            -*) ;;
            *)
                if [[ -z $cmd ]]; then cmd=${words[i]}
                elif [[ -z $sub ]]; then sub=${words[i]}; fi ;;
        esac
    done

    case "$prev" in
        --journal|--svg|--markdown|--from|--fixture|--mcpwarden|--trusted-checkpoint|--public-key)
            COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;
        --project)
            COMPREPLY=($(compgen -d -- "$cur")); return 0 ;;
        --isolate) COMPREPLY=($(compgen -W "auto none cgroup pidns" -- "$cur")); return 0 ;;
        --stdout-guard) COMPREPLY=($(compgen -W "divert pass fail" -- "$cur")); return 0 ;;
        --on-journal-failure) COMPREPLY=($(compgen -W "warn deny" -- "$cur")); return 0 ;;
        --record-args) COMPREPLY=($(compgen -W "none preview full" -- "$cur")); return 0 ;;
        --sandbox) COMPREPLY=($(compgen -W "off strict workspace" -- "$cur")); return 0 ;;
        --net) COMPREPLY=($(compgen -W "none loopback any" -- "$cur")); return 0 ;;
        --allow-read|--allow-write) COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;
        --allow-connect|--env-allow) return 0 ;;
        --record-argv) COMPREPLY=($(compgen -W "redacted full" -- "$cur")); return 0 ;;
        --journal-sync) COMPREPLY=($(compgen -W "periodic always" -- "$cur")); return 0 ;;
        --crash-at) COMPREPLY=($(compgen -W "before-init idle in-flight mid-response" -- "$cur")); return 0 ;;
        --format) COMPREPLY=($(compgen -W "otlp-json ndjson" -- "$cur")); return 0 ;;
        --client)
            COMPREPLY=($(compgen -W "claude-code claude-desktop cursor vscode windsurf zed codex gemini cline" -- "$cur"))
            return 0 ;;
        --outcome)
            COMPREPLY=($(compgen -W "ok jsonrpc_error tool_error in-flight abandoned unresolved" -- "$cur"))
            return 0 ;;
        --pid|-p|--descendants-of|--user|--session|--name|--eof-grace|--term-grace|--max-message|\
        --tool|--args|--trials|--timeout|--since|--server|--since-seq|--older-than|--match|\
        --revoke-cmd|--revoke-timeout|--grace|--interval|--count|--wedged-after|--shapes|--strategies|--grace-ms)
            return 0 ;;
    esac

    if [[ -z $cmd ]]; then
        COMPREPLY=($(compgen -W "$commands --help --version" -- "$cur"))
        return 0
    fi

    local opts=""
    case "$cmd" in
        run) opts="--name --eof-grace --term-grace --isolate --journal --no-journal --stdout-guard
                   --max-message --on-journal-failure --record-args --record-argv --journal-sync
                   --journal-retention --idle-stop --lazy --lazy-max-age --share --share-linger --explain --sandbox --allow-read --allow-write --net
                   --allow-connect --env-allow --require-sandbox --logs --log-size --log-files
                   --restart --restart-burst --restart-interval" ;;
        ps) opts="--mcp -a --all --orphans --journal --no-journal --wedged-after -t --tree --json
                  -w --wide -p --pid --descendants-of" ;;
        status) opts="--json --journal --watch --interval --count" ;;
        logs) opts="-f --follow --since --json --journal" ;;
        export) opts="--follow --otlp --syslog --name --protocol --headers-file --ca-file --client-cert
                      --client-key --signals --batch --poll-ms --include-content --user-name --journal" ;;
        inspect) opts="--json --record --journal" ;;
        reap) opts="--orphans --include-suspects --session --pid --older-than --match --user --all-users --revoke-cmd
                    --revoke-timeout --force --grace -y --yes -n --dry-run --json --journal --watch
                    --interval" ;;
        clients) opts="--json --check --project" ;;
        wrap) opts="--client --all --project --file --server --dry-run --mcpwarden --sandbox --share" ;;
        broker) opts="--linger" ;;
        unwrap) opts="--client --all --project --file --server --dry-run --unrecorded" ;;
        uninstall) opts="--purge --dry-run" ;;
        config)
            if [[ -z $sub ]]; then COMPREPLY=($(compgen -W "show check" -- "$cur")); return 0; fi
            case "$sub" in
                show) opts="--name --json" ;;
                *) opts="--json" ;;
            esac ;;
        journal)
            if [[ -z $sub ]]; then
                COMPREPLY=($(compgen -W "sessions activity show reconcile prune export" -- "$cur"))
                return 0
            fi
            case "$sub" in
                export) opts="--journal --format --since-seq --include-content" ;;
                show) opts="--journal --json --jsonl" ;;
                reconcile) opts="--journal --json" ;;
                prune) opts="--journal --json --older-than --max-size --export-to --no-compact" ;;
                *) opts="--journal --json --since --server --tool --outcome --session" ;;
            esac ;;
        audit)
            if [[ -z $sub ]]; then COMPREPLY=($(compgen -W "verify anchor" -- "$cur")); return 0; fi
            opts="--journal --require-anchored --trusted-checkpoint --public-key --json" ;;
        drill) opts="--crash-at --tool --args --trials --compare-direct --json --markdown --journal
                     --eof-grace --term-grace --timeout" ;;
        demo) opts="--json --journal --no-node --from --fixture" ;;
        bench)
            if [[ -z $sub ]]; then COMPREPLY=($(compgen -W "teardown" -- "$cur")); return 0; fi
            opts="--trials --shapes --strategies --grace-ms --json --svg --fixture" ;;
        version) opts="" ;;
        help) COMPREPLY=($(compgen -W "$commands" -- "$cur")); return 0 ;;
    esac
    COMPREPLY=($(compgen -W "$opts --help" -- "$cur"))
}
complete -F _mcpwarden mcpwarden
