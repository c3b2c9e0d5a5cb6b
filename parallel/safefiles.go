package parallel

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralph-dev/ralph/safefile"
)

// The files ralph writes and reads in and beside the workers' trees (the
// worktree-include copies, the <tree>.task marker, the worktrees
// directory's .gitignore and locks) lie where an agent can write. They
// are opened through package safefile from the project root (from the
// file's own directory when the worktrees live outside the project): a
// link on the way or at the file is refused, never followed; a copy is
// created anew (O_EXCL), never written through, after a link the agent
// planted at it or on the way to it is removed (copyInclude).

// treeBase is the trusted directory above path: root when path lies in
// it, else path's own directory.
func treeBase(root, path string) string {
	return safefile.Within(root, path, filepath.Dir(path))
}

// writeMarker records the task of the attempt under way beside the tree
// (replaced atomically: a link there is replaced, not written through).
func (w *workspace) writeMarker(id string) error {
	return safefile.WriteFile(treeBase(w.root, w.marker()), w.marker(), []byte(id), 0o644)
}

// readMarker is the task a crashed run's attempt left ("" for none; a
// marker that is a link reads as none).
func (w *workspace) readMarker() string {
	b, err := safefile.ReadFile(treeBase(w.root, w.marker()), w.marker())
	if err != nil {
		return ""
	}
	return string(b)
}

// removeMarker forgets the attempt's marker.
func (w *workspace) removeMarker() {
	safefile.Remove(treeBase(w.root, w.marker()), w.marker())
}

// copyInclude copies the worktree-include files from root into dir,
// where they are missing. A source is read from root without following a
// link; a destination is created anew, never written through. A symbolic
// link an agent put at the destination, or in place of a directory on the
// way to it, is removed — the link, not what it points to — and the file
// copied anew (the link would otherwise stay, ignored by git, and stop
// every later build); a destination that exists otherwise (a file the
// agent edited) is left alone. A link swapped in meanwhile is refused, an
// error naming it.
func copyInclude(root, dir string, include []string) error {
	base := treeBase(root, dir)
	for _, rel := range include {
		dst := filepath.Join(dir, rel)
		if err := removeLinks(base, dir, rel); err != nil {
			return fmt.Errorf("worktree-include: %w", err)
		}
		if _, err := safefile.Lstat(base, dst); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("worktree-include: %w", err)
		}
		data, perm, err := readSource(root, rel)
		if err != nil {
			return fmt.Errorf("worktree-include: %w", err)
		}
		if err := safefile.MkdirAll(base, filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("worktree-include: %w", err)
		}
		f, err := safefile.Create(base, dst, perm)
		if errors.Is(err, fs.ErrExist) {
			continue // made meanwhile
		}
		if err != nil {
			return fmt.Errorf("worktree-include: %w", err)
		}
		_, werr := f.Write(data)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return fmt.Errorf("worktree-include: %s: %w", dst, werr)
		}
	}
	return nil
}

// removeLinks walks rel below dir one component at a time, without
// following a link, and removes the first component that is a symbolic
// link (the link itself: its target is not touched). It stops at a
// component that is missing or not a directory.
func removeLinks(base, dir, rel string) error {
	p := dir
	for c := range strings.SplitSeq(filepath.ToSlash(rel), "/") {
		p = filepath.Join(p, c)
		fi, err := safefile.Lstat(base, p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return safefile.Remove(base, p)
		}
		if !fi.IsDir() {
			return nil
		}
	}
	return nil
}

// moveNoFollow moves from to to, both below base, following no link on
// the way to either: from's directory is opened and to's made where
// missing through safefile (a link there is refused), and the rename is
// made between their descriptors. from's last component is moved as it
// is: a link there is moved, not followed.
func moveNoFollow(base, from, to string) error {
	fd, err := safefile.OpenDir(base, filepath.Dir(from))
	if err != nil {
		return err
	}
	defer fd.Close()
	td, err := safefile.MkdirAllDir(base, filepath.Dir(to), 0o755)
	if err != nil {
		return err
	}
	defer td.Close()
	return renameBetween(fd, filepath.Base(from), td, filepath.Base(to))
}

// readSource reads the include file rel of root, and its permissions.
func readSource(root, rel string) ([]byte, fs.FileMode, error) {
	f, err := safefile.Open(root, rel)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	data, err := io.ReadAll(f)
	return data, fi.Mode().Perm(), err
}

// includeSource checks a file a worktree-include pattern matched: ok is
// false for one that is not a regular file (skipped); a link is an error
// naming it, since it would not be copied (ralph follows no link).
func includeSource(root, rel string) (ok bool, err error) {
	fi, err := safefile.Lstat(root, rel)
	if errors.Is(err, safefile.ErrLink) {
		return false, err
	}
	if err != nil {
		return false, nil
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return false, &safefile.LinkError{Op: "copy", Path: filepath.Join(root, rel), Why: "is a symbolic link (list its target, or copy the file into the project)"}
	}
	return fi.Mode().IsRegular(), nil
}

// prepareWorktreeDir makes the directory of the workers' trees (below
// root when it lies there) and keeps it out of the project's git status:
// a .gitignore of "*" inside it, written where missing (created anew: a
// link there is left alone, never written through).
func prepareWorktreeDir(root, dir string) (os.FileInfo, error) {
	base := safefile.Within(root, dir, dir)
	if base == dir {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("parallel: worktrees: %w", err)
		}
	}
	if err := safefile.MkdirAll(base, dir, 0o755); err != nil {
		return nil, fmt.Errorf("parallel: worktrees: %w", err)
	}
	info, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("parallel: worktrees: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("parallel: worktrees: %s is a symbolic link or not a directory: ralph keeps its workers' trees in a real directory (move it away)", dir)
	}
	f, err := safefile.Create(base, filepath.Join(dir, ".gitignore"), 0o644)
	if errors.Is(err, fs.ErrExist) {
		return info, nil
	}
	if err != nil {
		return nil, fmt.Errorf("parallel: worktrees: %w", err)
	}
	_, err = f.WriteString("# ralph's worker trees (ARCHITECTURE.md §5): never part of the project\n*\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("parallel: worktrees: %w", err)
	}
	return info, nil
}

// openTreeLock opens (creating it if missing) the lock file of a tree,
// following no link.
func openTreeLock(root, path string) (*os.File, error) {
	return safefile.Append(treeBase(root, path), path, 0o644)
}
