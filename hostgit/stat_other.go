//go:build !unix

package hostgit

import "os"

// devOf is 0 where the system has no device numbers (Windows): the
// discovery of a repository then never stops at a filesystem boundary,
// which is git for Windows' own behaviour.
func devOf(os.FileInfo) uint64 { return 0 }

// statStamp is what os.Stat tells of f: its size, mode and modification
// time (no inode or change time). A config file rewritten within the
// same clock tick at the same size goes unnoticed, as it would by git.
func statStamp(f string) stamp {
	fi, err := os.Stat(f)
	if err != nil {
		return stamp{}
	}
	return stamp{exists: true, size: uint64(fi.Size()), mode: uint32(fi.Mode()), mtime: fi.ModTime().UnixNano()}
}
