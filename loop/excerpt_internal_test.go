package loop

import (
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"
)

// The functions excerpt and summary were, before they learnt to fold only
// the end of a text: the answers must not change.
func excerptWhole(text string, n int) string {
	s := strings.Join(strings.Fields(text), " ")
	if len(s) > n {
		i := len(s) - n
		for i < len(s) && !utf8.RuneStart(s[i]) {
			i++
		}
		s = "…" + s[i:]
	}
	return s
}

func summaryWhole(text string) string {
	return excerptWhole(sigilTags.ReplaceAllString(text, " "), summaryLimit)
}

// TestExcerptOfTheEnd compares excerpt and summary with folding the whole
// text, on texts whose ends are thick with spaces, sigils (some across
// where the folded end starts) and characters of several bytes.
func TestExcerptOfTheEnd(t *testing.T) {
	words := []string{"word", "é", "日本語", "<task-done>t-1</task-done>", "<promise>COMPLETE</promise>",
		"<verify-pass/>", "<verify-fail>a reason that is long enough to cross a window's start</verify-fail>",
		"<", ">", " ", "\n\n", strings.Repeat(" ", 300), strings.Repeat("\t", 2000)}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 400 {
		var b strings.Builder
		size := rng.IntN(20000)
		for b.Len() < size {
			b.WriteString(words[rng.IntN(len(words))])
			if rng.IntN(3) == 0 {
				b.WriteByte(' ')
			}
		}
		text := b.String()
		for _, n := range []int{0, 1, 200, 300} {
			if got, want := excerpt(text, n), excerptWhole(text, n); got != want {
				t.Fatalf("text %d (%d bytes), excerpt(%d):\n got %q\nwant %q", i, len(text), n, got, want)
			}
		}
		if got, want := summary(text), summaryWhole(text); got != want {
			t.Fatalf("text %d (%d bytes), summary:\n got %q\nwant %q", i, len(text), got, want)
		}
	}
}

// TestExcerptOfAHugeText: the summary and excerpt of a 64 MB answer cost
// what they keep, not copies of the answer and a slice of its words.
func TestExcerptOfAHugeText(t *testing.T) {
	text := strings.Repeat("the agent says a great deal here, ", (64<<20)/34) + "and at last: all done. <task-done>t-1</task-done>\n"
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	sum, ex := summary(text), excerpt(text, 300)
	runtime.ReadMemStats(&after)
	if !strings.HasSuffix(sum, "and at last: all done.") || len(sum) > summaryLimit+len("…") {
		t.Errorf("summary %q", sum)
	}
	if !strings.HasSuffix(ex, "all done. <task-done>t-1</task-done>") {
		t.Errorf("excerpt %q", ex)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("summary and excerpt of a %d MB answer allocated %d bytes", len(text)>>20, alloc)
	if alloc > 1<<20 {
		t.Errorf("summary and excerpt allocated %d bytes, want under 1 MB", alloc)
	}
}
