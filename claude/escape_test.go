package claude

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestEscapeControls(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text, tabs\tand\nnewlines", "plain text, tabs\tand\nnewlines"},
		{"screen clear \x1b[2J\x1b[H and \x1bc", `screen clear \x1b[2J\x1b[H and \x1bc`},
		{"clipboard \x1b]52;c;ZWNobyBwd25lZA==\x07 done", `clipboard \x1b]52;c;ZWNobyBwd25lZA==\a done`},
		{"title \x1b]0;owned\x1b\\", `title \x1b]0;owned\x1b\`},
		{"over\rwrite", `over\rwrite`},
		{"\x00\x01\b\f\v\x1f\x7f", `\x00\x01\b\f\v\x1f\u007f`},
		{"C1 CSI \u009b2J and NEL \u0085", `C1 CSI \u009b2J and NEL \u0085`},
		{"bad UTF-8 \x9b\xff\xe2\x82 end", `bad UTF-8 \x9b\xff\xe2\x82 end`},
		{"unicode é ✓ 🙂 \u00a0 kept", "unicode é ✓ 🙂 \u00a0 kept"},
		{`a literal \x1b stays`, `a literal \x1b stays`},
		{"", ""},
	}
	for _, tt := range tests {
		got := EscapeControls(tt.in)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("EscapeControls(%q) (-want +got):\n%s", tt.in, diff)
		}
		if again := EscapeControls(got); again != got {
			t.Errorf("not idempotent: %q then %q", got, again)
		}
		var w bytes.Buffer
		e := NewEscapeWriter(&w)
		// One byte a write: every UTF-8 sequence cut.
		for i := 0; i < len(tt.in); i++ {
			e.Write([]byte{tt.in[i]})
		}
		if err := e.Flush(); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, w.String()); diff != "" {
			t.Errorf("EscapeWriter byte by byte (-want +got):\n%s", diff)
		}
	}
}

// JSON passed through the escaping keeps its meaning: encoding/json
// escapes C0 but writes DEL and C1 raw, which come out as JSON escapes.
func TestEscapeControlsKeepsJSON(t *testing.T) {
	var all strings.Builder
	for r := rune(0); r < 0xA0; r++ {
		all.WriteRune(r)
	}
	all.WriteString("é ✓ 🙂 \u2028")
	in := map[string]string{"title": all.String()}
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	shown := EscapeControls(string(raw))
	if i := firstControl(shown); i >= 0 {
		t.Fatalf("a control character left at %d: %q", i, shown)
	}
	var out map[string]string
	if err := json.Unmarshal([]byte(shown), &out); err != nil {
		t.Fatalf("%v: %s", err, shown)
	}
	if diff := cmp.Diff(in, out); diff != "" {
		t.Errorf("JSON changed meaning (-want +got):\n%s", diff)
	}
}

// TestEscapeWriterLarge: a write larger than the chunk, with sequences
// across the chunk's edges, comes out as EscapeControls shows it.
func TestEscapeWriterLarge(t *testing.T) {
	var b strings.Builder
	for b.Len() < 3*escapeChunk {
		b.WriteString("héllo ✓ \x1b[31m 🙂\u009b")
	}
	in := b.String()
	var w bytes.Buffer
	e := NewEscapeWriter(&w)
	for _, size := range []int{len(in) / 3, 7, escapeChunk + 1, len(in)} {
		w.Reset()
		for p := in; len(p) > 0; {
			n := min(size, len(p))
			if _, err := io.WriteString(e, p[:n]); err != nil {
				t.Fatal(err)
			}
			p = p[n:]
		}
		e.Flush()
		if w.String() != EscapeControls(in) {
			t.Fatalf("writes of %d bytes: output differs from EscapeControls", size)
		}
	}
}

func FuzzEscapeControls(f *testing.F) {
	f.Add([]byte("\x1b]52;c;aGk=\x07 \u009b \xe2\x82"), 3)
	f.Add([]byte("plain"), 1)
	f.Fuzz(func(t *testing.T, in []byte, split int) {
		got := EscapeControls(string(in))
		if i := firstControl(got); i >= 0 {
			t.Fatalf("control left at %d in %q", i, got)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("not UTF-8: %q", got)
		}
		if EscapeControls(got) != got {
			t.Fatalf("not idempotent: %q", got)
		}
		if firstControl(in) < 0 && got != string(in) {
			t.Fatalf("clean text changed: %q → %q", in, got)
		}
		var w bytes.Buffer
		e := NewEscapeWriter(&w)
		split = max(1, split%16+1)
		for p := in; len(p) > 0; {
			n := min(split, len(p))
			e.Write(p[:n])
			p = p[n:]
		}
		e.Flush()
		if w.String() != got {
			t.Fatalf("writer in pieces of %d: %q, want %q", split, w.String(), got)
		}
	})
}

func BenchmarkEscapeWriter(b *testing.B) {
	line := strings.Repeat("t-12345  pending  2    A task title that is quite ordinary (after t-12344)\n", 1000)
	e := NewEscapeWriter(io.Discard)
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		io.WriteString(e, line)
	}
}
