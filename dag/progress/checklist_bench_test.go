package progress

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

// nestedChecklist renders a markdown checklist of about size bytes in one
// of the shapes that once took the scanner quadratic time (each of them
// over a minute at 800 KB):
//
//   - "markers": one line opening size/8 nested list items ("- - - … [ ]
//     x"), then blank lines, each of which every open item continues;
//   - "stars": one line of "* * * … [ ] x", at each marker of which the
//     rest of the line was read again as a possible thematic break;
//   - "staircase": a loose list whose every box is one level deeper than
//     the one before, its indentation read again for each open item;
//
// and "nested", an ordinary checklist (phases of boxes three levels deep
// with descriptions), to show the common case did not pay for the others.
func nestedChecklist(shape string, size int) []byte {
	var b bytes.Buffer
	switch shape {
	case "markers":
		b.WriteString(strings.Repeat("- ", size/8))
		b.WriteString("[ ] the deepest box\n")
		b.WriteString(strings.Repeat("\n", max(0, size-b.Len())))
	case "stars":
		b.WriteString(strings.Repeat("* ", size/2))
		b.WriteString("[ ] the deepest box\n")
	case "staircase":
		for depth := 0; b.Len() < size; depth++ {
			fmt.Fprintf(&b, "%s- [ ] step %d\n\n", strings.Repeat("  ", depth), depth)
		}
	case "nested":
		for p := 1; b.Len() < size; p++ {
			fmt.Fprintf(&b, "## Phase %d: part %d\n\n", p, p)
			for i := 1; i <= 20; i++ {
				fmt.Fprintf(&b, "- [ ] Task %d.%d\n  What to do for task %d.\n", p, i, i)
				for j := 1; j <= 3; j++ {
					fmt.Fprintf(&b, "  - [x] Step %d.%d.%d\n    - [ ] Check %d.%d.%d\n", p, i, j, p, i, j)
				}
			}
			b.WriteString("\n")
		}
	default:
		panic("unknown shape " + shape)
	}
	return b.Bytes()
}

var nestedShapes = []string{"markers", "stars", "staircase", "nested"}

// BenchmarkChecklistNested reads 800 KB checklists of each shape of
// nestedChecklist, as `ralph task import FILE.md` does:
//
//	go test ./dag/progress/ -run '^$' -bench '^BenchmarkChecklistNested$' -benchmem
func BenchmarkChecklistNested(b *testing.B) {
	for _, shape := range nestedShapes {
		b.Run(shape, func(b *testing.B) {
			src := nestedChecklist(shape, 800<<10)
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				if _, err := Checklist(src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestChecklistNestedIsLinear reads each shape of nestedChecklist at
// 800 KB: in linear time each takes milliseconds (tens under -race); the
// bound is far from that and far below the minutes the quadratic scanner
// took, so that a loaded machine cannot fail it.
func TestChecklistNestedIsLinear(t *testing.T) {
	for _, shape := range nestedShapes {
		t.Run(shape, func(t *testing.T) {
			src := nestedChecklist(shape, 800<<10)
			start := time.Now()
			items, err := Checklist(src)
			took := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if len(items) == 0 {
				t.Fatal("no items")
			}
			if took > 20*time.Second {
				t.Errorf("reading %d bytes took %v", len(src), took)
			}
			t.Logf("%d bytes, %d items: %v", len(src), len(items), took)
		})
	}
}
