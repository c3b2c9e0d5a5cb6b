package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"
)

// versionInfo is what `ralph version --json` prints: the version and the
// commit the binary was built from, as the go command recorded them
// (runtime/debug.ReadBuildInfo). A field the binary does not know is null.
type versionInfo struct {
	// Version is the -ldflags "-X main.version=…" value if one was given,
	// else the module version (v1.2.3 from `go install …@v1.2.3`; a
	// pseudo-version such as v0.0.0-20250102030405-0123456789ab+dirty from a
	// checkout, Go 1.24 and later), else "dev".
	Version string `json:"version"`
	// Commit is the full revision the binary was built from (vcs.revision).
	Commit *string `json:"commit"`
	// CommitTime is that commit's time, RFC 3339 in UTC (vcs.time).
	CommitTime *string `json:"commit_time"`
	// Modified says whether the tree held changes git had not committed,
	// untracked files included (vcs.modified).
	Modified *bool `json:"modified"`
	// Go is the Go release that built the binary (go1.26.0).
	Go string `json:"go"`
}

// readVersion gathers versionInfo from the build information of the
// running binary.
func readVersion() versionInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return versionFrom(linkedInfo{version, commit, commitTime, treeState}, bi)
}

// linkedInfo is what -ldflags "-X …" set: main's version, commit,
// commitTime and treeState.
type linkedInfo struct{ version, commit, commitTime, treeState string }

// versionFrom is readVersion for given link-time values and build
// information (nil when the binary has none). The build information's
// VCS settings win over linked ones: both name the same commit when both
// are there.
func versionFrom(linked linkedInfo, bi *debug.BuildInfo) versionInfo {
	v := versionInfo{Version: linked.version, Go: runtime.Version()}
	if linked.commit != "" {
		v.Commit = &linked.commit
		if linked.commitTime != "" {
			v.CommitTime = &linked.commitTime
		}
		if linked.treeState != "" {
			m := linked.treeState == "dirty"
			v.Modified = &m
		}
	}
	if bi == nil {
		return v
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	if linked.version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = &s.Value
		case "vcs.time":
			v.CommitTime = &s.Value
		case "vcs.modified":
			m := s.Value == "true"
			v.Modified = &m
		}
	}
	return v
}

// line is what `ralph --version` and `ralph version` print:
//
//	ralph version v1.2.3
//	ralph version v0.0.0-…-0123456789ab+dirty (commit 0123…, 2025-01-02T03:04:05Z, modified)
func (v versionInfo) line() string {
	s := "ralph version " + v.Version
	if v.Commit == nil {
		return s + "\n"
	}
	parts := []string{"commit " + *v.Commit}
	if v.CommitTime != nil {
		parts = append(parts, *v.CommitTime)
	}
	if v.Modified != nil && *v.Modified {
		parts = append(parts, "modified")
	}
	return s + " (" + strings.Join(parts, ", ") + ")\n"
}

// brief is what a run record keeps of v (loop.RunRecord.Version): the
// version, then the commit, "modified" and the Go release in brackets,
// "v1.2.3 (commit 0123…, modified, go1.26.0)".
func (v versionInfo) brief() string {
	var parts []string
	if v.Commit != nil {
		parts = append(parts, "commit "+*v.Commit)
	}
	if v.Modified != nil && *v.Modified {
		parts = append(parts, "modified")
	}
	parts = append(parts, v.Go)
	return v.Version + " (" + strings.Join(parts, ", ") + ")"
}

func versionCommand(cfg appConfig) *cli.Command {
	return &cli.Command{
		Name:      "version",
		Usage:     "print the version and the commit ralph was built from",
		UsageText: "ralph version [--json]",
		// Hidden keeps `ralph --help` as it was; --version is listed
		// there, and the README documents this command.
		Hidden: true,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print JSON: version, commit, commit_time, modified, go"},
		},
		Action: func(c *cli.Context) error {
			if _, err := args(c, 0, 0, ""); err != nil {
				return err
			}
			v := readVersion()
			if c.Bool("json") {
				return writeJSON(cfg.stdout, v)
			}
			_, err := fmt.Fprint(cfg.stdout, v.line())
			return err
		},
	}
}
