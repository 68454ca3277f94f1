#!/usr/bin/env bash
# agent_persona_print_policy.sh: the peer for benchmarks/launch_startup.py.
#
# A RECONSTRUCTION, NOT THE REAL PROJECT. agent-persona's own launcher (a bash script) is
# not available offline; this file rebuilds the `agent-persona print-policy claude
# <persona>` path from the design in /work/shared/seeds/004_*.txt (agent-persona v1.3's
# implementation plan): bash for the control flow, and one embedded `python3 -` helper per
# policy question (policy_exists_in_json, policy_tools_allow, policy_tools_deny,
# policy_has_paths_deny, generate_claude_settings, ...), each reading persona.json, as the
# seed shows them. It exists only to be timed against `charter print-policy` on the same
# persona in the same run; it enforces nothing and is not used by charter.
#
# What it does, in the seed's order: find the persona (<repo>/.personas/<name>, then
# ~/.personas/<name>; a directory or a <name>.md file), pick the overlay file name, read the
# persona's defaults for the tool, write the MCP config temp file (the launcher's
# extract_mcp_config, filtered by policy.mcpServers), translate the policy for Claude
# (--tools, --disallowedTools, a temp settings file for paths.deny), filter policy-controlled
# user arguments, print the summary of the seed's "New Command: print-policy" section, and
# remove the temp files on exit (cleanup_policy, cleanup_mcp).
#
#     agent_persona_print_policy.sh claude <persona> [-- user args...]

set -euo pipefail

log() { [[ -n "${AGENT_PERSONA_DEBUG:-}" ]] && echo "agent-persona: $*" >&2 || true; }
warn() { echo "agent-persona: warning: $*" >&2; }
die() { echo "agent-persona: error: $*" >&2; exit 1; }

claude_settings_file=""
mcp_config_file=""

cleanup_policy() {
  [[ -n "${claude_settings_file:-}" && -f "$claude_settings_file" ]] && rm -f "$claude_settings_file" 2>/dev/null || true
}
cleanup_mcp() {
  [[ -n "${mcp_config_file:-}" && -f "$mcp_config_file" ]] && rm -f "$mcp_config_file" 2>/dev/null || true
}
cleanup_session() {
  set +e
  cleanup_mcp
  cleanup_policy
}
trap cleanup_session EXIT

# --- python helpers (one interpreter per question, as in the seed) ---------------------

policy_exists_in_json() {
  python3 - "$1" <<'PY'
import json, sys
with open(sys.argv[1]) as f:
    j = json.load(f)
sys.exit(0 if isinstance(j.get("policy"), dict) and j["policy"] else 1)
PY
}

persona_defaults() {
  python3 - "$1" "$2" <<'PY'
import json, sys
with open(sys.argv[1]) as f:
    j = json.load(f)
for arg in (j.get("defaults") or {}).get(sys.argv[2], []):
    print(arg)
PY
}

extract_mcp_config_with_policy() {
  python3 - "$1" <<'PY'
import json, os, sys, tempfile
with open(sys.argv[1]) as f:
    j = json.load(f)
servers = j.get("mcpServers") or {}
mcp_policy = (j.get("policy") or {}).get("mcpServers", {})
allowed = set(mcp_policy.get("allow", []))
denied = set(mcp_policy.get("deny", []))
filtered = {}
for name, cfg in servers.items():
    if allowed and name not in allowed:
        continue
    if name in denied:
        continue
    filtered[name] = cfg
if filtered:
    fd, tmp_path = tempfile.mkstemp(prefix="persona-mcp-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump({"mcpServers": filtered}, f)
    print(tmp_path)
PY
}

# The tool-name normalisation the seed gives (TOOL_ALIASES, normalize_tool_name) is
# embedded in each helper that lists tools, as a launcher of this shape must.
policy_tools_allow() {
  python3 - "$1" <<'PY'
import json, sys
TOOL_ALIASES = {
    "Bash": "bash", "Read": "read", "Write": "write", "Edit": "edit", "Glob": "glob",
    "Grep": "grep", "WebFetch": "webfetch", "WebSearch": "websearch", "Task": "task",
    "TodoWrite": "todowrite", "NotebookEdit": "notebookedit",
    "AskUserQuestion": "askuserquestion",
}
def normalize_tool_name(name):
    return TOOL_ALIASES.get(name, name.lower())
with open(sys.argv[1]) as f:
    policy = json.load(f).get("policy") or {}
print(",".join(normalize_tool_name(t) for t in policy.get("tools", {}).get("allow", [])))
PY
}

policy_tools_deny() {
  python3 - "$1" <<'PY'
import json, sys
TOOL_ALIASES = {
    "Bash": "bash", "Read": "read", "Write": "write", "Edit": "edit", "Glob": "glob",
    "Grep": "grep", "WebFetch": "webfetch", "WebSearch": "websearch", "Task": "task",
    "TodoWrite": "todowrite", "NotebookEdit": "notebookedit",
    "AskUserQuestion": "askuserquestion",
}
def normalize_tool_name(name):
    return TOOL_ALIASES.get(name, name.lower())
with open(sys.argv[1]) as f:
    policy = json.load(f).get("policy") or {}
print(" ".join(normalize_tool_name(t) for t in policy.get("tools", {}).get("deny", [])))
PY
}

policy_has_paths_deny() {
  python3 - "$1" <<'PY'
import json, sys
with open(sys.argv[1]) as f:
    policy = json.load(f).get("policy") or {}
sys.exit(0 if policy.get("paths", {}).get("deny") else 1)
PY
}

generate_claude_settings() {
  python3 - "$1" <<'PY'
import json, os, sys, tempfile
with open(sys.argv[1]) as f:
    policy = json.load(f).get("policy") or {}
deny = []
for p in policy.get("paths", {}).get("deny", []):
    pattern = p if p.endswith("**") else p.rstrip("/") + "/**"
    for tool in ("Read", "Edit", "Write"):
        deny.append(f"{tool}({pattern})")
fd, path = tempfile.mkstemp(prefix="persona-claude-", suffix=".json")
with os.fdopen(fd, "w") as f:
    json.dump({"permissions": {"deny": deny}}, f)
print(path)
PY
}

policy_has_network_deny() {
  python3 - "$1" <<'PY'
import json, sys
with open(sys.argv[1]) as f:
    policy = json.load(f).get("policy") or {}
sys.exit(0 if policy.get("network", {}).get("deny") else 1)
PY
}

policy_allows_bash() {
  python3 - "$1" <<'PY'
import json, sys
with open(sys.argv[1]) as f:
    policy = json.load(f).get("policy") or {}
tools = policy.get("tools", {})
allow = [t.lower() for t in tools.get("allow", [])]
deny = [t.lower() for t in tools.get("deny", [])]
sys.exit(0 if (not allow or "bash" in allow) and "bash" not in deny else 1)
PY
}

# --- arguments -------------------------------------------------------------------------

CLAUDE_CONTROLLED_FLAGS=(--permission-mode --dangerously-skip-permissions --tools --allowedTools --disallowedTools)

is_policy_controlled_flag() {
  local arg="$1" flag
  for flag in "${CLAUDE_CONTROLLED_FLAGS[@]}"; do
    [[ "$arg" == "$flag" || "$arg" == "$flag="* ]] && return 0
  done
  return 1
}

[[ $# -ge 2 ]] || die "usage: print-policy <tool> <persona> [-- args...]"
tool="$1"
persona="$2"
shift 2
[[ "${1:-}" == "--" ]] && shift
pass_args=("$@")
case "$tool" in
  claude|claude-code) overlay_name="CLAUDE.md" ;;
  *) die "this reconstruction covers print-policy for claude only" ;;
esac

# --- persona resolution ----------------------------------------------------------------

repo_root="$(git rev-parse --show-toplevel 2>/dev/null || pwd)"
persona_src=""
profile_type=""
for base in "$repo_root/.personas" "$HOME/.personas"; do
  if [[ -d "$base/$persona" ]]; then
    persona_src="$base/$persona"; profile_type="dir"; break
  elif [[ -f "$base/$persona.md" ]]; then
    persona_src="$base/$persona.md"; profile_type="file"; break
  fi
done
[[ -n "$persona_src" ]] || die "unknown persona: $persona"
if [[ "$profile_type" == "file" ]]; then
  persona_dir="$(dirname -- "$persona_src")"
else
  persona_dir="$persona_src"
fi
tool_specific_file="$persona_dir/$overlay_name"
if [[ -f "$tool_specific_file" && "$overlay_name" != "AGENTS.md" ]]; then
  link_target="$tool_specific_file"
else
  link_target="$persona_dir/AGENTS.md"
fi
[[ -f "$link_target" ]] || die "persona instructions not found: $link_target"
json_cfg=""
[[ -f "$persona_dir/persona.json" ]] && json_cfg="$persona_dir/persona.json"

# --- arg layering ----------------------------------------------------------------------

has_policy=0
[[ -n "$json_cfg" ]] && policy_exists_in_json "$json_cfg" && has_policy=1

default_args=()
if [[ -n "$json_cfg" ]]; then
  mapfile -t default_args < <(persona_defaults "$json_cfg" claude)
fi
if [[ $has_policy -eq 0 ]]; then
  default_args+=(--permission-mode bypassPermissions)
else
  log "policy present, skipping default permission-mode"
fi

if [[ "${MCP_ENABLED:-1}" != "0" && -n "$json_cfg" ]]; then
  mcp_config_file="$(extract_mcp_config_with_policy "$json_cfg")"
  [[ -n "$mcp_config_file" ]] && default_args+=(--mcp-config "$mcp_config_file")
fi

# v1.3 filters token by token: the value of a two-token flag stays (v1.4 fixed that)
filtered_user_args=()
blocked_user_args=()
for arg in ${pass_args[@]+"${pass_args[@]}"}; do
  if [[ $has_policy -eq 1 ]] && is_policy_controlled_flag "$arg"; then
    log "filtering user arg blocked by policy: $arg"
    blocked_user_args+=("$arg")
    continue
  fi
  filtered_user_args+=("$arg")
done

policy_args=()
translation=""
gaps=()
if [[ $has_policy -eq 1 ]]; then
  allowed=$(policy_tools_allow "$json_cfg")
  if [[ -n "$allowed" ]]; then
    policy_args+=(--tools "$allowed")
    translation+="tools.allow: ${allowed//,/, }"$'\n'"  → --tools \"$allowed\""$'\n\n'
  fi
  denied=$(policy_tools_deny "$json_cfg")
  if [[ -n "$denied" ]]; then
    # shellcheck disable=SC2206  # word-split intentional (seed v1.3)
    policy_args+=(--disallowedTools $denied)
    translation+="tools.deny: ${denied// /, }"$'\n'"  → --disallowedTools $denied"$'\n\n'
  fi
  if policy_has_paths_deny "$json_cfg"; then
    claude_settings_file=$(generate_claude_settings "$json_cfg")
    policy_args+=(--settings "$claude_settings_file")
    translation+="paths.deny:"$'\n'"  → --settings $claude_settings_file"$'\n\n'
    gaps+=("[WARN] paths.deny: Claude path deny rules have known edge-cases with MCP tools")
  fi
  if policy_has_network_deny "$json_cfg"; then
    if policy_allows_bash "$json_cfg"; then
      gaps+=("[WARN] network.deny: Claude cannot enforce network.deny when bash is allowed (shell can still curl/wget)")
    fi
  else
    gaps+=("[WARN] network.deny not specified; tool can still make outbound requests via bash")
  fi
fi

tool_args=(${default_args[@]+"${default_args[@]}"} ${filtered_user_args[@]+"${filtered_user_args[@]}"} ${policy_args[@]+"${policy_args[@]}"})

# --- print -----------------------------------------------------------------------------

cat <<EOF
=== Policy Summary ===

Persona:         $persona
Tool:            $tool
Overlay file:    $overlay_name

=== Environment Variables ===
AGENT_PERSONA_NAME=$persona
AGENT_PERSONA_PATH=$persona_dir
AGENT_PERSONA_TOOL=$tool
AGENT_PERSONA_OVERLAY_FILE=$overlay_name

=== Policy Translation ===
Source: ${json_cfg:-(none)}

${translation:-(no policy)
}=== Final Arguments ===
Default args:  ${default_args[*]:-(none)}
User args:     ${filtered_user_args[*]:-(none)}${blocked_user_args[*]:+ (filtered: ${blocked_user_args[*]})}
Policy args:   ${policy_args[*]:-(none)}

Final: $tool ${tool_args[*]}

=== Enforcement Gaps ===
EOF
for g in ${gaps[@]+"${gaps[@]}"}; do
  echo "$g"
done
