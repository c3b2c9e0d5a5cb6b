package agentproc

import (
	"golang.org/x/sys/unix"
)

// mapMem returns n bytes of anonymous memory of their own, outside the Go
// heap: pages count only once written, and unmapMem gives them back at
// once.
func mapMem(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
}

// remapMem grows the mapping b (all of it: len(b) == cap(b)) to n bytes,
// moving its pages, not its bytes, if it has to move.
func remapMem(b []byte, n int) ([]byte, error) {
	return unix.Mremap(b, n, unix.MREMAP_MAYMOVE)
}

// unmapMem gives the mapping b (all of it) back.
func unmapMem(b []byte) { _ = unix.Munmap(b) }

// discardMem gives back the pages of b (page-aligned, inside a mapping),
// which then read as zeros.
func discardMem(b []byte) { _ = unix.Madvise(b, unix.MADV_DONTNEED) }
