#!/bin/sh
# The head of a Codex config.toml that points `codex exec` at fake_model.py: Codex speaks the
# Responses API only (wire_api "chat" is gone), and reads its key from MCPW_FAKE_OPENAI_KEY.
# usage: codex_fake_provider.sh MODEL_URL >"$CODEX_HOME/config.toml"   (then the servers)
cat <<EOF2
model = "fake-model"
model_provider = "fake"
check_for_update_on_startup = false

[analytics]
enabled = false

[model_providers.fake]
name = "fake model"
base_url = "$1/v1"
env_key = "MCPW_FAKE_OPENAI_KEY"
wire_api = "responses"
EOF2
