package safefile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ErrLink is what every *LinkError is (errors.Is): a link was found where
// ralph follows none.
var ErrLink = errors.New("link refused")

// LinkError says that a link was refused: Path is the full path of the
// component, Why what was found there.
type LinkError struct {
	Op   string // "open", "create", "append", "mkdir", …
	Path string
	Why  string // "is a symbolic link", "has 2 hard links", …
}

// Error reads "refused a link: PATH is a symbolic link".
func (e *LinkError) Error() string {
	return "refused a link: " + e.Path + " " + e.Why
}

// Is reports whether target is ErrLink.
func (e *LinkError) Is(target error) bool { return target == ErrLink }

const (
	whySymlink  = "is a symbolic link"
	whyReplaced = "was replaced while it was opened"
)

func whyLinks(n uint64) string { return fmt.Sprintf("has %d hard links", n) }

// Dir is a directory reached from a trusted base without following a
// link. Its methods take names relative to it (more than one component
// allowed, each checked the same way). A Dir is safe for concurrent use;
// Close it when done.
type Dir struct {
	root *os.Root
	path string // for messages: the base joined with the name walked
}

// Path is the directory's path as it was reached (base + name).
func (d *Dir) Path() string { return d.path }

// Close releases the directory's descriptor.
func (d *Dir) Close() error { return d.root.Close() }

// OpenDir opens the directory name below base (name "" or "." for base
// itself).
func OpenDir(base, name string) (*Dir, error) {
	rel, err := relName(base, name)
	if err != nil {
		return nil, err
	}
	return openDir(base, rel, false, 0)
}

// MkdirAll makes the directory name below base and the missing ones on
// the way, with perm (before umask); an existing link on the way is
// refused, not followed.
func MkdirAll(base, name string, perm fs.FileMode) error {
	d, err := MkdirAllDir(base, name, perm)
	if err != nil {
		return err
	}
	return d.Close()
}

// MkdirAllDir is MkdirAll that returns the directory, open.
func MkdirAllDir(base, name string, perm fs.FileMode) (*Dir, error) {
	rel, err := relName(base, name)
	if err != nil {
		return nil, err
	}
	return openDir(base, rel, true, perm)
}

// Mkdir makes the directory name below base, which must not exist
// (fs.ErrExist otherwise, a link there included); its parent must.
func Mkdir(base, name string, perm fs.FileMode) error {
	return inParent(base, name, func(d *Dir, last string) error { return d.Mkdir(last, perm) })
}

// Open opens the regular file name below base for reading.
func Open(base, name string) (*os.File, error) {
	return inParentFile(base, name, func(d *Dir, last string) (*os.File, error) { return d.Open(last) })
}

// ReadFile reads the regular file name below base.
func ReadFile(base, name string) ([]byte, error) {
	var data []byte
	err := inParent(base, name, func(d *Dir, last string) error {
		var err error
		data, err = d.ReadFile(last)
		return err
	})
	return data, err
}

// Create creates the file name below base, which must not exist
// (fs.ErrExist otherwise, a link there included), open for reading and
// writing; its directory must exist.
func Create(base, name string, perm fs.FileMode) (*os.File, error) {
	return inParentFile(base, name, func(d *Dir, last string) (*os.File, error) { return d.Create(last, perm) })
}

// Append opens the file name below base for appending (and reading),
// creating it if missing; an existing one must be a regular file with a
// single name. Its directory must exist.
func Append(base, name string, perm fs.FileMode) (*os.File, error) {
	return inParentFile(base, name, func(d *Dir, last string) (*os.File, error) { return d.Append(last, perm) })
}

// WriteFile replaces the file name below base with data atomically (see
// Dir.WriteFile); its directory must exist.
func WriteFile(base, name string, data []byte, perm fs.FileMode) error {
	return inParent(base, name, func(d *Dir, last string) error { return d.WriteFile(last, data, perm) })
}

// Lstat describes name below base without following a link at it; the
// directories on the way are checked as everywhere.
func Lstat(base, name string) (fs.FileInfo, error) {
	var fi fs.FileInfo
	err := inParent(base, name, func(d *Dir, last string) error {
		var err error
		fi, err = d.Lstat(last)
		return err
	})
	return fi, err
}

// Remove removes the file or empty directory name below base (a link
// there is removed, not followed).
func Remove(base, name string) error {
	return inParent(base, name, func(d *Dir, last string) error { return d.Remove(last) })
}

// ReadDir lists the directory name below base, sorted by name.
func ReadDir(base, name string) ([]fs.DirEntry, error) {
	d, err := OpenDir(base, name)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.ReadDir(".")
}

// HardLinks is fi's hard link count; ok is false where the platform
// reports none.
func HardLinks(fi fs.FileInfo) (n uint64, ok bool) { return links(fi) }

// Within returns root when path lies inside it (root itself included),
// else fallback: the base to trust for path.
func Within(root, path, fallback string) string {
	if root != "" {
		if rel, err := filepath.Rel(root, path); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel) {
			return root
		}
	}
	return fallback
}

// inParent walks to the directory holding name below base and calls f
// with it and name's last component.
func inParent(base, name string, f func(d *Dir, last string) error) error {
	rel, err := relName(base, name)
	if err != nil {
		return err
	}
	dir, last := filepath.Split(rel)
	if last == "" || last == "." {
		return &fs.PathError{Op: "open", Path: filepath.Join(base, rel), Err: errors.New("not a file name")}
	}
	d, err := openDir(base, filepath.Clean(dir), false, 0)
	if err != nil {
		return err
	}
	defer d.Close()
	return f(d, last)
}

func inParentFile(base, name string, f func(d *Dir, last string) (*os.File, error)) (*os.File, error) {
	var out *os.File
	err := inParent(base, name, func(d *Dir, last string) error {
		var err error
		out, err = f(d, last)
		return err
	})
	return out, err
}

// relName returns name relative to base, cleaned: "." for base itself.
// An absolute name must lie below base; no name may climb out of it.
func relName(base, name string) (string, error) {
	if name == "" {
		return ".", nil
	}
	rel := filepath.Clean(name)
	if filepath.IsAbs(rel) {
		absBase, err := filepath.Abs(base)
		if err != nil {
			return "", err
		}
		if rel, err = filepath.Rel(absBase, rel); err != nil {
			return "", &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("not below %s", base)}
		}
	}
	if rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("not below %s", base)}
	}
	for _, c := range strings.Split(rel, string(filepath.Separator)) {
		if c == ".." {
			return "", &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("not below %s", base)}
		}
	}
	return rel, nil
}

// openDir opens base (trusted) and walks rel below it one component at a
// time, making missing ones when mkdir is set.
func openDir(base, rel string, mkdir bool, perm fs.FileMode) (*Dir, error) {
	r, err := os.OpenRoot(base)
	if err != nil {
		return nil, err
	}
	d := &Dir{root: r, path: base}
	if rel == "." {
		return d, nil
	}
	sub, err := d.walk(rel, mkdir, perm)
	d.Close()
	return sub, err
}

// walk returns the directory rel below d (a new Dir; d stays open).
func (d *Dir) walk(rel string, mkdir bool, perm fs.FileMode) (*Dir, error) {
	cur := d
	for _, c := range strings.Split(filepath.Clean(rel), string(filepath.Separator)) {
		if c == "." || c == "" {
			continue
		}
		if c == ".." {
			return nil, &fs.PathError{Op: "open", Path: filepath.Join(cur.path, c), Err: errors.New("not below the base")}
		}
		next, err := cur.step(c, mkdir, perm)
		if cur != d {
			cur.Close()
		}
		if err != nil {
			return nil, err
		}
		cur = next
	}
	if cur == d {
		// rel named d itself: a Dir of its own, so that closing one
		// leaves the other open.
		r, err := d.root.OpenRoot(".")
		if err != nil {
			return nil, d.pathErr("open", ".", err)
		}
		return &Dir{root: r, path: d.path}, nil
	}
	return cur, nil
}

// step opens the directory c of d: lstat (not a link, a directory),
// open, fstat (the same directory).
func (d *Dir) step(c string, mkdir bool, perm fs.FileMode) (*Dir, error) {
	full := filepath.Join(d.path, c)
	fi, err := d.root.Lstat(c)
	if mkdir && errors.Is(err, fs.ErrNotExist) {
		if err := d.root.Mkdir(c, perm); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, d.pathErr("mkdir", c, err)
		}
		fi, err = d.root.Lstat(c)
	}
	if err != nil {
		return nil, d.pathErr("open", c, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, &LinkError{Op: "open", Path: full, Why: whySymlink}
	}
	if !fi.IsDir() {
		return nil, &fs.PathError{Op: "open", Path: full, Err: errors.New("not a directory")}
	}
	r, err := d.root.OpenRoot(c)
	if err != nil {
		if d.isLink(c) {
			return nil, &LinkError{Op: "open", Path: full, Why: whySymlink}
		}
		return nil, d.pathErr("open", c, err)
	}
	st, err := r.Stat(".")
	if err != nil || !os.SameFile(fi, st) {
		r.Close()
		return nil, &LinkError{Op: "open", Path: full, Why: whyReplaced}
	}
	return &Dir{root: r, path: full}, nil
}

// isLink reports whether c is a symbolic link now.
func (d *Dir) isLink(c string) bool {
	fi, err := d.root.Lstat(c)
	return err == nil && fi.Mode()&fs.ModeSymlink != 0
}

// pathErr gives an error of os.Root (which names the path relative to the
// root) the full path; a *LinkError is returned as it is.
func (d *Dir) pathErr(op, name string, err error) error {
	var le *LinkError
	if errors.As(err, &le) {
		return err
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: pe.Op, Path: filepath.Join(d.path, name), Err: pe.Err}
	}
	return &fs.PathError{Op: op, Path: filepath.Join(d.path, name), Err: err}
}

// parent returns the directory holding name (d itself or one below it,
// to be closed with the returned func) and name's last component.
func (d *Dir) parent(name string, mkdir bool, perm fs.FileMode) (*Dir, string, func(), error) {
	rel, err := relName(".", name)
	if err != nil {
		return nil, "", nil, err
	}
	dir, last := filepath.Split(rel)
	if last == "" || last == "." {
		return nil, "", nil, &fs.PathError{Op: "open", Path: filepath.Join(d.path, rel), Err: errors.New("not a file name")}
	}
	if dir == "" {
		return d, last, func() {}, nil
	}
	sub, err := d.walk(dir, mkdir, perm)
	if err != nil {
		return nil, "", nil, err
	}
	return sub, last, func() { sub.Close() }, nil
}

// OpenDir opens the directory name below d.
func (d *Dir) OpenDir(name string) (*Dir, error) {
	rel, err := relName(".", name)
	if err != nil {
		return nil, err
	}
	return d.walk(rel, false, 0)
}

// MkdirAll makes the directory name below d and the missing ones on the
// way.
func (d *Dir) MkdirAll(name string, perm fs.FileMode) error {
	rel, err := relName(".", name)
	if err != nil {
		return err
	}
	sub, err := d.walk(rel, true, perm)
	if err != nil {
		return err
	}
	return sub.Close()
}

// Mkdir makes the directory name, which must not exist.
func (d *Dir) Mkdir(name string, perm fs.FileMode) error {
	p, last, done, err := d.parent(name, false, 0)
	if err != nil {
		return err
	}
	defer done()
	if err := p.root.Mkdir(last, perm); err != nil {
		return p.pathErr("mkdir", last, err)
	}
	return nil
}

// Lstat describes name without following a link at it.
func (d *Dir) Lstat(name string) (fs.FileInfo, error) {
	p, last, done, err := d.parent(name, false, 0)
	if err != nil {
		return nil, err
	}
	defer done()
	fi, err := p.root.Lstat(last)
	if err != nil {
		return nil, p.pathErr("lstat", last, err)
	}
	return fi, nil
}

// Remove removes the file or empty directory name (a link is removed,
// not followed).
func (d *Dir) Remove(name string) error {
	p, last, done, err := d.parent(name, false, 0)
	if err != nil {
		return err
	}
	defer done()
	if err := p.root.Remove(last); err != nil {
		return p.pathErr("remove", last, err)
	}
	return nil
}

// RemoveAll removes name and, for a directory, everything in it, without
// following any link in it (a link is removed, not what it names). A
// missing name is no error.
func (d *Dir) RemoveAll(name string) error {
	p, last, done, err := d.parent(name, false, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer done()
	if err := p.root.RemoveAll(last); err != nil {
		return p.pathErr("removeall", last, err)
	}
	return nil
}

// Readlink returns the target of the symbolic link name (the link itself
// is read, never followed).
func (d *Dir) Readlink(name string) (string, error) {
	p, last, done, err := d.parent(name, false, 0)
	if err != nil {
		return "", err
	}
	defer done()
	t, err := p.root.Readlink(last)
	if err != nil {
		return "", p.pathErr("readlink", last, err)
	}
	return t, nil
}

// Symlink makes name a symbolic link to target, which is not checked (a
// link ralph makes is one it means: restoring one it recorded). An
// existing name is fs.ErrExist.
func (d *Dir) Symlink(target, name string) error {
	p, last, done, err := d.parent(name, false, 0)
	if err != nil {
		return err
	}
	defer done()
	if err := p.root.Symlink(target, last); err != nil {
		var le *os.LinkError
		if errors.As(err, &le) {
			err = le.Err
		}
		return &fs.PathError{Op: "symlink", Path: filepath.Join(p.path, last), Err: err}
	}
	return nil
}

// Chmod sets the mode of the file or directory name; a link at name is
// refused, not followed. (Should one be swapped in after the check, the
// call changes the link itself or nothing: os.Root never follows it.)
func (d *Dir) Chmod(name string, mode fs.FileMode) error {
	return d.inPlace("chmod", name, func(p *Dir, last string) error { return p.root.Chmod(last, mode) })
}

// Chtimes sets the access and modification times of name, as os.Chtimes
// does; a link at name is refused, not followed, as in Chmod.
func (d *Dir) Chtimes(name string, atime, mtime time.Time) error {
	return d.inPlace("chtimes", name, func(p *Dir, last string) error { return p.root.Chtimes(last, atime, mtime) })
}

// inPlace calls f on name's directory and last component once name is
// known not to be a link.
func (d *Dir) inPlace(op, name string, f func(p *Dir, last string) error) error {
	p, last, done, err := d.parent(name, false, 0)
	if err != nil {
		return err
	}
	defer done()
	fi, err := p.root.Lstat(last)
	if err != nil {
		return p.pathErr(op, last, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return &LinkError{Op: op, Path: filepath.Join(p.path, last), Why: whySymlink}
	}
	if err := f(p, last); err != nil {
		return p.pathErr(op, last, err)
	}
	return nil
}

// Rename renames oldname to newname, both in the same directory below d;
// a link at newname is replaced, not followed.
func (d *Dir) Rename(oldname, newname string) error {
	op, olast, odone, err := d.parent(oldname, false, 0)
	if err != nil {
		return err
	}
	defer odone()
	if filepath.Dir(filepath.Clean(oldname)) != filepath.Dir(filepath.Clean(newname)) {
		return &os.LinkError{Op: "rename", Old: filepath.Join(d.path, oldname), New: filepath.Join(d.path, newname), Err: errors.New("not in the same directory")}
	}
	if err := op.root.Rename(olast, filepath.Base(newname)); err != nil {
		var le *os.LinkError
		if errors.As(err, &le) {
			err = le.Err
		}
		return &os.LinkError{Op: "rename", Old: filepath.Join(d.path, oldname), New: filepath.Join(d.path, newname), Err: err}
	}
	return nil
}

// ReadDir lists the directory name below d, sorted by name ("." for d).
func (d *Dir) ReadDir(name string) ([]fs.DirEntry, error) {
	sub := d
	if rel, err := relName(".", name); err != nil {
		return nil, err
	} else if rel != "." {
		if sub, err = d.walk(rel, false, 0); err != nil {
			return nil, err
		}
		defer sub.Close()
	}
	f, err := sub.root.Open(".")
	if err != nil {
		return nil, sub.pathErr("open", ".", err)
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: sub.path, Err: err}
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, nil
}

// Sync fsyncs the directory (after a rename into it).
func (d *Dir) Sync() error {
	f, err := d.root.Open(".")
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// Open opens the regular file name for reading.
func (d *Dir) Open(name string) (*os.File, error) {
	return d.openExisting("open", name, os.O_RDONLY, false)
}

// ReadFile reads the regular file name.
func (d *Dir) ReadFile(name string) ([]byte, error) {
	f, err := d.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: f.Name(), Err: err}
	}
	return data, nil
}

// Create creates the file name, which must not exist (fs.ErrExist
// otherwise, a link there included), open for reading and writing.
func (d *Dir) Create(name string, perm fs.FileMode) (*os.File, error) {
	p, last, done, err := d.parent(name, false, 0)
	if err != nil {
		return nil, err
	}
	defer done()
	return p.createIn(last, perm)
}

func (d *Dir) createIn(last string, perm fs.FileMode) (*os.File, error) {
	f, err := d.root.OpenFile(last, os.O_RDWR|os.O_CREATE|os.O_EXCL|oNonblock, perm)
	if err != nil {
		return nil, d.pathErr("create", last, err)
	}
	return f, nil
}

// Append opens the file name for appending and reading, creating it if
// missing: an existing one must be a regular file, not a link, with a
// single name.
func (d *Dir) Append(name string, perm fs.FileMode) (*os.File, error) {
	p, last, done, err := d.parent(name, false, 0)
	if err != nil {
		return nil, err
	}
	defer done()
	// Create or open; each can lose a race with someone removing or
	// making the file, and is tried again a few times.
	for range 4 {
		f, err := p.root.OpenFile(last, os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL|oNonblock, perm)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, p.pathErr("append", last, err)
		}
		f, err = p.openExisting("append", last, os.O_RDWR|os.O_APPEND, true)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		return f, err
	}
	return nil, &fs.PathError{Op: "append", Path: filepath.Join(p.path, last), Err: errors.New("the file kept appearing and disappearing")}
}

// openExisting opens the existing file name with flag: lstat (a regular
// file, not a link; with one name when single), open, fstat (the same
// file, still with one name).
func (d *Dir) openExisting(op, name string, flag int, single bool) (*os.File, error) {
	p, last, done, err := d.parent(name, false, 0)
	if err != nil {
		return nil, err
	}
	defer done()
	full := filepath.Join(p.path, last)
	fi, err := p.root.Lstat(last)
	if err != nil {
		return nil, p.pathErr(op, last, err)
	}
	if err := check(op, full, fi, single); err != nil {
		return nil, err
	}
	f, err := p.root.OpenFile(last, flag|oNonblock, 0)
	if err != nil {
		if p.isLink(last) {
			return nil, &LinkError{Op: op, Path: full, Why: whySymlink}
		}
		return nil, p.pathErr(op, last, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, &fs.PathError{Op: op, Path: full, Err: err}
	}
	if !os.SameFile(fi, st) {
		f.Close()
		return nil, &LinkError{Op: op, Path: full, Why: whyReplaced}
	}
	if err := check(op, full, st, single); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// check refuses what fi shows is not a plain file of its own: a link, a
// FIFO, a socket, a directory, a block device, and (single) a file with
// more than one name. A character device (/dev/null, /dev/full named by a
// caller) passes: no unprivileged agent can make one, or link one in from
// /dev (another file system).
func check(op, full string, fi fs.FileInfo, single bool) error {
	if fi.Mode()&fs.ModeSymlink != 0 {
		return &LinkError{Op: op, Path: full, Why: whySymlink}
	}
	if !fi.Mode().IsRegular() && fi.Mode().Type() != fs.ModeDevice|fs.ModeCharDevice {
		return &fs.PathError{Op: op, Path: full, Err: errors.New("not a regular file")}
	}
	if n, ok := links(fi); single && ok && n > 1 {
		return &LinkError{Op: op, Path: full, Why: whyLinks(n)}
	}
	return nil
}

// WriteFile replaces the file name with data atomically: a new temporary
// file in the same directory (".<name>.ralph-*.tmp", O_EXCL) gets data
// and exactly perm (no umask), is fsynced and renamed over name; a link
// at name is replaced, never written through. If anything fails before
// the rename, name is untouched and the temporary file removed. The
// directory is fsynced after, best effort.
func (d *Dir) WriteFile(name string, data []byte, perm fs.FileMode) error {
	return d.Replace(name, perm, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	}, nil)
}

// Replace is WriteFile with the content written by write, and the rename
// done by rename (nil: Dir.Rename) — a seam for tests that simulate a
// crash before the rename.
func (d *Dir) Replace(name string, perm fs.FileMode, write func(*os.File) error, rename func(d *Dir, oldname, newname string) error) (err error) {
	p, last, done, err := d.parent(name, false, 0)
	if err != nil {
		return err
	}
	defer done()
	if rename == nil {
		rename = (*Dir).Rename
	}
	var f *os.File
	var tmp string
	for range 8 {
		tmp = "." + last + ".ralph-" + randomSuffix() + ".tmp"
		if f, err = p.createIn(tmp, 0o600); !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			p.root.Remove(tmp)
		}
	}()
	if err = write(f); err != nil {
		return &fs.PathError{Op: "write", Path: filepath.Join(p.path, tmp), Err: err}
	}
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = rename(p, tmp, last); err != nil {
		return err
	}
	p.Sync() // best effort: the rename is durable on most systems anyway
	return nil
}

func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// OpenSelf opens the directory d itself, for a system call that takes a
// directory's descriptor (renameat): what it opens is the directory d
// reached, whatever its path names now. Close the file when done.
func (d *Dir) OpenSelf() (*os.File, error) {
	f, err := d.root.Open(".")
	if err != nil {
		return nil, d.pathErr("open", ".", err)
	}
	return f, nil
}
