package agentproc

import (
	"bufio"
	"errors"
	"io"
	"unsafe"
)

// LineReader reads lines of any length from an agent's stream. Most lines
// are returned where they lie in its 64 KiB buffer; a longer one is
// gathered in a buffer that is reused up to 4 MiB, and a longer one still
// (a line of more than 4 MiB: a tool result echoing a huge file) goes to
// memory of its own, given back by the next ReadLine or by Release. A
// LineReader is not safe for concurrent use.
type LineReader struct {
	r    *bufio.Reader
	long lineBuf // accumulates lines longer than the reader's buffer
	eof  bool
}

// lineReaderSize is the bufio.Reader's buffer: most lines fit, so they
// are returned in place without a copy.
const lineReaderSize = 64 << 10

// NewLineReader returns a LineReader reading from r.
func NewLineReader(r io.Reader) *LineReader {
	return &LineReader{r: bufio.NewReaderSize(r, lineReaderSize)}
}

// Reset makes l read a new stream from r, keeping its buffers.
func (l *LineReader) Reset(r io.Reader) {
	l.r.Reset(r)
	l.long.reset()
	l.eof = false
}

// ReadLine returns the next line, with its newline if it has one (the
// last line may have none). The line is valid until the next call to
// ReadLine, Reset or Release. It returns io.EOF after the last line, and
// any other read error as is.
func (l *LineReader) ReadLine() ([]byte, error) {
	if l.eof {
		return nil, io.EOF
	}
	l.long.reset()
	for {
		chunk, err := l.r.ReadSlice('\n')
		switch {
		case err == nil:
			if len(l.long.b) == 0 {
				return chunk, nil // the common case: no copy
			}
			l.long.add(chunk)
			return l.long.b, nil
		case errors.Is(err, bufio.ErrBufferFull):
			l.long.add(chunk)
		case errors.Is(err, io.EOF):
			l.eof = true
			l.long.add(chunk)
			if len(l.long.b) == 0 {
				return nil, io.EOF
			}
			return l.long.b, nil
		default:
			return nil, err
		}
	}
}

// Huge reports whether the last line is longer than 4 MiB, in memory of
// its own that Release gives back.
func (l *LineReader) Huge() bool { return l.long.mapped || len(l.long.b) > heapLine }

// Release gives back the memory of a huge last line at once, rather than
// at the next ReadLine; the line must not be used after it.
func (l *LineReader) Release() { l.long.reset() }

// Offset returns where p starts in the last line, if p lies in memory of
// the line's own (a huge line on Linux): only there can Discard give
// bytes back.
func (l *LineReader) Offset(p []byte) (int, bool) { return l.long.offset(p) }

// Discard gives back the memory of the whole pages of the last line's
// bytes [from, to) — bytes that will not be read again (they read as
// zeros afterwards) — when the line lies in memory of its own. It
// returns where it stopped (the last page boundary at or before to, or
// from), so that the next call can go on from there: a decoder copying a
// huge string out of the line gives back what it has copied as it goes.
func (l *LineReader) Discard(from, to int) int { return l.long.discard(from, to) }

// A stream line can be huge: a tool result that echoes a 200 MB file, an
// answer whose text is enormous. Grown as an ordinary slice, such a line
// costs several copies of itself: append grows a big slice by a quarter at
// a time, every generation stays on the heap until the collector comes,
// and the copy from one generation to the next needs both at once (a 64
// MB line cost 266 MB). So a line that outgrows heapLine moves to memory
// of its own, outside the Go heap where the platform allows (mmap on
// Linux): it grows without copying (mremap moves pages, not bytes), the
// bytes of a big string can be given back while the string is copied out
// of it (discard), and the whole of it is given back as soon as the line
// is decoded. A huge line then costs about one copy of itself.

// heapLine is the longest line kept in an ordinary slice, which is reused
// from line to line (most long lines are tens of kilobytes: a file read).
// A longer line costs a mapping of its own (mmap, page faults, munmap):
// at 1 MB, that halved the parsing rate of a stream with a 1 MB line in
// every 4 MB. The price is up to 4 MB kept, and a first growth to it.
const heapLine = 4 << 20

// lineBuf accumulates a line longer than the reader's buffer.
type lineBuf struct {
	b      []byte // the line so far: heap's memory, or a mapping of its own
	mapped bool   // b is memory of its own (see mapMem), not Go heap
	heap   []byte // the heap slice kept from line to line, up to heapLine
}

// add appends p to the line.
func (l *lineBuf) add(p []byte) {
	need := len(l.b) + len(p)
	if need > cap(l.b) {
		if l.mapped || need > heapLine {
			l.grow(need)
		} else {
			// Doubling: append grows big slices by a quarter, leaving
			// more generations behind.
			l.heap = make([]byte, len(l.b), min(max(need, 2*cap(l.b)), heapLine))
			copy(l.heap, l.b)
			l.b = l.heap
		}
	}
	l.b = append(l.b, p...)
}

// grow makes room for need bytes in memory of the line's own, doubling
// its size; if the platform has none (or refuses), the line stays (or
// goes back) on the heap and append grows it.
func (l *lineBuf) grow(need int) {
	size := roundPage(max(need, 2*cap(l.b)))
	if l.mapped {
		if b, err := remapMem(l.b[:cap(l.b)], size); err == nil {
			l.b = b[:len(l.b)]
			return
		}
	} else if b, err := mapMem(size); err == nil {
		n := copy(b, l.b)
		l.b, l.mapped = b[:n], true
		return
	}
	if l.mapped { // the mapping could not grow: go back to the heap
		b := make([]byte, len(l.b), need)
		copy(b, l.b)
		unmapMem(l.b[:cap(l.b)])
		l.b, l.mapped = b, false
	}
}

// reset empties the line for the next one. Memory of its own is given
// back, and so is a heap slice that grew past heapLine (the platform had
// no mapping to offer); the heap slice up to heapLine is kept for reuse.
func (l *lineBuf) reset() {
	if l.mapped {
		unmapMem(l.b[:cap(l.b)])
		l.mapped = false
	}
	l.b = l.heap[:0]
}

// offset returns where p starts in the line, if p lies in memory of the
// line's own (only there can bytes be discarded).
func (l *lineBuf) offset(p []byte) (int, bool) {
	if !l.mapped || len(p) == 0 || len(l.b) == 0 {
		return 0, false
	}
	off := addrOf(p) - addrOf(l.b)
	if off < 0 || off+len(p) > len(l.b) {
		return 0, false
	}
	return off, true
}

// discard gives back the memory of the whole pages of l.b[from:to]: bytes
// that will not be read again (they read as zeros afterwards). It returns
// where it stopped (the last page boundary at or before to, or from), so
// that the next call can go on from there.
func (l *lineBuf) discard(from, to int) int {
	start, end := roundPage(from), to&^(pageSize-1)
	if !l.mapped || end <= start || end > len(l.b) {
		return from
	}
	discardMem(l.b[start:end])
	return end
}

// pageSize is the unit memory is given back in; 4 KiB pages are the
// smallest there are, and discard rounds inward, so a larger real page
// only means that less is given back.
const pageSize = 4096

func roundPage(n int) int { return (n + pageSize - 1) &^ (pageSize - 1) }

// addrOf is the address of b's first byte, to tell where a slice lies in
// the line.
func addrOf(b []byte) int { return int(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }
