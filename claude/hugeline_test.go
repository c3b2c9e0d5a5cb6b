package claude

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/sigil"
)

// A stream line can be huge: a tool result echoing a big file, or an
// answer whose text is enormous. These tests run Runner.Run in a child
// process against a fake agent that prints one such line, and read the
// child's peak RSS (VmHWM): the cost of a line must stay near one copy of
// it.

var hugeBytes = flag.Int64("huge-bytes", 64<<20, "size of the line TestRunHugeLineMemory has the fake agent print (200<<20 for the README's second figure)")

// The kinds of huge line the fake agent prints.
const (
	hugeText   = "text"   // an assistant message with one huge text block
	hugeTool   = "tool"   // a user message with one huge tool_result
	hugeResult = "result" // a result line whose "result" text is huge
	hugeAnswer = "answer" // both: a huge answer, then the result repeating it, as Claude Code does
)

var hugeKinds = []string{hugeText, hugeTool, hugeResult, hugeAnswer}

// Environment of the huge-line fake agent and of the measuring child.
const (
	hugeKindEnv  = "RALPH_HUGE_KIND"
	hugeBytesEnv = "RALPH_HUGE_BYTES"
	hugeChildEnv = "RALPH_HUGE_CHILD" // kind:bytes, for the measuring child
)

// hugeSigil ends the huge texts: it must survive the trip whole.
const hugeSigil = "<task-done>t-1</task-done>"

// hugePattern is the body of the huge strings, already JSON-escaped:
// source code, with the quotes, tabs and newlines a real file has.
const hugePattern = `\tfmt.Println(\"hello, world\") // a line of code ` + "\u00e9" + `\n`

// hugeDecoded is hugePattern as it decodes.
const hugeDecoded = "\tfmt.Println(\"hello, world\") // a line of code \u00e9\n"

func init() {
	extraFakeModes["huge-line"] = fakeHugeLine
}

// fakeHugeLine prints an init line, one line of about $RALPH_HUGE_BYTES
// bytes of kind $RALPH_HUGE_KIND (two for the answer kind) and a result
// (the huge line itself for the result and answer kinds). The huge
// strings end with hugeSigil.
func fakeHugeLine() int {
	kind := os.Getenv(hugeKindEnv)
	n, _ := strconv.ParseInt(os.Getenv(hugeBytesEnv), 10, 64)
	out(fakeInit)
	switch kind {
	case hugeText, hugeTool:
		printHugeLine(kind, n)
		out(fakeResult("after the huge line " + hugeSigil))
	case hugeResult:
		printHugeLine(kind, n)
	case hugeAnswer:
		printHugeLine(hugeText, n)
		printHugeLine(hugeResult, n)
	default:
		fmt.Fprintf(os.Stderr, "unknown huge kind %q\n", kind)
		return 2
	}
	return 0
}

// printHugeLine prints one line of about n bytes of kind text, tool or
// result; the huge string in it is the same for every kind and size n.
func printHugeLine(kind string, n int64) {
	var head, tail string
	switch kind {
	case hugeText:
		head = `{"type":"assistant","message":{"id":"m1","model":"fake-model","role":"assistant","content":[{"type":"text","text":"`
		tail = hugeSigil + `"}]},"session_id":"fake-1"}`
	case hugeTool:
		head = `{"type":"user","message":{"role":"user","content":[{"tool_use_id":"a","type":"tool_result","content":"`
		tail = hugeSigil + `","is_error":false}]},"session_id":"fake-1"}`
	case hugeResult:
		head = `{"type":"result","subtype":"success","is_error":false,"num_turns":1,"total_cost_usd":0.01,"session_id":"fake-1","result":"`
		tail = hugeSigil + `"}`
	}
	chunk := []byte(strings.Repeat(hugePattern, (1<<20)/len(hugePattern)))
	w := os.Stdout
	_, _ = io.WriteString(w, head)
	// The same body whatever the kind: a whole number of patterns.
	left := (n - 200) / int64(len(hugePattern)) * int64(len(hugePattern))
	for left > 0 {
		c := chunk[:min(int64(len(chunk)), left)]
		_, _ = w.Write(c)
		left -= int64(len(c))
	}
	out(tail)
}

// hugeRun is what the measuring child reports.
type hugeRun struct {
	peakKB  int64
	textLen int
	logLen  int64
	report  string
}

// runHugeChild runs the measuring child for a line of kind and size n and
// returns its report.
func runHugeChild(tb testing.TB, kind string, n int64) hugeRun {
	tb.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), hugeChildEnv+"="+kind+":"+strconv.FormatInt(n, 10), "GORACE=atexit_sleep_ms=0")
	outb, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("child: %v\n%s", err, outb)
	}
	var r hugeRun
	r.report = string(bytes.TrimSpace(outb))
	for _, f := range strings.Fields(r.report) {
		k, v, _ := strings.Cut(f, "=")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "vmhwm_kb":
			r.peakKB = n
		case "text":
			r.textLen = int(n)
		case "log":
			r.logLen = n
		}
	}
	if r.peakKB == 0 {
		tb.Fatalf("the child reported no peak RSS: %s", outb)
	}
	return r
}

// hugeBody reports whether text is the huge string printHugeLine prints
// for size n, decoded: whole, byte for byte (compared in place: a copy
// would count in the peak).
func hugeBody(text string, n int64) bool {
	k := int((n - 200) / int64(len(hugePattern)))
	if len(text) != k*len(hugeDecoded)+len(hugeSigil) || !strings.HasSuffix(text, hugeSigil) {
		return false
	}
	for i := 0; i < k*len(hugeDecoded); i += len(hugeDecoded) {
		if text[i:i+len(hugeDecoded)] != hugeDecoded {
			return false
		}
	}
	return true
}

// hugeChild is the measuring child: it runs the fake agent through
// Runner.Run with a terminal view (to io.Discard) on OnEvent, as the CLI
// does, checks that the huge texts came whole (in the events; in the
// result, where it is huge, with its sigil), and prints its peak RSS.
func hugeChild(spec string) int {
	kind, size, _ := strings.Cut(spec, ":")
	n, _ := strconv.ParseInt(size, 10, 64)
	dir, err := os.MkdirTemp("", "ralph-huge-*")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer os.RemoveAll(dir)
	view := NewFormatter(io.Discard)
	r := &Runner{Path: os.Args[0], Grace: time.Second, ResultGrace: 5 * time.Second}
	req := loop.RunRequest{
		Prompt:  "go",
		Dir:     dir,
		Env:     []string{fakeAgentEnv + "=huge-line", hugeKindEnv + "=" + kind, hugeBytesEnv + "=" + size, "GORACE=atexit_sleep_ms=0"},
		LogPath: filepath.Join(dir, "iter-1.ndjson"),
	}
	var whole, broken int // huge event texts, whole and not
	req.OnEvent = func(ev loop.Event) {
		if len(ev.Text) > ToolOutputLimit {
			if hugeBody(ev.Text, n) {
				whole++
			} else {
				broken++
			}
		}
		view.Event(ev)
	}
	start := time.Now()
	res, err := r.Run(context.Background(), req)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	if res.Class != loop.ClassSuccess {
		fmt.Printf("class %s: %s\n", res.Class, Describe(res))
		return 1
	}
	if !sigil.Parse(res.Text).TaskDone("t-1") {
		fmt.Printf("no sigil in the result text (%d bytes)\n", len(res.Text))
		return 1
	}
	wantWhole := map[string]int{hugeText: 1, hugeTool: 0, hugeResult: 1, hugeAnswer: 2}[kind]
	if whole != wantWhole || broken != 0 || (kind == hugeResult || kind == hugeAnswer) && !hugeBody(res.Text, n) {
		fmt.Printf("huge texts: %d whole, %d broken, want %d whole; result text of %d bytes\n", whole, broken, wantWhole, len(res.Text))
		return 1
	}
	secs := time.Since(start).Seconds()
	fi, err := os.Stat(req.LogPath)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Printf("kind=%s bytes=%s text=%d log=%d in %.2fs vmhwm_kb=%d\n", kind, size, len(res.Text), fi.Size(), secs, peakRSSKB())
	return 0
}

// TestRunHugeLineMemory runs a session whose stream holds one line of
// -huge-bytes (an assistant text, a tool result, a result text, an answer
// and the result repeating it), and one whose result is 200 MB (not under
// -race), and checks the peak RSS of the process that ran it; the child checks that
// the texts came whole and the sigil was found.
func TestRunHugeLineMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("reads lines of -huge-bytes in child processes")
	}
	skipUnlessLinux(t)
	type run struct {
		kind string
		size int64
	}
	var runs []run
	for _, kind := range hugeKinds {
		runs = append(runs, run{kind, *hugeBytes})
	}
	if *hugeBytes != 200<<20 && !raceEnabled { // under -race it takes half a minute
		runs = append(runs, run{hugeResult, 200 << 20})
	}
	for _, c := range runs {
		t.Run(fmt.Sprintf("%s-%dMB", c.kind, c.size>>20), func(t *testing.T) {
			r := runHugeChild(t, c.kind, c.size)
			peakMB := float64(r.peakKB) / 1024
			lineMB := float64(c.size) / (1 << 20)
			t.Logf("%.0f MB line: peak RSS %.1f MB; %s", lineMB, peakMB, r.report)
			if r.logLen < c.size-200 {
				t.Errorf("raw log holds %d bytes, want the whole stream", r.logLen)
			}
			// One copy of the line, and some room: the process itself
			// (about 10 MB), the reader's buffers, the 4 MB of the line
			// before it moves out of the heap. The answer kind keeps the
			// agent's huge answer (it is the session's final text) while
			// the result line that repeats it is read.
			copies := 1.0
			if c.kind == hugeAnswer {
				copies = 2
			}
			limit := 40 + 1.1*copies*lineMB
			if raceEnabled {
				limit = 200 + 3*copies*lineMB // the race detector's shadow memory
			}
			if peakMB > limit {
				t.Errorf("peak RSS %.1f MB, want under %.0f MB (%.0f copies of the line and room)", peakMB, limit, copies)
			}
		})
	}
}

// BenchmarkRunHugeLine reports the peak RSS (peak-MB) of a process that
// runs one session whose stream holds one huge line, per kind and size.
func BenchmarkRunHugeLine(b *testing.B) {
	skipUnlessLinux(b)
	for _, size := range []int64{64 << 20, 200 << 20} {
		for _, kind := range hugeKinds {
			b.Run(fmt.Sprintf("%s-%dMB", kind, size>>20), func(b *testing.B) {
				var peak int64
				for b.Loop() {
					peak = max(peak, runHugeChild(b, kind, size).peakKB)
				}
				b.ReportMetric(float64(peak)/1024, "peak-MB")
				b.ReportMetric(float64(peak)/1024/float64(size>>20), "peak/line")
			})
		}
	}
}

// skipUnlessLinux skips where there is no /proc to read the peak from;
// elsewhere, too, huge lines stay on the heap (see lineBuf).
func skipUnlessLinux(tb testing.TB) {
	if runtime.GOOS != "linux" {
		tb.Skip("peak RSS is read from /proc/self/status")
	}
}
