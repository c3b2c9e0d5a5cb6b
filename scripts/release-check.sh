#!/usr/bin/env bash
# release-check.sh GORELEASER: builds a snapshot release with the
# configuration in .goreleaser.yaml and checks what a user would download:
#
#   - every archive, package and the Homebrew formula are there, and the
#     checksums file matches them;
#   - the linux/amd64 archive's ralph names this checkout's commit in
#     `ralph --version`, and runs the quickstart's plan — init, tasks with a
#     dependency, a build to the end — with the quickstart's stand-in agent
#     (examples/quickstart, which speaks Claude Code's stream-json);
#   - every package, tests included, compiles and vets for Windows
#     (windows/amd64; the release built windows/arm64, darwin and
#     linux/arm64 already);
#   - `go install ./cmd/ralph` in a fresh clone, with an empty module cache
#     and a user's default -buildvcs, gives a ralph whose --version names
#     the commit.
#
# .ci/run runs it beside the tests. Run by hand from the repository's top:
#   scripts/release-check.sh "$(go env GOPATH)/bin/goreleaser"
set -euo pipefail
goreleaser=$(realpath "${1:?usage: scripts/release-check.sh GORELEASER}")
cd "$(dirname "$0")/.."
top=$PWD
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "release-check: $*" >&2; exit 1; }
step() { echo "release-check: $* ($(( $(date +%s) - start )) s)"; }
start=$(date +%s)
# Everything is checked in a clone of the checkout's commit: the release
# is built from what is committed, in a tree git reads as clean. A tree
# that is no git checkout (a tarball), or one git will not read as this
# user (another owner), is checked as a copy committed to a repository of
# its own. goreleaser reads the origin's URL (the GitHub repository) and
# ignores everything git tells it without one: the clone's origin is the
# project's, which a snapshot never contacts.
src=$work/src
if head=$(git rev-parse HEAD 2>/dev/null); then
  git clone -q "$top" "$src"
else
  echo "release-check: $top is not a git checkout this user can read: checking a committed copy"
  mkdir "$src"
  tar --exclude=./.cache --exclude=./dist --exclude=./.git -cf - . | tar -xf - -C "$src"
  git -C "$src" init -q
  git -C "$src" add -A
  git -C "$src" -c user.name=release-check -c user.email=release-check@localhost commit -qm snapshot
  head=$(git -C "$src" rev-parse HEAD)
  git -C "$src" remote add origin https://github.com/ralph-dev/ralph.git
fi
git -C "$src" remote set-url origin https://github.com/ralph-dev/ralph.git
cd "$src"

# 1. The snapshot release.
"$goreleaser" release --snapshot --clean > "$work/goreleaser.log" 2>&1 ||
  { cat "$work/goreleaser.log"; fail "goreleaser release --snapshot failed"; }
step "snapshot built"
for f in ralph_linux_amd64.tar.gz ralph_linux_arm64.tar.gz ralph_darwin_amd64.tar.gz \
  ralph_darwin_arm64.tar.gz ralph_windows_amd64.zip ralph_windows_arm64.zip \
  ralph_amd64.deb ralph_arm64.deb ralph_amd64.rpm ralph_arm64.rpm checksums.txt \
  homebrew/Formula/ralph.rb; do
  [ -s "dist/$f" ] || fail "dist/$f is missing (dist holds: $(ls dist | tr '\n' ' '))"
done
(cd dist && sha256sum --quiet -c checksums.txt) || fail "checksums.txt does not match the files"
[ "$(wc -l < dist/checksums.txt)" -eq 10 ] || fail "checksums.txt lists $(wc -l < dist/checksums.txt) files, want 10"
grep -q 'bin.install "ralph"' dist/homebrew/Formula/ralph.rb || fail "the formula does not install ralph"
# (grep -q on a pipe would end its writer early: under pipefail, a failure.)
listing=$(unzip -l dist/ralph_windows_amd64.zip)
grep -q ' ralph.exe$' <<< "$listing" || fail "the windows archive has no ralph.exe: $listing"

# 2. The linux archive's ralph: its version, then the quickstart's plan.
mkdir "$work/bin"
tar -xzf dist/ralph_linux_amd64.tar.gz -C "$work/bin" ralph README.md LICENSE
ralph=$work/bin/ralph
out=$("$ralph" --version)
case $out in
  "ralph version v"*"-snapshot+"*" (commit $head, "*) ;;
  *) fail "ralph --version says \"$out\", want a snapshot version and commit $head" ;;
esac
json=$("$ralph" version --json)
grep -q "\"commit\": *\"$head\"" <<< "$json" || fail "ralph version --json does not name $head: $json"
GOFLAGS=-trimpath go build -o "$work/stand-in" ./examples/quickstart
printf '#!/bin/sh\nRALPH_QUICKSTART_STAND_IN=1 exec "%s"\n' "$work/stand-in" > "$work/claude"
chmod +x "$work/claude"
project=$work/project
mkdir "$project"
(
  cd "$project"
  git init -q
  export RALPH_DB= RALPH_PLAN= RALPH_DIR= RALPH_AGENT_ID= RALPH_HOLDER=
  "$ralph" init > /dev/null
  "$ralph" task add "Write the parser" --id parser > /dev/null
  "$ralph" task add "Write the printer" --id printer --blocked-by parser > /dev/null
  "$ralph" task add "Write the docs" > /dev/null
  "$ralph" build --claude "$work/claude" > "$work/build.log" 2>&1 ||
    { cat "$work/build.log"; fail "the archive's ralph build failed"; }
  n=$(ls work/*.txt | wc -l)
  [ "$n" -eq 3 ] || fail "the stand-in agent did $n tasks, want 3"
  "$ralph" task plan-status --json > "$work/status.json"
  grep -q '"done": 3' "$work/status.json" && grep -q '"total": 3' "$work/status.json" ||
    { cat "$work/status.json"; fail "tasks remain after the build"; }
)
step "the linux archive's ralph ran the quickstart plan"

# 3. Windows: every package and its tests compile, and vet.
export GOFLAGS="${GOFLAGS:-} -trimpath" # as the release: its compiled packages are reused
GOOS=windows GOARCH=amd64 go vet ./...
GOOS=windows GOARCH=amd64 go test -c -o "$work/wintests/" ./... > /dev/null
[ -n "$(ls "$work/wintests")" ] || fail "no Windows test binary was built"
step "windows/amd64: go vet and every test binary compile"

# 4. go install in the clean clone, an empty module cache, -buildvcs=auto
#    (dist/ is ignored: the tree stays unmodified to git).
GOFLAGS=-buildvcs=auto GOMODCACHE="$work/modcache" GOBIN="$work/gobin" go install ./cmd/ralph > "$work/install.log" 2>&1 ||
  { cat "$work/install.log"; fail "go install ./cmd/ralph failed in a clean clone"; }
out=$("$work/gobin/ralph" --version)
case $out in
  *"(commit $head, "*) ;;
  *) fail "go install in a clean clone: ralph --version says \"$out\", want commit $head" ;;
esac
step "go install in a clean clone names $head"
echo "release-check: ok"
