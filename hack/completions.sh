#!/usr/bin/env bash
# Generates shell completion scripts for the release archives.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf completions && mkdir completions
for sh in bash zsh fish powershell; do
  go run ./cmd/kiln completion "$sh" > "completions/kiln.$sh"
done
