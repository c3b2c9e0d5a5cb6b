package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrUnavailable is returned by Find when this system cannot sandbox an
// agent: the operating system has no supported tool, the tool is not
// installed, or it does not run here. The error that wraps it says what to
// install or change.
var ErrUnavailable = errors.New("sandbox: not available")

// Sandbox is the tool that confines an agent: bwrap (bubblewrap) on
// Linux, sandbox-exec on macOS. Get one with Find; it holds no state of a
// run and is safe for concurrent use.
type Sandbox struct {
	// Path is the tool's executable, absolute.
	Path string
}

// Policy says what one sandboxed command may write.
type Policy struct {
	// Dir is the command's working directory ("" leaves it to the
	// caller's exec.Cmd.Dir). It must be a directory.
	Dir string
	// Writable are the paths, directories or files, the command may
	// write; everything else is read-only. A path is resolved (absolute,
	// symbolic links followed) before it is granted; a path that does not
	// exist is skipped, so the command cannot create it. A file is
	// writable in place: replacing it by renaming another file onto it
	// needs its directory writable too.
	Writable []string
}

// Find locates the sandbox tool of this operating system on PATH and, on
// Linux, checks that it runs here (bubblewrap needs user namespaces when
// ralph is not root). Its error wraps ErrUnavailable and says how to
// install or enable the tool.
func Find() (*Sandbox, error) { return find() }

// Command returns the command that runs path with args inside the
// sandbox, for exec.Command(newPath, newArgs...): newArgs does not hold
// the program name. Run it with the same environment and working
// directory the agent would have had. cleanup removes what Command made
// for this run (macOS: the generated profile); call it once the command
// has exited. Command fails when p.Dir is set and is not a directory, or
// when the profile cannot be written.
func (s *Sandbox) Command(p Policy, path string, args []string) (newPath string, newArgs []string, cleanup func(), err error) {
	if p.Dir != "" {
		fi, err := os.Stat(p.Dir)
		if err != nil {
			return "", nil, nil, fmt.Errorf("sandbox: working directory: %w", err)
		}
		if !fi.IsDir() {
			return "", nil, nil, fmt.Errorf("sandbox: working directory %s is not a directory", p.Dir)
		}
	}
	return s.command(p, path, args)
}

// grant is one writable path, resolved.
type grant struct {
	path string // absolute, clean, no symbolic links
	dir  bool
}

// grants resolves paths (relative ones against base) and keeps those that
// exist, without duplicates and without paths that lie inside a writable
// directory already granted, sorted so that a parent would come before
// its children.
func grants(base string, paths []string) []grant {
	var gs []grant
	for _, p := range paths {
		r, err := resolve(base, p)
		if err != nil {
			continue
		}
		fi, err := os.Stat(r)
		if err != nil {
			continue
		}
		gs = append(gs, grant{path: r, dir: fi.IsDir()})
	}
	slices.SortFunc(gs, func(a, b grant) int { return strings.Compare(a.path, b.path) })
	gs = slices.CompactFunc(gs, func(a, b grant) bool { return a.path == b.path })
	var out []grant
	for _, g := range gs {
		if !slices.ContainsFunc(out, func(parent grant) bool { return parent.dir && within(g.path, parent.path) }) {
			out = append(out, g)
		}
	}
	return out
}

// resolve makes p absolute (relative to base, or to the working directory
// when base is "") and follows its symbolic links.
func resolve(base, p string) (string, error) {
	if p == "" {
		return "", errors.New("empty path")
	}
	if !filepath.IsAbs(p) {
		if base == "" {
			var err error
			if base, err = os.Getwd(); err != nil {
				return "", err
			}
		}
		p = filepath.Join(base, p)
	}
	return filepath.EvalSymlinks(p)
}

// within reports whether path is dir or lies below it; both are clean
// and absolute.
func within(path, dir string) bool {
	if path == dir || dir == "/" {
		return true
	}
	return strings.HasPrefix(path, dir+"/")
}
