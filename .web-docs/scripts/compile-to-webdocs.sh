#!/usr/bin/env bash
# Turns the docs rendered by `packer-sdc renderdocs` into the layout the Packer integrations
# registry reads from .web-docs/: README.md at the top, and one
# components/<type>/<slug>/README.md per component page, without front matter or the top H1
# (the registry adds its own), with plugin-site links rewritten to integration links.
#
# Usage: compile-to-webdocs.sh PLUGIN_DIR RENDERED_DOCS_DIR WEB_DOCS_DIR ORGANIZATION
# (the two directories are relative to PLUGIN_DIR), the same contract as the script in
# hashicorp/packer-plugin-scaffolding, so the usual `make generate` recipe works unchanged.
set -euo pipefail
export LC_ALL=C

if [ "$#" -ne 4 ]; then
  echo "usage: $0 PLUGIN_DIR RENDERED_DOCS_DIR WEB_DOCS_DIR ORGANIZATION" >&2
  exit 2
fi
plugin_dir=$1
docs_dir="$plugin_dir/$2"
web_dir="$plugin_dir/$3"
org=$4

# Folder name under docs/ -> integration component type.
component_type() {
  case "$1" in
    builders) echo builder ;;
    provisioners) echo provisioner ;;
    post-processors) echo post-processor ;;
    datasources) echo data-source ;;
    *) return 1 ;;
  esac
}

# /packer/plugins/<kind>/<plugin>[#a]        -> /packer/integrations/<org>/<plugin>[#a]
# /packer/plugins/<kind>/<plugin>/<slug>[#a] -> /packer/integrations/<org>/<plugin>/latest/components/<type>/<slug>[#a]
rewrite_links() {
  sed -E \
    -e "s|\(/packer/plugins/([^/)#]+)/([^/)#]+)/([^/)#]+)(#[^)]*)?\)|(/packer/integrations/${org}/\2/latest/components/\1/\3\4)|g" \
    -e "s|\(/packer/plugins/([^/)#]+)/([^/)#]+)(#[^)]*)?\)|(/packer/integrations/${org}/\2\3)|g" \
    -e 's|/components/datasources/|/components/data-source/|g' \
    -e 's|/components/builders/|/components/builder/|g' \
    -e 's|/components/post-processors/|/components/post-processor/|g' \
    -e 's|/components/provisioners/|/components/provisioner/|g'
}

# Drops the front matter (the first two --- lines and what they enclose), the blank lines after
# it, the first H1 and the blank lines after that.
strip_header() {
  awk '
    state == 0 && /^---[ \t]*$/ { state = 1; next }
    state == 0 { state = 2 }
    state == 1 { if ($0 ~ /^---[ \t]*$/) state = 2; next }
    state == 2 && /^[ \t]*$/ { next }
    state == 2 && /^# / { state = 3; next }
    state == 2 { state = 4 }
    state == 3 && /^[ \t]*$/ { next }
    state == 3 { state = 4 }
    { print }
  ' "$1"
}

if [ ! -f "$docs_dir/README.md" ]; then
  echo "compile-to-webdocs: $docs_dir/README.md is missing (did renderdocs run?)" >&2
  exit 1
fi

echo "Compiling MDX docs in '$2' to Markdown in '$3'..."
mkdir -p "$web_dir"
rm -rf "$web_dir/components"
rewrite_links < "$docs_dir/README.md" > "$web_dir/README.md"

find "$docs_dir" -mindepth 2 -name '*.mdx' ! -name 'index.mdx' | sort | while read -r file; do
  rel=${file#"$docs_dir"/}
  folder=${rel%%/*}
  slug=$(basename "$rel" .mdx)
  if ! type=$(component_type "$folder"); then
    echo "compile-to-webdocs: $file: component docs must live in builders/, provisioners/, post-processors/ or datasources/" >&2
    exit 1
  fi
  out="$web_dir/components/$type/$slug"
  mkdir -p "$out"
  strip_header "$file" | rewrite_links > "$out/README.md"
done
