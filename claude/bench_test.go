package claude

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fixtureCorpus is every transcript of the pinned CLI in testdata, one
// after the other: typical stream-json as Claude Code 2.1.330 writes it
// (init lines, assistant and user lines, partial-message stream events,
// API retries, results).
func fixtureCorpus(tb testing.TB) []byte {
	files, err := filepath.Glob("testdata/*.ndjson")
	if err != nil || len(files) == 0 {
		if tb == nil {
			panic(fmt.Sprintf("no fixtures: %v", err))
		}
		tb.Fatalf("no fixtures: %v", err)
	}
	var buf bytes.Buffer
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "recorded_") {
			continue // trimmed excerpts, not whole sessions
		}
		data, err := os.ReadFile(f)
		if err != nil {
			panic(err) // the Glob just found it
		}
		buf.Write(data)
	}
	return buf.Bytes()
}

// toolHeavyCorpus is a session whose bytes are mostly tool output, as in a
// real coding session: files read (source code with quotes, tabs and
// newlines escaped), commands run, edits made.
func toolHeavyCorpus(tb testing.TB) []byte {
	src, err := os.ReadFile("decode.go")
	if err != nil {
		if tb == nil {
			panic(err)
		}
		tb.Fatal(err)
	}
	file, _ := json.Marshal(string(src))
	var buf bytes.Buffer
	buf.WriteString(`{"type":"system","subtype":"init","cwd":"/p","session_id":"s","tools":["Bash","Read","Edit"],"model":"claude-sonnet-5-5"}` + "\n")
	for i := range 20 {
		fmt.Fprintf(&buf, `{"type":"assistant","message":{"id":"msg_%d","type":"message","role":"assistant","model":"claude-sonnet-5-5","content":[{"type":"tool_use","id":"toolu_%d","name":"Read","input":{"file_path":"/p/decode.go"}}],"stop_reason":null,"usage":{"input_tokens":2690,"output_tokens":1}},"session_id":"s"}`+"\n", i, i)
		fmt.Fprintf(&buf, `{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_%d","type":"tool_result","content":%s,"is_error":false}]},"session_id":"s","tool_use_result":{"type":"text","file":{"filePath":"/p/decode.go","content":%s}}}`+"\n", i, file, file)
		fmt.Fprintf(&buf, `{"type":"assistant","message":{"id":"msg_b%d","type":"message","role":"assistant","model":"claude-sonnet-5-5","content":[{"type":"text","text":"Now I will run the tests for step %d."}],"usage":{"input_tokens":2790,"output_tokens":12}},"session_id":"s"}`+"\n", i, i)
		fmt.Fprintf(&buf, `{"type":"assistant","message":{"id":"msg_c%d","type":"message","role":"assistant","model":"claude-sonnet-5-5","content":[{"type":"tool_use","id":"toolu_c%d","name":"Bash","input":{"command":"go test ./...","description":"Run tests"}}]},"session_id":"s"}`+"\n", i, i)
		fmt.Fprintf(&buf, `{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_c%d","type":"tool_result","content":"ok  \tgithub.com/x/y\t0.012s\nok  \tgithub.com/x/z\t0.034s","is_error":false}]},"session_id":"s"}`+"\n", i)
	}
	buf.WriteString(`{"type":"result","subtype":"success","is_error":false,"num_turns":41,"result":"<task-done>t-1</task-done>","session_id":"s","total_cost_usd":0.42,"usage":{"input_tokens":100000,"output_tokens":2000}}` + "\n")
	return buf.Bytes()
}

func benchDecode(b *testing.B, corpus []byte) {
	b.SetBytes(int64(len(corpus)))
	b.ReportAllocs()
	r := bytes.NewReader(corpus)
	dec := NewDecoder(r)
	for b.Loop() {
		r.Reset(corpus)
		dec.Reset(r)
		var sess Session
		for {
			line, err := dec.Decode()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					b.Fatal(err)
				}
				break
			}
			for _, ev := range line.Events {
				sess.Add(ev)
			}
		}
		if sess.Result == nil {
			b.Fatal("no result decoded")
		}
	}
}

// BenchmarkDecode measures parse throughput (MB/s) of the decoder over
// typical stream-json.
func BenchmarkDecode(b *testing.B) {
	b.Run("fixtures", func(b *testing.B) { benchDecode(b, fixtureCorpus(b)) })
	b.Run("tool-heavy", func(b *testing.B) { benchDecode(b, toolHeavyCorpus(b)) })
}

// BenchmarkDecodeStdlib is the baseline: the same corpus through
// encoding/json into a map, the obvious way to write the parser.
func BenchmarkDecodeStdlib(b *testing.B) {
	for _, c := range []struct {
		name   string
		corpus []byte
	}{{"fixtures", fixtureCorpus(b)}, {"tool-heavy", toolHeavyCorpus(b)}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.corpus)))
			for b.Loop() {
				for line := range bytes.SplitSeq(c.corpus, []byte("\n")) {
					if len(line) == 0 {
						continue
					}
					var m map[string]any
					if err := json.Unmarshal(line, &m); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

var streamBytes = flag.Int64("stream-bytes", 64<<20, "bytes of stream-json TestDecodeMemoryFlat parses in a child process (1<<30 for the 1 GB figure)")

// repeatReader yields data over and over until n bytes were read.
type repeatReader struct {
	data []byte
	off  int
	n    int64
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	total := 0
	for len(p) > 0 && r.n > 0 {
		c := copy(p, r.data[r.off:])
		if int64(c) > r.n {
			c = int(r.n)
		}
		p, r.off, r.n, total = p[c:], r.off+c, r.n-int64(c), total+c
		if r.off == len(r.data) {
			r.off = 0
		}
	}
	return total, nil
}

// TestDecodeMemoryFlat parses -stream-bytes of stream-json generated on the
// fly (the fixtures, the tool-heavy session and a 1 MB line, round after
// round) in a child
// process and checks its peak RSS: memory must not grow with the stream.
func TestDecodeMemoryFlat(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), decodeChildEnv+"="+strconv.FormatInt(*streamBytes, 10), "GORACE=atexit_sleep_ms=0")
	outb, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, outb)
	}
	// The child reports its own peak (VmHWM): the rusage of a child also
	// counts its parent's peak, since Go forks with a shared address space
	// and Linux carries that mm's high-water mark across exec — a test
	// binary that had grown (other tests, -count=2) failed this test.
	var peakKB int64
	for _, f := range strings.Fields(string(outb)) {
		if v, ok := strings.CutPrefix(f, "vmhwm_kb="); ok {
			peakKB, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if peakKB == 0 {
		t.Fatalf("the child reported no peak RSS: %s", outb)
	}
	peakMB := float64(peakKB) / 1024
	t.Logf("parsed %d MB; peak RSS %.1f MB; %s", *streamBytes>>20, peakMB, bytes.TrimSpace(outb))
	limit := 50.0
	if raceEnabled {
		limit = 200 // the race detector's shadow memory
	}
	if peakMB > limit {
		t.Errorf("peak RSS %.1f MB, want under %.0f MB", peakMB, limit)
	}
	if !bytes.Contains(outb, []byte("results=")) || bytes.Contains(outb, []byte("results=0")) {
		t.Errorf("the child decoded no results: %s", outb)
	}
}

// decodeChildEnv switches the test binary into TestDecodeMemoryFlat's
// child: decode that many bytes, print counts, exit.
const decodeChildEnv = "RALPH_DECODE_BYTES"

func decodeMemoryChild(n int64) int {
	corpus := append(fixtureCorpus(nil), toolHeavyCorpus(nil)...)
	huge := `{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"h","content":"` + strings.Repeat("h", 1<<20) + `"}]}}` + "\n"
	corpus = append(corpus, huge...)
	start := time.Now()
	dec := NewDecoder(&repeatReader{data: corpus, n: n})
	lines, results := 0, 0
	for {
		line, err := dec.Decode()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				fmt.Println(err)
				return 1
			}
			break
		}
		lines++
		for _, ev := range line.Events {
			if ev.Result != nil {
				results++
			}
		}
	}
	secs := time.Since(start).Seconds()
	fmt.Printf("lines=%d results=%d in %.2fs (%.0f MB/s) vmhwm_kb=%d\n", lines, results, secs, float64(n)/1e6/secs, peakRSSKB())
	return 0
}

// peakRSSKB is this process's peak resident set (VmHWM), in KiB, or 0.
func peakRSSKB() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
