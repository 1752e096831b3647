#!/bin/sh
# The bash, zsh and fish completions load in their shells, offer exactly the CLI's
# subcommands (as `mcpwarden --help` lists them: a new subcommand without a completion
# fails here), and complete an option (`mcpwarden run --is` → --isolate).
# usage: completions.sh SOURCE_DIR MCPWARDEN
set -eu
src=$1 cli=$2
dir=$src/packaging/completions
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mcpw-compl.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
fail=0

"$cli" --help | sed -n '/^Subcommands:/,$p' | awk 'NR > 1 && NF {print $1}' | sort >"$tmp/want"
[ -s "$tmp/want" ] || { echo "no subcommands in mcpwarden --help"; exit 1; }

same() {  # shell, file with its commands
    sort -u "$2" >"$2.sorted"
    if ! cmp -s "$tmp/want" "$2.sorted"; then
        echo "$1 completion offers other subcommands than mcpwarden --help:"
        diff "$tmp/want" "$2.sorted" || true
        fail=1
    fi
}

for sh in bash zsh fish; do
    command -v "$sh" >/dev/null || { echo "$sh is not installed (scripts/deps.sh installs it)"; exit 1; }
done

# bash
bash -c ". '$dir/mcpwarden.bash' && COMP_WORDS=(mcpwarden '') COMP_CWORD=1 && _mcpwarden &&
         printf '%s\n' \"\${COMPREPLY[@]}\"" | grep -v '^-' >"$tmp/bash"
same bash "$tmp/bash"
out=$(bash -c ". '$dir/mcpwarden.bash' && COMP_WORDS=(mcpwarden run --is) COMP_CWORD=2 &&
               _mcpwarden && echo \"\${COMPREPLY[*]}\"")
[ "$out" = --isolate ] || { echo "bash: 'mcpwarden run --is' completes to '$out'"; fail=1; }

# zsh: compinit finds the #compdef line on fpath and binds the function; autoload +X parses it.
zsh -f -c "fpath=('$dir' \$fpath); autoload -Uz compinit && compinit -u -d '$tmp/zcompdump' &&
           [[ \$_comps[mcpwarden] == _mcpwarden ]] && autoload +X _mcpwarden" ||
    { echo "zsh: _mcpwarden does not load or is not bound to mcpwarden"; fail=1; }
# Its command list, from the file (the zsh completion system needs a terminal to run).
sed -n '/commands=(/,/)/p' "$dir/_mcpwarden" | sed -n "s/^ *'\([a-z-]*\):.*/\1/p" >"$tmp/zsh"
same zsh "$tmp/zsh"

# fish
fish --no-config -c "source '$dir/mcpwarden.fish'; complete -C 'mcpwarden '" | cut -f1 |
    grep -v '^-' >"$tmp/fish"
same fish "$tmp/fish"
out=$(fish --no-config -c "source '$dir/mcpwarden.fish'; complete -C 'mcpwarden run --is'" | cut -f1)
[ "$out" = --isolate ] || { echo "fish: 'mcpwarden run --is' completes to '$out'"; fail=1; }

[ $fail -eq 0 ] && echo "completions: OK (bash, zsh, fish; $(wc -l <"$tmp/want") subcommands)"
exit $fail
