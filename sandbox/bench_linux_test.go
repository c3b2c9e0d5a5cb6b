package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkStart measures what the sandbox adds to starting a process:
// `true` run directly, and run in a session of an agent in a worker's
// tree with a state directory of a dozen entries — the session prepared
// (the private git checkout, the scratch), run, closed and its scratch
// removed, as agentproc does for every agent and gate.
func BenchmarkStart(b *testing.B) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true on PATH")
	}
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command(truePath).Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The session without running anything: what ralph itself does.
	b.Run("prepare-only", func(b *testing.B) {
		p, box := startProject(b)
		for b.Loop() {
			scratch, err := os.MkdirTemp(p.tmp, "ralph-sandbox-")
			if err != nil {
				b.Fatal(err)
			}
			s, err := box.Prepare(SessionParams{Dir: p.tree, Path: truePath, Env: p.env, State: p.agentState(), Scratch: scratch})
			if err != nil {
				b.Fatal(err)
			}
			s.Close(b.Context())
			if err := os.RemoveAll(scratch); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sandboxed", func(b *testing.B) {
		p, box := startProject(b)
		for b.Loop() {
			scratch, err := os.MkdirTemp(p.tmp, "ralph-sandbox-")
			if err != nil {
				b.Fatal(err)
			}
			s, err := box.Prepare(SessionParams{Dir: p.tree, Path: truePath, Env: p.env, State: p.agentState(), Scratch: scratch})
			if err != nil {
				b.Fatal(err)
			}
			cmd := exec.Command(s.Path, s.Args...)
			cmd.Env = s.Env
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
			if c := s.Close(b.Context()); c == nil || !c.Descends {
				b.Fatalf("Checkout = %+v", c)
			}
			if err := os.RemoveAll(scratch); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkPrivateCheckout measures the private copy of the git metadata
// of a repository of 10,000 files (an index of about 1 MB) with 200
// branches, made and removed: what every sandboxed session adds before
// bubblewrap starts.
func BenchmarkPrivateCheckout(b *testing.B) {
	p := newProject(b)
	git(b, p.env, p.repo, "config", "gc.auto", "0") // no gc left running when the test's directory goes
	for i := range 10000 {
		writeFile(b, filepath.Join(p.repo, "src", strconv.Itoa(i%100), strconv.Itoa(i)+".txt"), strconv.Itoa(i)+"\n")
	}
	git(b, p.env, p.repo, "add", "src")
	git(b, p.env, p.repo, "commit", "-q", "-m", "10,000 files")
	for i := range 200 {
		git(b, p.env, p.repo, "branch", "b"+strconv.Itoa(i))
	}
	r := discoverRepository(p.repo)
	for b.Loop() {
		scratch, err := os.MkdirTemp(p.tmp, "ralph-sandbox-")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := makeCheckout(r, r.gitDir, r.dotGit(), true, scratch); err != nil {
			b.Fatal(err)
		}
		if err := os.RemoveAll(scratch); err != nil {
			b.Fatal(err)
		}
	}
	if fi, err := os.Stat(filepath.Join(r.gitDir, "index")); err == nil {
		b.ReportMetric(float64(fi.Size()), "index-bytes")
	}
}

// startProject is BenchmarkStart's project: a worker's tree and a state
// directory of a dozen entries.
func startProject(b *testing.B) (*project, *Boundary) {
	p := newProject(b)
	box := p.realBoundary(b)
	for i := range 6 {
		writeFile(b, filepath.Join(p.state, "file"+strconv.Itoa(i)+".json"), "{}")
		mkdirs(b, filepath.Join(p.state, "dir"+strconv.Itoa(i)))
	}
	writeFile(b, filepath.Join(p.state, "auth.json"), "{}")
	return p, box
}
